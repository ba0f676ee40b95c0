/**
 * Trains the instruction-like check's second opinion (src/memory/remember/instruction-model.ts)
 * and writes its weights to src/memory/remember/instruction-model.json.
 *
 *   node --import tsx scripts/train-instruction-model.ts [--cross-validate] [--dry-run]
 *
 * Reads only the repository: the labelled sets of test/fixtures/instruction-like/ that
 * TRAINING_SETS names (README.md there says who wrote each and how it was used). The sets it
 * does not name stay unseen, so the figures the tests print on them are honest.
 * `--cross-validate` first trains once per authored set with that set left out and prints how
 * the model does on it: an estimate, before the held-out set, of what a new author's texts get.
 *
 * A logistic regression: logit = bias + Σ weight(feature) · count / sqrt(features in the text),
 * fitted by full-batch Adam with an L2 penalty, each set's benign and instruction-like halves
 * weighed alike so that no one large set decides the boundary. Deterministic: same data, same file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { features, sigmoid, type InstructionModelFile } from '../src/memory/remember/instruction-model.ts';
import { instructionViews } from '../src/memory/remember/instruction-views.ts';

interface Labelled {
  text: string;
  instructionLike: boolean;
}

/**
 * The sets trained on, and how much each counts: benign conversation counts more, because the
 * target is ≤ 0.2% false positives there. holdout-3 (never tuned on by the patterns either),
 * chat-b and the final held-out set are not here: they are what the tests measure on.
 */
export const TRAINING_SETS: readonly { set: string; weight: number; authored: boolean }[] = [
  { set: 'dev', weight: 1, authored: true },
  { set: 'holdout', weight: 1, authored: true },
  { set: 'holdout-2', weight: 1, authored: true },
  { set: 'train-a', weight: 1, authored: true },
  { set: 'train-b', weight: 1, authored: true },
  { set: 'train-c', weight: 1, authored: true },
  { set: 'chat-a', weight: 2, authored: true },
  // Attacks only, from a public benchmark (PUBLIC-SOURCES.md): a wider range of phrasings, at half weight.
  { set: 'public-tasktracker', weight: 0.5, authored: false },
];

const FIXTURES = new URL('../test/fixtures/instruction-like/', import.meta.url);
const OUTPUT = new URL('../src/memory/remember/instruction-model.json', import.meta.url);

/** Features seen in fewer training texts than this are left out: they fit noise. */
const MIN_TEXTS = 3;
const L2 = 1e-5;
const ITERATIONS = 600;
const LEARNING_RATE = 0.05;
/** Weights nearer zero than this are dropped from the file: they change no decision. */
const PRUNE_BELOW = 0.01;

export const loadSet = (set: string): Labelled[] => JSON.parse(readFileSync(new URL(`${set}.json`, FIXTURES), 'utf8')) as Labelled[];

interface Example {
  indices: Int32Array;
  values: Float32Array;
  label: 0 | 1;
  weight: number;
}

