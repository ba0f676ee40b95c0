/**
 * `npm run bench:instruction-check -- [--locomo=PATH] [--split=dev|heldout|all] [--threshold=T]`:
 * what the instruction-like check (src/memory/remember/instruction-like.ts) costs and how often
 * it holds ordinary conversation (issue 31).
 *
 * - Ordinary conversation: every turn of LoCoMo's conversations in the split (dev, the first five,
 *   to tune on; heldout, the last five, measured once), checked as a remembered text. Prints the
 *   false-positive rate of the patterns, of the model at several thresholds and of the two
 *   together at the threshold given (the default's, else), and, for the dev split only, the turns
 *   held. The data is CC BY-NC 4.0 and never in the repository (bench/locomo.ts).
 * - Cost: 2,000-character texts (the most a remembered text holds) made of the labelled sets'
 *   texts run together, and the adversarial texts of the fault suite: p50, p99 and the slowest
 *   call of the model alone and of the whole check, and the heap the model holds once loaded.
 *   Run it alone on the machine; it prints the load average it ran under.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { DEFAULT_REMEMBER_SETTINGS } from '../src/foundation/remember-settings.ts';
import { checkInstructionLike, VIEW_LENGTH_MAX, warmUpInstructionCheck } from '../src/memory/remember/instruction-like.ts';
import { InstructionModel, type InstructionModelFile } from '../src/memory/remember/instruction-model.ts';
import { instructionViews } from '../src/memory/remember/instruction-views.ts';
import { REMEMBER_TEXT_MAX } from '../src/memory/remember/remember.ts';
import { GENERAL_TEXTS } from '../support/adversarial-texts.ts';
import { loadLocomo, LOCOMO_SPLITS, type LocomoSplit } from './locomo.ts';
import { UsageError } from './harness.ts';

const THRESHOLDS = [0.5, 0.6, 0.7, 0.8, 0.9];
const FIXTURES = new URL('../test/fixtures/instruction-like/', import.meta.url);
const MODEL_FILE = new URL('../src/memory/remember/instruction-model.json', import.meta.url);

function option(args: string[], name: string): string | undefined {
  return args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const ms = (value: number) => `${value.toFixed(2)} ms`;

function conversation(path: string, split: LocomoSplit, threshold: number): void {
  const turns = loadLocomo(path, split).flatMap((c) => c.turns.map((t) => t.text)).filter((text) => text.trim() !== '');
  const checks = turns.map((text) => ({ text, check: checkInstructionLike(text, { threshold: 1, budgetMs: Infinity }) }));
  const rate = (held: number) => `${held} of ${turns.length} (${((100 * held) / turns.length).toFixed(2)}%)`;
  const byPatterns = checks.filter((c) => c.check.signals.length > 0);
  console.log(`\nOrdinary conversation: LoCoMo ${split} split, ${turns.length} turns`);
  console.log(`  patterns alone hold ${rate(byPatterns.length)}`);
  for (const t of THRESHOLDS) console.log(`  model at ${t} holds ${rate(checks.filter((c) => c.check.score! >= t).length)}`);
  const held = checks.filter((c) => c.check.signals.length > 0 || c.check.score! >= threshold);
  console.log(`  together at ${threshold} (MNEMO_MCP_REVIEW_THRESHOLD) hold ${rate(held.length)}`);
  if (split === 'dev') for (const { text, check } of held) console.log(`    held (score ${check.score}, ${check.signals.join(', ') || 'model'}): ${JSON.stringify(text.slice(0, 160))}`);
}

/** Labelled texts run together to REMEMBER_TEXT_MAX characters, a new mix each time. */
function longTexts(count: number): string[] {
  const pool = readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.json'))
    .flatMap((f) => (JSON.parse(readFileSync(new URL(f, FIXTURES), 'utf8')) as { text: string }[]).map((i) => i.text));
  const texts: string[] = [];
  for (let n = 0, at = 0; n < count; n++) {
    let text = '';
    while (text.length < REMEMBER_TEXT_MAX) text += `${pool[at++ % pool.length]} `;
    texts.push(text.slice(0, REMEMBER_TEXT_MAX));
    at += 7;
  }
  return texts;
}

function timings<T>(texts: readonly T[], run: (text: T) => unknown): { p50: number; p99: number; max: number } {
  const durations = texts.map((text) => {
    const started = performance.now();
    run(text);
    return performance.now() - started;
  });
  durations.sort((a, b) => a - b);
  return { p50: percentile(durations, 50), p99: percentile(durations, 99), max: durations.at(-1)! };
}

function cost(): void {
  const heapBefore = process.memoryUsage().heapUsed;
  globalThis.gc?.();
  const before = process.memoryUsage().heapUsed;
  const model = new InstructionModel(JSON.parse(readFileSync(MODEL_FILE, 'utf8')) as InstructionModelFile);
  globalThis.gc?.();
  const after = process.memoryUsage().heapUsed;
  const heapMb = ((globalThis.gc ? after - before : after - heapBefore) / 2 ** 20).toFixed(1);
  warmUpInstructionCheck();

  const texts = longTexts(1000);
  const adversarial = GENERAL_TEXTS.map((t) => t.text);
  console.log(`\nCost per ${REMEMBER_TEXT_MAX}-character text (load average ${loadavg().map((l) => l.toFixed(2)).join(' ')})`);
  console.log(`  model heap once loaded: ${heapMb} MB${globalThis.gc ? '' : ' (without --expose-gc: approximate)'}`);
  // The model's row is its own cost: the views are the patterns' too, made once per check. The
  // texts a check holds unread (a view longer than it reads) never reach the model.
  const readable = (text: string) => text.normalize('NFKC').length <= VIEW_LENGTH_MAX;
  const views = (inputs: string[]) => inputs.filter(readable).map((text) => instructionViews(text));
  const rows: [string, unknown[], (input: never) => unknown][] = [
    ['model, every view', views(texts), (vs: string[]) => vs.map((v) => model.score(v))],
    ['whole check', texts, (text: string) => checkInstructionLike(text, { budgetMs: Infinity })],
    ['model, adversarial texts', views(adversarial), (vs: string[]) => vs.map((v) => model.score(v))],
    ['whole check, adversarial texts', adversarial, (text: string) => checkInstructionLike(text, { budgetMs: Infinity })],
  ];
  for (const [name, inputs, run] of rows) {
    const t = timings(inputs as never[], run);
    console.log(`  ${name.padEnd(32)} p50 ${ms(t.p50)}, p99 ${ms(t.p99)}, slowest ${ms(t.max)} (${inputs.length} texts)`);
  }
}

export function main(args: string[]): void {
  const split = (option(args, 'split') ?? 'dev') as LocomoSplit;
  if (!LOCOMO_SPLITS.includes(split)) throw new UsageError(`--split must be one of ${LOCOMO_SPLITS.join(', ')}`);
  const threshold = Number(option(args, 'threshold') ?? DEFAULT_REMEMBER_SETTINGS.reviewThreshold);
  if (!(threshold > 0 && threshold <= 1)) throw new UsageError('--threshold must be above 0 and at most 1');
  const locomo = option(args, 'locomo');
  cost();
  if (locomo) conversation(locomo, split, threshold);
  else console.log('\n(no --locomo=PATH: the conversational false-positive rate needs LoCoMo\'s data/locomo10.json)');
}

if (import.meta.url === `file://${process.argv[1]}`) main(process.argv.slice(2));
