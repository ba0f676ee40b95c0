/**
 * Reciprocal rank fusion of the keyword and semantic lists (DESIGN §5), for retrieval's mode
 * "both": how deep each list is read, and how two ranked lists become one.
 */
import type { RankedId } from './keyword.ts';

/** RRF's k, and the least depth of each list fused (100 beat 40 on every measure when one list was weak). */
export const RRF_K = 60;
export const FUSION_DEPTH = 100;

/**
 * Reciprocal rank fusion: `score = Σ w / (k + rank)`, ranks from 1 in each list. Equal scores keep
 * the order in which the lists first saw them (the first list before the second).
 */
export function fuse(lists: readonly { ranked: readonly RankedId[]; weight: number }[], k = RRF_K): RankedId[] {
  const scores = new Map<string, { score: number; seen: number }>();
  let seen = 0;
  for (const { ranked, weight } of lists) {
    ranked.forEach(({ id }, index) => {
      const entry = scores.get(id) ?? { score: 0, seen: seen++ };
      entry.score += weight / (k + index + 1);
      scores.set(id, entry);
    });
  }
  return [...scores]
    .sort(([, a], [, b]) => b.score - a.score || a.seen - b.seen)
    .map(([id, { score }]) => ({ id, score }));
}
