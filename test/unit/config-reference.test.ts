/**
 * docs/operations/configuration.md is generated from the configuration schema (src/config.ts,
 * scripts/config-reference.ts): this fails when the file drifts from the schema, when a variable
 * is read without a description, and when the code reads a variable the reference does not name.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { referencePath, readElsewhere, renderConfigurationReference } from '../../scripts/config-reference.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { environmentSettings, environmentVariables } from '../../src/foundation/environment.ts';
import { projectRoot } from '../../support/processes.ts';

const committed = existsSync(referencePath) ? readFileSync(referencePath, 'utf8') : '';

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|js)$/.test(entry.name)) yield path;
  }
}

describe('docs/operations/configuration.md', () => {
  it('is what src/config.ts makes', () => {
    expect(committed, 'docs/operations/configuration.md is out of date: run npm run docs:config').toBe(renderConfigurationReference());
  });

  it('describes every variable the schema reads', () => {
    expect(environmentVariables.length).toBeGreaterThan(30);
    for (const { name, doc } of environmentSettings) {
      expect(doc?.meaning.trim(), `${name} has no meaning in src/config.ts`).toBeTruthy();
      expect(doc?.readBy.length, `${name} is read by no one`).toBeGreaterThan(0);
      expect(committed, `${name} has no section`).toContain(`### \`${name}\``);
    }
  });

  it('refuses to write a reference with a variable nobody described', () => {
    const undescribed = [...environmentSettings, { name: 'MNEMO_NEW_SETTING', schema: z.string().optional(), doc: undefined }];
    expect(() => renderConfigurationReference(undescribed)).toThrow('MNEMO_NEW_SETTING has no description');
  });

  it('names every variable the code reads', () => {
    const known = new Set([...environmentVariables, ...Object.keys(readElsewhere)]);
    const read = new Map<string, string>();
    for (const top of ['src', 'workers', 'bin']) {
      for (const file of sourceFiles(join(projectRoot, top))) {
        for (const match of readFileSync(file, 'utf8').matchAll(/\benv(?:\.|\[['"`])([A-Z][A-Z0-9_]+)/g)) read.set(match[1]!, relative(projectRoot, file));
      }
    }
    expect(read.size).toBeGreaterThan(5);
    for (const [name, file] of read) expect(known.has(name), `${file} reads ${name}, which src/config.ts does not describe`).toBe(true);
    for (const [name, file] of Object.entries(readElsewhere)) {
      expect(read.get(name), `${name} is no longer read in ${file}`).toBe(file);
      expect(committed).toContain(`\`${name}\``);
    }
  });

  it('says true things about empty values and the error line', () => {
    // "Empty is unset": an empty value takes the same path as a missing one, for every variable.
    for (const { name, schema } of environmentSettings) {
      expect(schema.safeParse(''), name).toEqual(schema.safeParse(undefined));
    }
    expect(() => loadConfig({ MNEMO_JWT_SECRET: 'x'.repeat(32), PORT: '0' }, 'api')).toThrow(ConfigError);
    expect(() => loadConfig({ MNEMO_JWT_SECRET: 'x'.repeat(32), PORT: '0' }, 'api')).toThrow('Invalid configuration: PORT must be between 1 and 65535');
    expect(committed).toContain('`Invalid configuration: PORT must be between 1 and 65535`');
  });
});
