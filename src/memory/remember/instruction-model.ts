/**
 * The learned second opinion of the instruction-like check (issue 31): a logistic regression over
 * word, word-pair and character n-grams, trained here (scripts/train-instruction-model.ts) on
 * the labelled sets of test/fixtures/instruction-like/, its weights shipped beside this file as
 * data the script generated (instruction-model.json). No network, no native code: a text's
 * score is a sum of looked-up weights, so it costs a few map lookups per character and cannot
 * take long whatever the text holds.
 *
 * A score is read over windows of the text, not the whole: an instruction hidden in a long,
 * ordinary email would otherwise be diluted by it. Each window's score comes from prefix sums
 * over the tokens, so every window of up to WINDOW_TOKENS tokens costs the same as one.
 */
import { linearRegex } from './linear-regex.ts';
// Imported, not read from beside this file at run time: a bundle of the server (the tests build
// one) carries it inside.
import shippedFile from './instruction-model.json' with { type: 'json' };

/** What scripts/train-instruction-model.ts writes. */
export interface InstructionModelFile {
  format: 1;
  /** What it was trained on, for the record: set names and their sizes. */
  trainedOn: { set: string; benign: number; instructionLike: number }[];
  bias: number;
  /** Feature (see `features`) → weight. Features the training data never showed weigh 0. */
  weights: Record<string, number>;
}

/**
 * The longest window a score reads, in tokens. Most labelled texts are shorter, and the model
 * was trained on whole texts, so for them the window is the text; a longer text scores as its
 * most instruction-like stretch.
 */
export const WINDOW_TOKENS = 64;
/** Character n-grams are taken from the first this many characters of a token: a 2,000-character run of base64 needs no more. */
const TOKEN_CHARS_MAX = 48;
const CHAR_GRAMS = [3, 4, 5] as const;
/** Tokens whose weights a model keeps at hand (about 2 MB at most). */
const TOKEN_CACHE_MAX = 20_000;

/** A word (letters, marks, digits, underscores, apostrophes) or one other visible character. On RE2, as every expression the check runs (linear-regex.ts). */
const TOKEN = linearRegex(String.raw`[\p{L}\p{M}\p{N}_']+|[^\s\p{L}\p{M}\p{N}_']`);

/** The tokens of a text, lower-cased. */
export function tokens(text: string): string[] {
  return TOKEN.matches(text.toLowerCase());
}

/** The features one token contributes: itself, and its character n-grams with word boundaries. */
export function tokenFeatures(token: string): string[] {
  const out = [`w ${token}`];
  // One character (a letter, a digit or a sign: the only tokens that are not words) has no n-grams.
  if (token.length < 2 || (token.length === 2 && token.codePointAt(0)! > 0xffff)) return out;
  const padded = ` ${token.slice(0, TOKEN_CHARS_MAX)} `;
  for (const n of CHAR_GRAMS) for (let i = 0; i + n <= padded.length; i++) out.push(`c ${padded.slice(i, i + n)}`);
  return out;
}

/** The feature of two tokens in a row. */
export const pairFeature = (left: string, right: string): string => `b ${left} ${right}`;

/** Every feature of a whole text, with repeats: what the training script counts. */
export function features(text: string): string[] {
  const words = tokens(text);
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    out.push(...tokenFeatures(words[i]!));
    if (i > 0) out.push(pairFeature(words[i - 1]!, words[i]!));
  }
  return out;
}

export class InstructionModel {
  readonly #weights: Map<string, number>;
  readonly #bias: number;

  /**
   * A token's own weight and feature count, by token: texts repeat their words, and a check
   * scores several views of one text that share most of theirs. Bounded, so a flood of distinct
   * tokens cannot grow it without end.
   */
  readonly #tokens = new Map<string, readonly [number, number]>();

  /** The sets it was fitted on: what its figures on those sets are not estimates of. */
  readonly trainedOn: InstructionModelFile['trainedOn'];

  constructor(file: InstructionModelFile) {
    this.trainedOn = file.trainedOn;
    this.#weights = new Map(Object.entries(file.weights));
    this.#bias = file.bias;
  }

  #ownWeight(token: string): readonly [number, number] {
    const known = this.#tokens.get(token);
    if (known) return known;
    const own = tokenFeatures(token);
    let weight = 0;
    for (const feature of own) weight += this.#weights.get(feature) ?? 0;
    if (this.#tokens.size >= TOKEN_CACHE_MAX) this.#tokens.clear();
    const entry = [weight, own.length] as const;
    this.#tokens.set(token, entry);
    return entry;
  }

  /**
   * The probability that the text is instruction-like, by the model: the highest over its
   * windows. A window's logit is bias + (sum of its features' weights) / sqrt(its feature
   * count), the same sum the training script fits on whole texts.
   */
  score(text: string): number {
    const words = tokens(text);
    if (words.length === 0) return sigmoid(this.#bias);
    // sum[i], count[i]: the weights and number of features of tokens before i, and of the pairs
    // within them, so a window [a, b) is sum[b] - sum[a] less the pair that crosses a.
    const sum = new Float64Array(words.length + 1);
    const count = new Float64Array(words.length + 1);
    const pairWeight = new Float64Array(words.length);
    for (let i = 0; i < words.length; i++) {
      let [weight, n] = this.#ownWeight(words[i]!);
      if (i > 0) {
        pairWeight[i] = this.#weights.get(pairFeature(words[i - 1]!, words[i]!)) ?? 0;
        weight += pairWeight[i]!;
        n += 1;
      }
      sum[i + 1] = sum[i]! + weight;
      count[i + 1] = count[i]! + n;
    }
    const span = Math.min(WINDOW_TOKENS, words.length);
    let best = -Infinity;
    for (let start = 0; start + span <= words.length; start++) {
      const end = start + span;
      // The window's first token has no pair inside the window.
      const crossing = start > 0 ? 1 : 0;
      const weight = sum[end]! - sum[start]! - (crossing ? pairWeight[start]! : 0);
      const n = count[end]! - count[start]! - crossing;
      best = Math.max(best, this.#bias + weight / Math.sqrt(n));
    }
    return sigmoid(best);
  }
}

export const sigmoid = (z: number): number => 1 / (1 + Math.exp(-z));

let shipped: InstructionModel | undefined;

/** The model this release ships (instruction-model.json), loaded once per process. */
export function shippedInstructionModel(): InstructionModel {
  shipped ??= new InstructionModel(shippedFile as InstructionModelFile);
  return shipped;
}
