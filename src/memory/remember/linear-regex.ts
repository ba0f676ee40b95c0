/**
 * Regular expressions whose running time is linear in the text, whatever the pattern (issue 24).
 *
 * JavaScript's own engine backtracks: one pattern of the instruction-like detector
 * (`\S+@\S+\.\w+` after `[^\n]{0,120}`) took 9.2–78.5 s over a 2,000-character text, on the
 * event loop, so one remembered fact froze every request. The detector's expressions therefore
 * run on re2js, RE2's automata (a DFA, an NFA when the DFA's state cache runs out) in plain
 * JavaScript: whatever the pattern and the text, a match takes time proportional to the text's
 * length times the pattern's size, so no one has to prove each new pattern safe.
 *
 * Chosen by measurement (the detector's 13 patterns, a loaded 2-core machine):
 * - `re2-wasm` 1.0.2 gives the same guarantee, but its WebAssembly is built unoptimised with a
 *   fixed 16 MB heap that aborts the module when full, and it ran the patterns 5–20 times slower
 *   than re2js (484 labelled texts: 3.2 s against 0.7 s; 2,000-character soups of trigger
 *   words: 140–250 ms a check against 7–22 ms).
 * - `re2` (native bindings) builds from source with node-gyp where its prebuilt binary cannot
 *   be downloaded: a compiler on every laptop, a slow `npm install`.
 * - Proving the patterns linear with `recheck` 4.5 fails: its automaton checker timed out on 15
 *   of their 77 alternatives (20 s each) and cannot read lookahead; it calls any bounded window
 *   safe, however large its cost (`[^\n]{0,120}` then `[^\s@]{1,64}@[^\s@]{1,255}` passed in
 *   6 ms); its fuzzer proves nothing. `safe-regex2` passes the pattern that took 78 s.
 *
 * RE2 has no lookaround and no backreferences (compiling one throws), `\b`, `\w`, `\d` and `\s`
 * are ASCII (`\s` is `[\t\n\f\r ]`), and `^`/`$` with `m` see only `\n` as a line end.
 */
import { RE2JS } from 're2js';

export interface LinearRegex {
  /** The pattern as written, in RE2's syntax. */
  readonly source: string;
  /** Does the pattern match anywhere in the text? */
  test(text: string): boolean;
  /** The text with every match replaced by what `replace` returns for it. */
  replaceAll(text: string, replace: (match: string) => string): string;
  /** Every match, left to right, not overlapping. */
  matches(text: string): string[];
}

/**
 * `flags` as in a JavaScript literal, limited to what the detector uses: `i` and `m`. Compiled
 * on first use (all the detector's patterns together take 0.1–0.4 s), so a process that never
 * checks a text, like most test files, does not pay for it.
 */
export function linearRegex(source: string, flags: '' | 'i' | 'm' | 'im' = ''): LinearRegex {
  let compiled: RE2JS | undefined;
  const regex = () => (compiled ??= RE2JS.compile(source, (flags.includes('i') ? RE2JS.CASE_INSENSITIVE : 0) | (flags.includes('m') ? RE2JS.MULTILINE : 0)));
  return {
    source,
    test: (text) => regex().test(text),
    replaceAll: (text, replace) => regex().matcher(text).replaceAll((match: string) => replace(match)),
    matches: (text) => [...regex().matchAll(text)].map(([match]) => match),
  };
}
