import { PgDialect } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import {
  canRead,
  canWrite,
  type Principal,
  type Scope,
  type ScopeKind,
  scopeKind,
  visibleTo,
} from '../../src/auth/permissions.ts';
import { facts } from '../../src/db/schema.ts';

const keys = ['orgId', 'projectId', 'userId', 'participantId', 'threadId', 'sessionId'] as const;
type Key = (typeof keys)[number];

/** Every subset of the six scope keys (2^6 = 64). */
const subsets: Key[][] = Array.from({ length: 1 << keys.length }, (_, mask) =>
  keys.filter((_, bit) => mask & (1 << bit)),
);

/** Scope values: the given ids for org/project/user, `<key>-<suffix>` for the other keys. */
const ids =
  (given: Partial<Record<Key, string>>, suffix: string) =>
  (k: Key): string =>
    given[k] ?? `${k}-${suffix}`;

/** The scope with exactly `present` keys set; absent keys are omitted, undefined or null. */
function scopeOf(present: Key[], absent: 'omit' | 'undefined' | 'null' = 'omit', value = (k: Key) => `${k}-1`): Scope {
  const scope: Scope = {};
  for (const k of keys) {
    if (present.includes(k)) scope[k] = value(k);
    else if (absent === 'undefined') scope[k] = undefined;
    else if (absent === 'null') scope[k] = null;
  }
  return scope;
}

/**
 * The scope kinds exactly as the contract words them, each on its own. Checking that exactly
 * one of them matches also checks that the definitions partition all 64 combinations.
 */
function expectedKind(present: Key[]): ScopeKind {
  const has = (k: Key) => present.includes(k);
  const conversation = has('participantId') || has('threadId') || has('sessionId');
  const matches: ScopeKind[] = [];
  if (present.length === 0) matches.push('tenant');
  if (present.length === 1 && has('orgId')) matches.push('org');
  if (has('projectId') && !conversation && !has('userId')) matches.push('project');
  if (has('projectId') && conversation && !has('userId')) matches.push('project-conversation');
  if (has('userId')) matches.push('user');
  if (conversation && !has('projectId') && !has('userId')) matches.push('invalid');
  expect(matches, `kinds matching {${present.join(', ')}}`).toHaveLength(1);
  return matches[0]!;
}

describe('scopeKind', () => {
  it.each(subsets.map((present) => [present.join('+') || '(none)', present] as const))('%s', (_, present) => {
    const expected = expectedKind(present);
    // null and undefined are the same "absent", whether the key is omitted or set.
    expect(scopeKind(scopeOf(present, 'omit'))).toBe(expected);
    expect(scopeKind(scopeOf(present, 'undefined'))).toBe(expected);
    expect(scopeKind(scopeOf(present, 'null'))).toBe(expected);
  });

  it('spot checks', () => {
    expect(scopeKind({})).toBe('tenant');
    expect(scopeKind({ orgId: 'o' })).toBe('org');
    expect(scopeKind({ orgId: 'o', projectId: 'p' })).toBe('project');
    expect(scopeKind({ projectId: 'p', threadId: 't' })).toBe('project-conversation');
    expect(scopeKind({ userId: 'u', sessionId: 's' })).toBe('user');
    expect(scopeKind({ orgId: 'o', sessionId: 's' })).toBe('invalid');
    expect(scopeKind({ participantId: 'x', userId: null, projectId: undefined })).toBe('invalid');
  });
});

// ---------------------------------------------------------------------------------------------
// canRead / canWrite matrix

const grants = (g: { pr?: string[]; pw?: string[]; or?: string[]; ow?: string[] } = {}) => ({
  projects: { read: g.pr ?? [], write: g.pw ?? [] },
  orgs: { read: g.or ?? [], write: g.ow ?? [] },
});

