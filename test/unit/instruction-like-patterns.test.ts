/**
 * The instruction-like check cannot backtrack (issue 24): none of its modules holds a JavaScript
 * regular expression, every pattern compiles on RE2, and the patterns rewritten for RE2 accept
 * exactly the texts the JavaScript ones did.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { AN_ADDRESS, NOT_A_NAME, NOT_BE, instructionPatterns } from '../../src/memory/remember/instruction-patterns.ts';
import { linearRegex } from '../../src/memory/remember/linear-regex.ts';

const ENTRY = fileURLToPath(new URL('../../src/memory/remember/instruction-like.ts', import.meta.url));

/** The module and every module of ours it imports, however deep: all the check runs. */
function modulesOf(entry: string): Map<string, ts.SourceFile> {
  const modules = new Map<string, ts.SourceFile>();
  const visit = (path: string) => {
    if (modules.has(path)) return;
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
    modules.set(path, source);
    for (const statement of source.statements) {
      if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier) && statement.moduleSpecifier.text.startsWith('.')) {
        visit(resolve(dirname(path), statement.moduleSpecifier.text));
      }
    }
  };
  visit(entry);
  return modules;
}

/** Regular expression literals and uses of `RegExp` in a module, by line. */
function javascriptRegexes(source: ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (node.kind === ts.SyntaxKind.RegularExpressionLiteral || (ts.isIdentifier(node) && node.text === 'RegExp')) {
      found.push(`${source.fileName}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText()}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('the instruction-like check runs no backtracking regular expression', () => {
  it('none of its modules holds a JavaScript regular expression', () => {
    const modules = modulesOf(ENTRY);
    // The check, its patterns, its views and the RE2 wrapper, at least: a wrong path finds nothing.
    expect(modules.size).toBeGreaterThanOrEqual(4);
    expect([...modules.values()].flatMap(javascriptRegexes)).toEqual([]);
  });

  it('the scan would see one: it finds the literal and the constructor in a module that has them', () => {
    const source = ts.createSourceFile('sample.ts', "const a = /\\S+@\\S+/i;\nconst b = new RegExp('x');", ts.ScriptTarget.Latest, true);
    expect(javascriptRegexes(source)).toEqual(['sample.ts:1: /\\S+@\\S+/i', 'sample.ts:2: RegExp']);
  });

  it('every pattern compiles on RE2', () => {
    expect(instructionPatterns.length).toBeGreaterThan(10);
    for (const [, pattern] of instructionPatterns) expect(() => pattern.test('x'), pattern.source).not.toThrow();
  });
});

/**
 * The JavaScript expression and its RE2 rewrite agree on every one of 3,000 texts that start
 * with `prefix` and go on with `pieces` (the words the rewrite is about, letters, spaces,
 * punctuation), and the texts hold both outcomes, so agreeing is not agreeing on nothing.
 */
function agree(javascript: RegExp, re2: string, prefix: string, pieces: readonly string[]) {
  const linear = linearRegex(re2, 'i');
  const texts = fc.sample(fc.array(fc.constantFrom(...pieces), { maxLength: 8 }).map((parts) => prefix + parts.join('')), { numRuns: 3000, seed: 24 });
  expect(texts.filter((text) => linear.test(text) !== javascript.test(text))).toEqual([]);
  expect(new Set(texts.map((text) => javascript.test(text)))).toEqual(new Set([true, false]));
}

describe('the patterns rewritten for RE2 accept the same texts as before', () => {
  it('"should <a word but be>" without the lookahead (?!be\\b)', () => {
    agree(/^\s+(?!be\b)\w+/i, String.raw`^\s+${NOT_BE}`, ' ', [' ', '  ', 'be', 'Be', 'BE', 'b', 'B', 'e', 'E', 'x', 'recommend', 'being', '1', '_', '.', ',', '\n', 'é']);
  });

  it('"Assistant: <not a name>" without the lookahead (?!\\s*[A-Z][a-z]+ [A-Z][a-z]+)', () => {
    agree(/^:(?!\s*[A-Z][a-z]+ [A-Z][a-z]+)/i, String.raw`^:${NOT_A_NAME}`, ':', [' ', '  ', '\n', 'Jana', 'Novak', 'j', 'N', 'ab', 'x', 'ignore', '.', ',', '1', '-', 'é', 'ß']);
  });

  it('an address after "envoie …" (\\S+@\\S+\\.\\w+ before)', () => {
    agree(/\S+@\S+\.\w+/i, AN_ADDRESS, '', ['a', 'b', '@', '.', ' ', '\n', '_', '-', '@.', 'x@y.z']);
  });
});
