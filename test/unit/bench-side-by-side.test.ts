import { describe, expect, it } from 'vitest';
import { parseOptions } from '../../bench/side-by-side.ts';
import type { SideBySideRun } from '../../bench/side-by-side-run.ts';
import { renderSvg } from '../../bench/results.ts';
import { VectorSpace } from '../../bench/synthetic.ts';
import { throughput } from '../../bench/harness.ts';
import { sleep } from '../../support/wait.ts';

const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe('the bench’s synthetic vectors', () => {
  const space = new VectorSpace(64);

  it('are unique: no two points of a cluster coincide', () => {
    const points = Array.from({ length: 200 }, (_, seed) => space.point(3, seed));
    const keys = new Set(points.map((p) => p.map((x) => x.toFixed(6)).join(',')));
    expect(keys.size).toBe(points.length);
  });

  it('are clustered: closer to their own centroid than to any other', () => {
    for (let cluster = 0; cluster < 20; cluster++) {
      const point = space.point(cluster, 1000 + cluster);
      const own = cosine(point, space.centroids[cluster]!);
      const nearestOther = Math.max(...space.centroids.filter((_, i) => i !== cluster).map((c) => cosine(point, c)));
      expect(own).toBeGreaterThan(nearestOther + 0.3);
    }
  });

  it('place a text naming a cluster in that cluster, deterministically', () => {
    const v = space.embedText('cluster-42 boundary layer transition');
    expect(v).toEqual(space.embedText('cluster-42 boundary layer transition'));
    const best = space.centroids.map((c, i) => [cosine(v, c), i] as const).sort((a, b) => b[0] - a[0])[0]![1];
    expect(best).toBe(42);
  });
});

describe('npm run bench options', () => {
  it('default size, every section', () => {
    const options = parseOptions([]);
    if (options === 'help') throw new Error('expected options');
    expect(options.profile.sizes).toEqual([1_000, 10_000]);
    expect(options.sections).toContain('langgraph');
  });

  it('explicit sizes and sections', () => {
    const options = parseOptions(['--facts=100_000,10000', '--only=keyword,recall']);
    if (options === 'help') throw new Error('expected options');
    expect(options.profile.sizes).toEqual([10_000, 100_000]);
    expect(options.sections).toEqual(['keyword', 'recall']);
  });

  it('names what is wrong', () => {
    expect(() => parseOptions(['--only=keyword,nonsense'])).toThrow(/unknown section nonsense/);
    expect(() => parseOptions(['--size=huge'])).toThrow(/--size must be default or full/);
    expect(() => parseOptions(['--facts=ten'])).toThrow(/--facts takes whole numbers/);
    expect(() => parseOptions(['--colour'])).toThrow(/unknown option --colour/);
    expect(parseOptions(['--help'])).toBe('help');
  });
});

describe('the latency chart', () => {
  it('draws one line per mode and side with a point per size', () => {
    const p = (p50: number) => ({ p50, p95: p50 * 2, p99: p50 * 3, n: 10 });
    const run = {
      machine: { date: '2026-12-01 04:00 UTC', commit: 'abc1234', uname: 'Linux', cpus: 2, memoryGiB: 8, loadBefore: '1.00' },
      search: [1_000, 10_000, 100_000].flatMap((size, i) =>
        (['keyword', 'semantic', 'both'] as const).map((mode) => ({ size, mode, api: p(10 * (i + 1)), raw: p(5 * (i + 1)), load: 1 })),
      ),
      langgraph: [{ size: 1_000, search: p(12) }],
    } as unknown as SideBySideRun;
    const svg = renderSvg(run);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<path /g)).toHaveLength(7);
    expect(svg.match(/<circle /g)).toHaveLength(19);
    expect(svg).toContain('keyword raw SQL');
    expect(svg).not.toContain('NaN');
  });
});

describe('the bench’s throughput', () => {
  it('counts every call of concurrent clients: a rate that N clients each add to is not divided by N', async () => {
    let calls = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    const seconds = 0.3;
    const started = performance.now();
    const rate = await throughput(8, seconds, async () => {
      calls++;
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      await sleep(2);
      inFlight--;
      return 1;
    });
    const elapsed = (performance.now() - started) / 1000;
    // Every call finishes before throughput returns, and it measured no longer than `elapsed`, no
    // shorter than `seconds`: with the lost updates of issue 30 the rate was about calls / (8 × elapsed).
    expect(rate).toBeGreaterThanOrEqual(calls / elapsed);
    expect(rate).toBeLessThanOrEqual(calls / seconds);
    // The eight clients did call at once (not a count of calls, which a loaded machine's timers
    // make small: 165 in one CI run).
    expect(mostInFlight).toBe(8);
    expect(calls).toBeGreaterThan(8);
  });
});
