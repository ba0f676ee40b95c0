/**
 * The shell blocks of the README and of the guide pages (docs/guide/, in the order docs/README.md
 * lists them) as one bash script that runs them as written, in order, checking as it goes (used by
 * readme.check.ts). Pure: text in, text out.
 *
 * A block is split into commands the way bash reads them: a newline ends a command unless it is
 * escaped (`\`), inside quotes or inside `$( )`. A command's own comment says what it expects
 * when that is not success: `# → 404` (the HTTP status every curl in it must answer) or
 * `# → exit 1` (its exit code). Otherwise every curl must answer 2xx and the command exit 0.
 *
 * Where a page tells the reader to stop a process (Ctrl-C in its shell), a line of its own,
 * `<!-- test:readme stops the api -->` (or `worker`), says so to the runner: an HTML comment, so
 * readers never see it. It applies before the next shell block.
 */

export interface Expectation {
  /** The status every curl of the command must answer (else: any 2xx). */
  status?: number;
  /** The command's exit code (else: 0). */
  exit?: number;
}

export interface Command {
  /** The command as written (continuation lines included), without its trailing comment. */
  text: string;
  /** Its first line in its page (1-based). */
  line: number;
  /** Every comment on its own lines. */
  comment: string;
  expect: Expectation;
  /** How the runner treats it: run it, start it in the background and wait for it, or skip it. */
  action: { kind: 'run' } | { kind: 'background'; name: 'api' | 'worker' } | { kind: 'skip'; why: string };
}

export type Background = 'api' | 'worker';

export interface Block {
  /** The page it is in (a path from the repository's root). */
  file: string;
  /** The line of the opening fence. */
  line: number;
  /** The background processes the page stops before this block (the reader's Ctrl-C). */
  stops: Background[];
  commands: Command[];
}

const STOP = /^\s*<!--\s*test:readme stops the (api|worker)\s*-->\s*$/;

/**
 * The ```sh blocks of a markdown text, with the line of each opening fence and the processes
 * stopped before it. Other fences (```ts, ```text, ```console …) are skipped whole, so a `sh`
 * fence or a stop line quoted inside them counts for nothing.
 */
export function shellBlocks(markdown: string, file = 'README.md'): { line: number; text: string; stops: Background[] }[] {
  const lines = markdown.split('\n');
  const blocks: { line: number; text: string; stops: Background[] }[] = [];
  let stops: Background[] = [];
  let stopLine = 0;
  for (let i = 0; i < lines.length; i++) {
    const stop = STOP.exec(lines[i]!);
    if (stop) {
      stops.push(stop[1] as Background);
      stopLine = i + 1;
      continue;
    }
    // A fence may be indented (a block inside a list item): its lines lose that indentation.
    const fence = /^( *)(`{3,})(\S*)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    const [, indent, ticks, language] = fence as unknown as [string, string, string, string];
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]!.trim() !== ticks; i++) {
      const line = lines[i]!;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: a code block that never closes`);
    if (!/^(sh|bash|shell)$/.test(language)) continue;
    blocks.push({ line: start + 1, text: body.join('\n'), stops });
    stops = [];
  }
  if (stops.length > 0) throw new Error(`${file}:${stopLine}: a stop line with no shell block after it`);
  return blocks;
}

/**
 * Splits a block's text into commands (bash's reading of newlines, quotes, `$( )`, `\` and `#`),
 * each with its comments; lines holding only a comment belong to no command.
 */
export function splitCommands(text: string, firstLine: number, file = 'README.md'): { text: string; line: number; comment: string }[] {
  const commands: { text: string; line: number; comment: string }[] = [];
  let current = '';
  let comment = '';
  let startLine = firstLine;
  let line = firstLine;
  let quote: "'" | '"' | null = null;
  let depth = 0;
  const end = () => {
    if (current.trim() !== '') commands.push({ text: current.trim(), line: startLine, comment: comment.trim() });
    current = '';
    comment = '';
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (current.trim() === '' && quote === null) startLine = line;
    if (c === '\n') line++;
    if (quote === "'") {
      current += c;
      if (c === "'") quote = null;
      continue;
    }
    if (c === '\\' && i + 1 < text.length) {
      current += c + text[i + 1];
      if (text[i + 1] === '\n') line++;
      i++;
      continue;
    }
    if (quote === '"') {
      current += c;
      if (c === '"') quote = null;
      else if (c === '$' && text[i + 1] === '(') depth++;
      else if (c === ')' && depth > 0) depth--;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      current += c;
      continue;
    }
    if (c === '#' && (i === 0 || /\s/.test(text[i - 1]!))) {
      const stop = text.indexOf('\n', i);
      comment += ` ${text.slice(i + 1, stop < 0 ? text.length : stop).trim()}`;
      i = (stop < 0 ? text.length : stop) - 1;
      continue;
    }
    if (c === '$' && text[i + 1] === '(') depth++;
    else if (c === ')' && depth > 0) depth--;
    if (c === '\n' && depth === 0) {
      end();
      continue;
    }
    current += c;
  }
  if (quote !== null || depth > 0) throw new Error(`${file}:${startLine}: a command whose quotes or $( ) never close`);
  end();
  return commands;
}

