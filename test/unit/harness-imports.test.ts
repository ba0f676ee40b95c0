/**
 * The harness keeps its shape (docs/testing.md, decision 0103): support/ is the one kit test/ and
 * bench/ share, and it imports neither; bench/ imports nothing of test/; support/ runs without
 * vitest (the bench is no test run); src/ and workers/ import none of the three. dependency-cruiser
 * reads every import of bench/ and support/ (and of src/ they reach) against .dependency-cruiser.cjs.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

async function cruiseAt(baseDir: string, paths: string[]): Promise<ICruiseResult> {
  const options = await extractDepcruiseOptions(`${root}.dependency-cruiser.cjs`);
  // baseDir: the config's paths, and the modules' names, are relative to it.
  const { output } = await cruise(paths, { ...options, baseDir, validate: true });
  if (typeof output === 'string') throw new Error('expected the JSON result of a cruise');
  return output;
}

const violationsOf = (output: ICruiseResult) => output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);

describe('the harness’s import directions', () => {
  it('no import in bench/ or support/ breaks a rule of .dependency-cruiser.cjs', async () => {
    const output = await cruiseAt(root, ['bench', 'support']);
    // Both folders were read (a wrong path would cruise nothing and pass).
    const sources = output.modules.map((m) => m.source);
    expect(sources.filter((s) => s.startsWith('bench/')).length).toBeGreaterThan(10);
    expect(sources.filter((s) => s.startsWith('support/')).length).toBeGreaterThan(5);
    expect(violationsOf(output)).toEqual([]);
  });

  it('the rules name each import that would break the shape', async () => {
    // The same rules over a tree made for the purpose: one import of each kind they forbid.
    const tree = mkdtempSync(join(tmpdir(), 'mnemo-harness-imports-'));
    const file = (path: string, text: string) => {
      mkdirSync(dirname(join(tree, path)), { recursive: true });
      writeFileSync(join(tree, path), text);
    };
    try {
      file('test/helpers/wait.ts', 'export const sleep = 1;\n');
      file('bench/writes.ts', "import { sleep } from '../test/helpers/wait.ts';\nexport const writes = sleep;\n");
      file('support/seed.ts', "import { writes } from '../bench/writes.ts';\nimport { sleep } from '../test/helpers/wait.ts';\nexport const seed = writes + sleep;\n");
      file('src/memory/keyword.ts', "import { seed } from '../../support/seed.ts';\nexport const keyword = seed;\n");
      const output = await cruiseAt(tree, ['bench', 'support', 'src']);
      expect(violationsOf(output).sort()).toEqual([
        'bench-imports-no-test: bench/writes.ts → test/helpers/wait.ts',
        'product-imports-no-harness: src/memory/keyword.ts → support/seed.ts',
        'support-imports-no-test-or-bench: support/seed.ts → bench/writes.ts',
        'support-imports-no-test-or-bench: support/seed.ts → test/helpers/wait.ts',
      ]);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });
});
