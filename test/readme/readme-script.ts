/**
 * The README's shell blocks as one bash script that runs them as written, in order, checking as it
 * goes (used by readme.check.ts). Pure: text in, text out.
 *
 * A block is split into commands the way bash reads them: a newline ends a command unless it is
 * escaped (`\`), inside quotes or inside `$( )`. A command's own comment says what it expects
 * when that is not success: `# → 404` (the HTTP status every curl in it must answer) or
 * `# → exit 1` (its exit code). Otherwise every curl must answer 2xx and the command exit 0.
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
  /** Its first line in the README (1-based). */
  line: number;
  /** Every comment on its own lines. */
  comment: string;
  expect: Expectation;
  /** How the runner treats it: run it, start it in the background and wait for it, or skip it. */
  action: { kind: 'run' } | { kind: 'background'; name: 'api' | 'worker' } | { kind: 'skip'; why: string };
}

export interface Block {
  /** The line of the opening fence. */
  line: number;
  commands: Command[];
}

/** The ```sh blocks of a markdown text, with the line of each opening fence. */
export function shellBlocks(markdown: string): { line: number; text: string }[] {
  const lines = markdown.split('\n');
  const blocks: { line: number; text: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash|shell)\s*$/.test(lines[i]!)) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`README.md:${start + 1}: a shell block that never closes`);
    blocks.push({ line: start + 1, text: body.join('\n') });
  }
  return blocks;
}

/**
 * Splits a block's text into commands (bash's reading of newlines, quotes, `$( )`, `\` and `#`),
 * each with its comments; lines holding only a comment belong to no command.
 */
export function splitCommands(text: string, firstLine: number): { text: string; line: number; comment: string }[] {
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
  if (quote !== null || depth > 0) throw new Error(`README.md:${startLine}: a command whose quotes or $( ) never close`);
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

/** What the runner does with a command. */
export function actionOf(text: string, hasNodeModules: boolean): Command['action'] {
  if (text === 'npm start' || text === 'npx mnemo serve') return { kind: 'background', name: 'api' };
  if (text === 'npm run worker' || text === 'npx mnemo worker') return { kind: 'background', name: 'worker' };
  if (/^npm (install|ci)\b/.test(text) && hasNodeModules) return { kind: 'skip', why: 'node_modules is there already' };
  if (/^npm (test|run (test|bench)\S*)\b/.test(text)) return { kind: 'skip', why: 'a test suite: the README test does not run suites' };
  return { kind: 'run' };
}

export function readmeBlocks(markdown: string, options: { hasNodeModules: boolean }): Block[] {
  return shellBlocks(markdown).map((block) => ({
    line: block.line,
    commands: splitCommands(block.text, block.line + 1).map((command) => ({
      ...command,
      expect: expectationOf(command.comment),
      action: actionOf(command.text, options.hasNodeModules),
    })),
  }));
}

/** A here-document body that cannot end early: the delimiter appears in no README line. */
const quoted = (text: string, tag: string) => {
  if (text.split('\n').includes(tag)) throw new Error(`a README line reads ${tag}`);
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
    out.push(`__block ${b + 1} ${blocks.length} ${block.line}`);
    for (const command of block.commands) {
      step++;
      const where = `README.md:${command.line}`;
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
