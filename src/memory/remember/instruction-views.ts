/**
 * The views of a text the instruction-like patterns read: as written, and with the common
 * disguises undone, letters spaced out ("i g n o r e"), digits for letters ("1gn0re"), Cyrillic
 * look-alikes ("Ѕуѕtеm"), and base64 runs decoded. Like the patterns, every expression here
 * runs on linearRegex, so building the views is linear in the text too.
 */
import { linearRegex } from './linear-regex.ts';

/** JavaScript's `\s` but the newline (RE2's `\s` is ASCII only): the views keep lines apart. */
const SPACE_BUT_NEWLINE = String.raw`\t\x0B\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}`;

/** Invisible characters stand between words as often as inside them: a space keeps both apart. */
const INVISIBLE = linearRegex(String.raw`[\x{200B}-\x{200F}\x{2060}\x{FEFF}]`);
const SPACES = linearRegex(`[${SPACE_BUT_NEWLINE}]+`);
/** Spaced-out letters; a wider gap is the gap between two words. */
const SPACED_LETTERS = linearRegex(String.raw`\b(?:\pL ){2,}\pL\b`);
const CYRILLIC = linearRegex(String.raw`[\x{0400}-\x{04FF}]`);
const BASE64_RUN = linearRegex('[A-Za-z0-9+/]{24,}={0,2}');
const PRINTABLE = linearRegex(String.raw`^[\x20-\x7E\n${SPACE_BUT_NEWLINE}]+$`);
const LEET = linearRegex('[0134578@$]');

/** Cyrillic letters that look Latin ("Ѕуѕtеm"), read as the Latin ones in one view. */
const HOMOGLYPHS: Record<string, string> = {
  а: 'a', е: 'e', о: 'o', р: 'p', с: 'c', у: 'y', х: 'x', і: 'i', ѕ: 's', ј: 'j', һ: 'h', ԁ: 'd', ӏ: 'l',
  А: 'A', В: 'B', Е: 'E', К: 'K', М: 'M', Н: 'H', О: 'O', Р: 'P', С: 'C', Т: 'T', Х: 'X', І: 'I', Ѕ: 'S', Ј: 'J',
};
const LEET_LETTERS: Record<string, string> = { '0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '@': 'a', $: 's' };

export function instructionViews(text: string): string[] {
  const normal = INVISIBLE.replaceAll(text.normalize('NFKC'), () => ' ').replaceAll('\u00ad', '');
  const plain = SPACES.replaceAll(normal, () => ' ');
  const joined = SPACES.replaceAll(
    SPACED_LETTERS.replaceAll(normal, (run) => run.replaceAll(' ', '')),
    () => ' ',
  );
  const latin = CYRILLIC.replaceAll(plain, (c) => HOMOGLYPHS[c] ?? c);
  const decoded = BASE64_RUN.matches(plain)
    .map((run) => Buffer.from(run, 'base64').toString('utf8'))
    .filter((text) => PRINTABLE.test(text));
  const unLeet = LEET.replaceAll(plain, (c) => LEET_LETTERS[c]!);
  return [...new Set([plain, joined, unLeet, latin, ...decoded])];
}
