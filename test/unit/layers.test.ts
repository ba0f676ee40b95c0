/**
 * The layers of docs/architecture.md point only down: dependency-cruiser reads every import of
 * src/ and workers/ (type-only ones included) against the rules of .dependency-cruiser.cjs. A
 * failure names each import that breaks a rule, and the rule says which way is allowed.
 */
import { fileURLToPath } from 'node:url';
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('import directions', () => {
  it('no import in src/ or workers/ breaks a layer rule of .dependency-cruiser.cjs', async () => {
    const options = await extractDepcruiseOptions(`${root}.dependency-cruiser.cjs`);
    // baseDir: the config's paths, and the modules' names, are relative to the repository.
    const { output } = await cruise(['src', 'workers'], { ...options, baseDir: root, validate: true });
    if (typeof output === 'string') throw new Error('expected the JSON result of a cruise');
    // Enough modules that a wrong path (nothing cruised, nothing violated) cannot pass.
    expect(output.summary.totalCruised).toBeGreaterThan(100);
    const violations = output.summary.violations.map(
      (v) => `${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (cycle: ${v.cycle.map((step) => step.name).join(' → ')})` : ''}`,
    );
    expect(violations).toEqual([]);
  });
});