const principals = {
  admin: { tenantId: 't1', sub: 'admin-1', role: 'admin', ...grants() },
  none: { tenantId: 't1', sub: 'member-0', role: 'member', ...grants() },
  projRead: { tenantId: 't1', sub: 'member-1', role: 'member', ...grants({ pr: ['p1'] }) },
  projWrite: { tenantId: 't1', sub: 'member-2', role: 'member', ...grants({ pw: ['p1'] }) },
  orgRead: { tenantId: 't1', sub: 'member-3', role: 'member', ...grants({ or: ['o1'] }) },
  orgWrite: { tenantId: 't1', sub: 'member-4', role: 'member', ...grants({ ow: ['o1'] }) },
  owner: { tenantId: 't1', sub: 'u1', role: 'member', ...grants() },
  svcWrite: { tenantId: 't1', sub: 'svc-1', role: 'service', ...grants({ pw: ['p1'] }) },
  // Every kind of grant, but on a different project/org/user: must see only tenant facts.
  other: { tenantId: 't1', sub: 'u2', role: 'member', ...grants({ pr: ['p2'], pw: ['p2'], or: ['o2'], ow: ['o2'] }) },
  // A service with no grants is no better than a member with none.
  svcNone: { tenantId: 't1', sub: 'svc-0', role: 'service', ...grants() },
} satisfies Record<string, Principal>;
type Who = keyof typeof principals;

const scopes = {
  tenant: {},
  org: { orgId: 'o1' },
  'org+project': { orgId: 'o1', projectId: 'p1' },
  project: { projectId: 'p1' },
  'project+participant': { projectId: 'p1', participantId: 'pa1' },
  'project+thread': { projectId: 'p1', threadId: 'th1' },
  'project+session': { projectId: 'p1', sessionId: 's1' },
  'org+project+thread': { orgId: 'o1', projectId: 'p1', threadId: 'th1' },
  user: { userId: 'u1' },
  'user+project': { userId: 'u1', projectId: 'p1' },
  'user+participant': { userId: 'u1', participantId: 'pa1' },
  'user+org+project+session': { userId: 'u1', orgId: 'o1', projectId: 'p1', sessionId: 's1' },
  'invalid:participant': { participantId: 'pa1' },
  'invalid:thread': { threadId: 'th1' },
  'invalid:org+session': { orgId: 'o1', sessionId: 's1' },
} satisfies Record<string, Scope>;
type Where = keyof typeof scopes;

const kindOf: Record<Where, ScopeKind> = {
  tenant: 'tenant',
  org: 'org',
  'org+project': 'project',
  project: 'project',
  'project+participant': 'project-conversation',
  'project+thread': 'project-conversation',
  'project+session': 'project-conversation',
  'org+project+thread': 'project-conversation',
  user: 'user',
  'user+project': 'user',
  'user+participant': 'user',
  'user+org+project+session': 'user',
  'invalid:participant': 'invalid',
  'invalid:thread': 'invalid',
  'invalid:org+session': 'invalid',
};

/** The expected outcomes, written out: 'RW' read and write, 'R' read only, '-' neither. */
type Access = 'RW' | 'R' | '-';
const who: Who[] = ['admin', 'none', 'projRead', 'projWrite', 'orgRead', 'orgWrite', 'owner', 'svcWrite', 'other', 'svcNone'];
// prettier-ignore
const expected: Record<Where, Access[]> = {
  //                           admin  none projRead projWrite orgRead orgWrite owner svcWrite other svcNone
  tenant:                     ['RW',  'R', 'R',     'R',      'R',    'R',     'R',  'R',     'R',  'R'],
  org:                        ['RW',  '-', '-',     '-',      'R',    'RW',    '-',  '-',     '-',  '-'],
  'org+project':              ['RW',  '-', 'R',     'RW',     '-',    '-',     '-',  'RW',    '-',  '-'],
  project:                    ['RW',  '-', 'R',     'RW',     '-',    '-',     '-',  'RW',    '-',  '-'],
  'project+participant':      ['RW',  '-', '-',     'RW',     '-',    '-',     '-',  'RW',    '-',  '-'],
  'project+thread':           ['RW',  '-', '-',     'RW',     '-',    '-',     '-',  'RW',    '-',  '-'],
  'project+session':          ['RW',  '-', '-',     'RW',     '-',    '-',     '-',  'RW',    '-',  '-'],
  'org+project+thread':       ['RW',  '-', '-',     'RW',     '-',    '-',     '-',  'RW',    '-',  '-'],
  user:                       ['RW',  '-', '-',     '-',      '-',    '-',     'RW', '-',     '-',  '-'],
  'user+project':             ['RW',  '-', '-',     '-',      '-',    '-',     'RW', '-',     '-',  '-'],
  'user+participant':         ['RW',  '-', '-',     '-',      '-',    '-',     'RW', '-',     '-',  '-'],
  'user+org+project+session': ['RW',  '-', '-',     '-',      '-',    '-',     'RW', '-',     '-',  '-'],
  'invalid:participant':      ['-',   '-', '-',     '-',      '-',    '-',     '-',  '-',     '-',  '-'],
  'invalid:thread':           ['-',   '-', '-',     '-',      '-',    '-',     '-',  '-',     '-',  '-'],
  'invalid:org+session':      ['-',   '-', '-',     '-',      '-',    '-',     '-',  '-',     '-',  '-'],
};

