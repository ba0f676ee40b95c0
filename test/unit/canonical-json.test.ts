import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/core/canonical-json.ts';

describe('canonicalJson', () => {
  it('sorts keys at every depth by code unit, leaves out undefined members, and writes what JSON cannot say as null', () => {
    const value = {
      b: [1, { d: undefined, c: 'x' }, undefined],
      a: null,
      é: 1,
      Z: true,
      n: -0,
      f: 1.5e300,
      s: 'quote" \u2028 😀',
      nested: { y: [Number.NaN, Number.POSITIVE_INFINITY], '10': 'ten', '9': 'nine', '': 'empty' },
      when: new Date(0),
    };
    expect(canonicalJson(value)).toBe(
      '{"Z":true,"a":null,"b":[1,{"c":"x"},null],"f":1.5e+300,"n":0,"nested":{"":"empty","10":"ten","9":"nine","y":[null,null]},' +
        '"s":"quote\\" \u2028 😀","when":{},"é":1}',
    );
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson('x')).toBe('"x"');
  });

  it('gives the same text whatever the key order', () => {
    expect(canonicalJson({ a: 1, b: { c: 2, d: [3, { e: 4, f: 5 }] } })).toBe(canonicalJson({ b: { d: [3, { f: 5, e: 4 }], c: 2 }, a: 1 }));
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  // Request hashes stored by http/idempotency.ts and keys sent by mnemo import were computed by the
  // two copies this function replaced: these digests are theirs, so a stored key still matches.
  it('hashes a request exactly as the stored idempotency records and import keys were hashed', () => {
    const principal = { tenantId: 't-1', sub: 'u-1', role: 'admin', projects: { read: ['p2', 'p1'], write: [] }, orgs: { read: [], write: [] } };
    const body = { type: 'acme.note', content: { text: 'hello', z: 1, a: [2, 1] }, scope: { projectId: 'p1' } };
    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    expect(sha256(`POST\n/v1/memory/facts\n${canonicalJson(principal)}\n${canonicalJson(body)}`)).toBe(
      'f26491ca4253aaf299ae642b8ec23d538f4708d1819d066e21369c8c809ced25',
    );
    expect(sha256(canonicalJson({ path: 'notes/n.md', body }))).toBe('1333524ca4129aaa01958c4162c5bffd3d57aa1651db341837c2f16213c16446');
  });
});