/** `# → 404 …` or `# → exit 1 …` in a command's comment. */
export function expectationOf(comment: string): Expectation {
  const exit = /→\s*exit\s+(\d+)/.exec(comment);
  if (exit) return { exit: Number(exit[1]) };
  const status = /→\s*(\d{3})\b/.exec(comment);
  if (status) return { status: Number(status[1]) };
  return {};
}

/**
 * What the runner does with a command. A command any of whose `&&` parts runs a test suite
 * (`npm install && npm test`) is skipped whole: the README test runs no suites.
 */
export function actionOf(text: string, hasNodeModules: boolean): Command['action'] {
  if (text === 'npm start' || text === 'npx mnemo serve') return { kind: 'background', name: 'api' };
  if (text === 'npm run worker' || text === 'npx mnemo worker') return { kind: 'background', name: 'worker' };
  const parts = text.split('&&').map((part) => part.trim());
  if (parts.some((part) => /^npm (test|run (test|bench)\S*)(\s|$)/.test(part))) {
    return { kind: 'skip', why: 'a test suite: the README test does not run suites' };
  }
  if (/^npm (install|ci)\b/.test(text) && hasNodeModules) return { kind: 'skip', why: 'node_modules is there already' };
  return { kind: 'run' };
}

/**
 * The guide pages in the order the runner takes them: the links of the "## Guide" section of
 * docs/README.md (the index of the docs), in order, as paths from the repository's root.
 */
export function guidePages(index: string): string[] {
  const section = /^## Guide\b[^\n]*\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(index);
  if (!section) throw new Error('docs/README.md has no "## Guide" section listing the guide pages');
  const pages: string[] = [];
  for (const link of section[1]!.matchAll(/\]\((guide\/[\w.-]+\.md)\)/g)) {
    const page = `docs/${link[1]}`;
    if (!pages.includes(page)) pages.push(page);
  }
  return pages;
}

/**
 * What the runner reads, in order: the README, then each guide page of the index. The index must
 * list every page of docs/guide/ (`onDisk`), so no page is left unrun by being left out of it.
 */
export function pagesInOrder(index: string, onDisk: readonly string[]): string[] {
  const listed = guidePages(index);
  const missing = onDisk.filter((page) => !listed.includes(page));
  if (missing.length > 0) throw new Error(`docs/README.md's Guide section does not list ${missing.join(', ')}`);
  const gone = listed.filter((page) => !onDisk.includes(page));
  if (gone.length > 0) throw new Error(`docs/README.md's Guide section lists ${gone.join(', ')}, which is not in docs/guide/`);
  return ['README.md', ...listed];
}

export function readmeBlocks(markdown: string, options: { hasNodeModules: boolean; file?: string }): Block[] {
  const file = options.file ?? 'README.md';
  return shellBlocks(markdown, file).map((block) => ({
    file,
    line: block.line,
    stops: block.stops,
    commands: splitCommands(block.text, block.line + 1, file).map((command) => ({
      ...command,
      expect: expectationOf(command.comment),
      action: actionOf(command.text, options.hasNodeModules),
    })),
  }));
}

/** A here-document body that cannot end early: the delimiter appears in no command's line. */
const quoted = (text: string, tag: string) => {
  if (text.split('\n').includes(tag)) throw new Error(`a command's line reads ${tag}`);
  return `<<'${tag}'\n${text}\n${tag}`;
};

/**
 * The bash script: `prelude` first (prelude.sh: the curl check, background starts, the failure
 * report), then each command, announced as it runs. `set -euo pipefail`: a failing command, a failing stage of
 * a pipe or an unset variable (an `$ID` never set) stops the run.
 */
export function bashScript(blocks: Block[], prelude: string): string {
  const out: string[] = [prelude];
  let step = 0;
  blocks.forEach((block, b) => {
    out.push(`__block ${b + 1} ${blocks.length} '${block.file}:${block.line}'`);
    for (const name of block.stops) out.push(`__stop ${name}`);
    for (const command of block.commands) {
      step++;
      const where = `${block.file}:${command.line}`;
      const { action } = command;
      if (action.kind === 'skip') {
        out.push(`__announce ${step} '${where}' 'skipped: ${action.why.replace(/'/g, '')}' ${quoted(command.text, '__README_COMMAND')}`);
        continue;
      }
      out.push(`__announce ${step} '${where}' '${action.kind === 'background' ? 'background' : 'run'}' ${quoted(command.text, '__README_COMMAND')}`);
      if (action.kind === 'background') {
        out.push(`__background ${action.name} ${quoted(command.text, '__README_COMMAND')}`);
        continue;
      }
      out.push(`__expect_status=${command.expect.status ?? ''}`);
      if (command.expect.exit !== undefined) {
        out.push('__tolerate', command.text, '__rc=$?', '__strict', `__check_exit ${command.expect.exit} "$__rc"`);
      } else {
        out.push(command.text);
      }
      out.push('__expect_status=', '__done');
    }
  });
  out.push('__finish');
  return `${out.join('\n')}\n`;
}