function train(sets: { set: string; weight: number; items: Labelled[] }[]): InstructionModelFile {
  // Each text as the check reads it: every view the patterns read is a text the model scores, so
  // the disguises the views undo are trained on undone too.
  const texts = sets.flatMap(({ set, weight, items }) => {
    const halves = { true: items.filter((i) => i.instructionLike).length, false: items.filter((i) => !i.instructionLike).length };
    return items.flatMap((item) => {
      const views = instructionViews(item.text);
      // A set's half weighs `weight` in all, shared by its texts and a text's views.
      const share = (weight * 100) / halves[String(item.instructionLike) as 'true' | 'false'] / views.length;
      return views.map((view) => ({ set, features: features(view), label: item.instructionLike ? 1 : 0, weight: share }) as const);
    });
  });

  const seenIn = new Map<string, number>();
  for (const { features: fs } of texts) for (const f of new Set(fs)) seenIn.set(f, (seenIn.get(f) ?? 0) + 1);
  const vocabulary = [...seenIn].filter(([, n]) => n >= MIN_TEXTS).map(([f]) => f).sort();
  const index = new Map(vocabulary.map((f, i) => [f, i]));

  const examples: Example[] = texts.map(({ features: fs, label, weight }) => {
    const counts = new Map<number, number>();
    for (const f of fs) {
      const i = index.get(f);
      if (i !== undefined) counts.set(i, (counts.get(i) ?? 0) + 1);
    }
    const norm = Math.sqrt(Math.max(1, fs.length));
    return { indices: Int32Array.from(counts.keys()), values: Float32Array.from([...counts.values()].map((c) => c / norm)), label, weight };
  });
  const totalWeight = examples.reduce((s, e) => s + e.weight, 0);

  const w = new Float64Array(vocabulary.length);
  let bias = 0;
  const grad = new Float64Array(vocabulary.length);
  const m = new Float64Array(vocabulary.length + 1);
  const v = new Float64Array(vocabulary.length + 1);
  const [beta1, beta2, epsilon] = [0.9, 0.999, 1e-8];
  for (let step = 1; step <= ITERATIONS; step++) {
    grad.fill(0);
    let gradBias = 0;
    for (const e of examples) {
      let z = bias;
      for (let k = 0; k < e.indices.length; k++) z += w[e.indices[k]!]! * e.values[k]!;
      const error = ((sigmoid(z) - e.label) * e.weight) / totalWeight;
      gradBias += error;
      for (let k = 0; k < e.indices.length; k++) grad[e.indices[k]!]! += error * e.values[k]!;
    }
    for (let j = 0; j <= vocabulary.length; j++) {
      const g = j < vocabulary.length ? grad[j]! + L2 * w[j]! : gradBias;
      m[j] = beta1 * m[j]! + (1 - beta1) * g;
      v[j] = beta2 * v[j]! + (1 - beta2) * g * g;
      const delta = (LEARNING_RATE * (m[j]! / (1 - beta1 ** step))) / (Math.sqrt(v[j]! / (1 - beta2 ** step)) + epsilon);
      if (j < vocabulary.length) w[j]! -= delta;
      else bias -= delta;
    }
  }

  const weights: Record<string, number> = {};
  for (let j = 0; j < vocabulary.length; j++) if (Math.abs(w[j]!) >= PRUNE_BELOW) weights[vocabulary[j]!] = Math.round(w[j]! * 1e4) / 1e4;
  return {
    format: 1,
    trainedOn: sets.map(({ set, items }) => ({ set, benign: items.filter((i) => !i.instructionLike).length, instructionLike: items.filter((i) => i.instructionLike).length })),
    bias: Math.round(bias * 1e4) / 1e4,
    weights,
  };
}

async function main(args: string[]): Promise<void> {
  // --sets=a,b trains on those alone: for trying a change before the full sets exist.
  const only = args.find((a) => a.startsWith('--sets='))?.slice('--sets='.length).split(',');
  const chosen = only ? TRAINING_SETS.filter((s) => only.includes(s.set)) : TRAINING_SETS;
  const sets = chosen.map(({ set, weight, authored }) => ({ set, weight, authored, items: loadSet(set) }));
  if (args.includes('--cross-validate')) {
    const { InstructionModel } = await import('../src/memory/remember/instruction-model.ts');
    for (const left of sets.filter((s) => s.authored)) {
      const model = new InstructionModel(train(sets.filter((s) => s.set !== left.set)));
      const items = sets.find((s) => s.set === left.set)!.items;
      const scores = items.map((item) => ({ item, score: Math.max(...instructionViews(item.text).map((view) => model.score(view))) }));
      const row = [0.3, 0.5, 0.7, 0.8, 0.9].map((t) => {
        const held = scores.filter((s) => s.score >= t);
        const tp = held.filter((s) => s.item.instructionLike).length;
        const positives = items.filter((i) => i.instructionLike).length;
        const negatives = items.length - positives;
        return `t ${t}: R ${positives ? (tp / positives).toFixed(2) : '-'} FPR ${negatives ? ((held.length - tp) / negatives).toFixed(3) : '-'}`;
      });
      console.log(`left out ${left.set.padEnd(10)} ${row.join(' | ')}`);
    }
  }
  const started = performance.now();
  const model = train(sets);
  console.log(`trained on ${sets.reduce((n, s) => n + s.items.length, 0)} texts in ${((performance.now() - started) / 1000).toFixed(1)} s: ${Object.keys(model.weights).length} weights`);
  if (!args.includes('--dry-run')) {
    writeFileSync(OUTPUT, `${JSON.stringify(model)}\n`);
    console.log(`wrote ${OUTPUT.pathname}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
