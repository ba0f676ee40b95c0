/**
 * The layers of docs/architecture.md point only down: dependency-cruiser reads every import of
 * src/ and workers/ (type-only ones included) against the rules of .dependency-cruiser.cjs. A
 * failure names each import that breaks a rule, and the rule says which way is allowed. No file
 * is exempt: one that the rules place in no layer fails too.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Each violation of a cruise over `baseDir` (the config's paths, and the modules' names, are relative to it) as one line. */
async function violationsIn(baseDir: string, { atLeast }: { atLeast: number }): Promise<string[]> {
  const options = await extractDepcruiseOptions(`${root}.dependency-cruiser.cjs`);
  const { output } = await cruise(['src', 'workers'], { ...options, baseDir, validate: true });
  if (typeof output === 'string') throw new Error('expected the JSON result of a cruise');
  // Enough modules that a wrong path (nothing cruised, nothing violated) cannot pass.
  expect(output.summary.totalCruised).toBeGreaterThanOrEqual(atLeast);
  return output.summary.violations.map(
    (v) => `${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (cycle: ${v.cycle.map((step) => step.name).join(' → ')})` : ''}`,
  );
}

describe('import directions', () => {
  it('no import in src/ or workers/ breaks a layer rule of .dependency-cruiser.cjs', async () => {
    expect(await violationsIn(root, { atLeast: 100 })).toEqual([]);
  });

  describe('the rules, over a tree made to break them', () => {
    let tree: string;
    const files: Record<string, string> = {
      // In no layer: what it imports, and who imports it, would go unchecked.
      'src/stray.ts': "import { table } from './db/table.ts';\nexport const stray = table;\n",
      'src/constants.ts': 'export const limit = 1;\n',
      'src/alone.ts': 'export const alone = 1;\n',
      'src/db/table.ts': "import { limit } from '../constants.ts';\nexport const table = limit;\n",
      // Upward: the database reading a rule.
      'src/db/upward.ts': "import { rule } from '../auth/rule.ts';\nexport const upward = rule;\n",
      'src/auth/rule.ts': 'export const rule = 1;\n',
      // The foundation leaning on a layer; a layer leaning on the composition root.
      'src/foundation/leaning.ts': "import { table } from '../db/table.ts';\nexport const leaning = table;\n",
      'src/db/configured.ts': "import { loaded } from '../config.ts';\nexport const configured = loaded;\n",
      'src/config.ts': 'export const loaded = 1;\n',
      'workers/index.ts': "import { loaded } from '../src/config.ts';\nexport const worker = loaded;\n",
    };

    beforeAll(async () => {
      tree = await mkdtemp(join(tmpdir(), 'mnemo-layers-'));
      for (const [path, text] of Object.entries(files)) {
        await mkdir(dirname(join(tree, path)), { recursive: true });
        await writeFile(join(tree, path), text);
      }
    });
    afterAll(() => rm(tree, { recursive: true, force: true }));

    it('name a file placed in no layer, an upward import, and the foundation importing a layer', async () => {
      const violations = await violationsIn(tree, { atLeast: Object.keys(files).length });
      expect(violations.sort()).toEqual(
        [
          'every-file-in-a-layer: src/stray.ts → src/db/table.ts',
          'every-file-in-a-layer: src/db/table.ts → src/constants.ts',
          'every-file-in-a-layer: src/alone.ts → src/alone.ts',
          'db-points-down: src/db/upward.ts → src/auth/rule.ts',
          'db-points-down: src/db/configured.ts → src/config.ts',
          'foundation-imports-nothing-of-ours: src/foundation/leaning.ts → src/db/table.ts',
        ].sort(),
      );
    });
  });
});