const cases = (Object.keys(scopes) as Where[]).flatMap((where) =>
  who.map((w, i) => ({ where, who: w, access: expected[where][i]! })),
);

describe('canRead / canWrite', () => {
  it('the table covers every scope × principal', () => {
    for (const where of Object.keys(scopes) as Where[]) expect(expected[where]).toHaveLength(who.length);
    expect(cases).toHaveLength(Object.keys(scopes).length * who.length);
  });

  it.each(Object.entries(kindOf))('representative scope %s is of kind %s', (where, kind) => {
    expect(scopeKind(scopes[where as Where])).toBe(kind);
  });

  it.each(cases)('$where × $who → $access', ({ where, who, access }) => {
    const principal = principals[who];
    const scope = scopes[where];
    expect(canRead(principal, scope)).toBe(access !== '-');
    expect(canWrite(principal, scope)).toBe(access === 'RW');
  });

  it('write implies read for every principal on every one of the 64 key combinations', () => {
    for (const present of subsets) {
      for (const p of Object.values(principals)) {
        const scope = scopeOf(present, 'null', ids({ orgId: 'o1', projectId: 'p1', userId: 'u1' }, 'x'));
        if (canWrite(p, scope)) expect(canRead(p, scope)).toBe(true);
      }
    }
  });

  it('the tenant id of the principal plays no part (it is enforced elsewhere)', () => {
    const elsewhere = { ...principals.projWrite, tenantId: 'another-tenant' };
    expect(canRead(elsewhere, scopes.project)).toBe(true);
    expect(canWrite(elsewhere, scopes.project)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// visibleTo

const dialect = new PgDialect();
const render = (p: Principal) => dialect.sqlToQuery(visibleTo(p, facts));

const columnNames: Record<Key, string> = {
  orgId: 'org_id',
  projectId: 'project_id',
  userId: 'user_id',
  participantId: 'participant_id',
  threadId: 'thread_id',
  sessionId: 'session_id',
};

/**
 * Evaluates the rendered condition for one row, without a database, by translating the small
 * SQL subset visibleTo emits (column refs, is [not] null, = $n, in ($n, ...), and/or,
 * true/false, parentheses) into JavaScript. Anything else left over fails the test, so a change
 * in the emitted SQL shows up here rather than being silently misread. SQL's NULL-vs-false
 * difference does not matter: the condition has no NOT, so an unknown behaves like false.
 */
function evaluate(query: { sql: string; params: unknown[] }, row: Scope): boolean {
  const js = query.sql
    .replace(/"facts"\."(\w+)"/g, 'r.$1')
    .replace(/(r\.\w+) in \(((?:\$\d+, )*\$\d+)\)/g, '[$2].includes($1)')
    .replace(/(r\.\w+) = (\$\d+)/g, '$1 === $2')
    .replace(/\$(\d+)/g, (_, n: string) => `p[${Number(n) - 1}]`)
    .replace(/ is not null/g, ' != null')
    .replace(/ is null/g, ' == null')
    .replace(/ and /g, ' && ')
    .replace(/ or /g, ' || ');
  const leftover = js.replace(/r\.\w+|p\[\d+\]|\.includes|true|false|null|===|!=|==|&&|\|\||[\s()[\],]/g, '');
  expect(leftover, `untranslated SQL in: ${query.sql}`).toBe('');
  const r = Object.fromEntries(keys.map((k) => [columnNames[k], row[k] ?? null]));
  return Boolean(new Function('r', 'p', `return (${js});`)(r, query.params));
}

describe('visibleTo', () => {
  it('is `true` for an admin', () => {
    expect(render(principals.admin)).toEqual({ sql: 'true', params: [] });
  });

  it('binds every id as a parameter, never as SQL text', () => {
    const evil = "x' or 1=1 --";
    const p: Principal = {
      tenantId: evil,
      sub: evil,
      role: 'member',
      projects: { read: [`${evil}pr`], write: [`${evil}pw`] },
      orgs: { read: [`${evil}or`], write: [`${evil}ow`] },
    };
    const { sql, params } = render(p);
    expect(sql).not.toContain("'");
    expect(sql).not.toContain('--');
    expect(sql).not.toContain('1=1');
    expect(sql).not.toContain('x');
    expect(params).toEqual(expect.arrayContaining([evil, `${evil}pr`, `${evil}pw`, `${evil}or`, `${evil}ow`]));
    // Only placeholders, and one per parameter.
    expect(sql.match(/\$\d+/g)).toHaveLength(params.length);
  });

  it.each(['none', 'svcNone', 'owner'] as const)('renders valid SQL with empty grant lists (%s)', (name) => {
    const { sql, params } = render(principals[name]);
    expect(sql).not.toMatch(/in\s*\(\s*\)/i);
    expect(sql).not.toMatch(/\(\s*\)/);
    // Balanced parentheses.
    let depth = 0;
    for (const ch of sql) {
      depth += ch === '(' ? 1 : ch === ')' ? -1 : 0;
      expect(depth).toBeGreaterThanOrEqual(0);
    }
    expect(depth).toBe(0);
    expect(params).toEqual([principals[name].sub]);
  });

  it('agrees with the literal table for every non-admin principal', () => {
    for (const c of cases) {
      if (c.who === 'admin') continue;
      expect(evaluate(render(principals[c.who]), scopes[c.where]), `${c.where} × ${c.who}`).toBe(c.access !== '-');
    }
  });

  it('agrees with canRead on all 64 key combinations, matching and non-matching ids', () => {
    const matching = ids({ orgId: 'o1', projectId: 'p1', userId: 'u1' }, '1');
    const foreign = ids({ orgId: 'o2', projectId: 'p2', userId: 'u2' }, '2');
    const mixed = ids({ orgId: 'o1', projectId: 'p2', userId: 'u3' }, '3');
    let checked = 0;
    for (const [name, p] of Object.entries(principals)) {
      if (p.role === 'admin') continue;
      const query = render(p);
      for (const present of subsets) {
        for (const value of [matching, foreign, mixed]) {
          const row = scopeOf(present, 'null', value);
          expect(evaluate(query, row), `${name} on {${present.join(', ')}} = ${JSON.stringify(row)}`).toBe(
            canRead(p, row),
          );
          checked++;
        }
      }
    }
    expect(checked).toBe(9 * 64 * 3);
  });

  it('excludes invalid scopes for a principal holding every grant', () => {
    const everything: Principal = {
      tenantId: 't1',
      sub: 'u1',
      role: 'service',
      projects: { read: ['p1'], write: ['p1'] },
      orgs: { read: ['o1'], write: ['o1'] },
    };
    const query = render(everything);
    for (const present of subsets) {
      const row = scopeOf(present, 'null', ids({ orgId: 'o1', projectId: 'p1', userId: 'u1' }, 'x'));
      expect(evaluate(query, row)).toBe(scopeKind(row) !== 'invalid');
    }
  });
});
