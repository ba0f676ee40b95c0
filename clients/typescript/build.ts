/**
 * Builds @mnemo-memory/client into dist/ from src/client/ (the same code the repository imports
 * as `mnemo/client`), with the repository's esbuild and TypeScript:
 * - index.js: one ES module (esbuild) of the client, its errors and src/core/retrying-fetch.ts,
 *   which import nothing; the server's types are erased, so it needs no dependency at run time;
 * - index.d.ts and errors.d.ts (tsc's declarations of src/client/), in which every type that came
 *   from the server's sources or zod (`Fact`, `z.input<typeof WriteFactBodySchema>`, `ErrorCode`…)
 *   is written out as the plain type it is, so a user's type check needs neither zod nor the
 *   server. Written out, not re-exported: zod's types would pull zod, and the schemas' own
 *   declarations drizzle and Hono, into every user's install for the sake of a few object types.
 * The declarations are then type-checked alone (no @types/node, no skipLibCheck), as a user's
 * compiler would see them: a type left pointing at the server fails the build.
 * - the adapters (src/client/adapters/: `langgraph`, `ai-sdk`, `openai-agents`), one module each,
 *   importing the client from `./index.js` and their framework by name (an optional peer
 *   dependency, loaded when the adapter is: src/client/adapters/peer.ts). Their declarations name
 *   the frameworks' types as the frameworks publish them: a user of an adapter has its framework.
 *
 * `npm pack` / `npm publish` in clients/typescript run it (prepack); `npm run build:client` from
 * the repository root too.
 */
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';

const packageDir = dirname(fileURLToPath(import.meta.url));
const repositoryRoot = resolve(packageDir, '../..');
const clientDir = join(repositoryRoot, 'src/client');
const distDir = join(packageDir, 'dist');
const adaptersDir = join(clientDir, 'adapters');
/** The subpath exports besides the client: `@mnemo-memory/client/<name>` is adapters/<name>.ts. */
export const ADAPTERS = ['langgraph', 'ai-sdk', 'openai-agents'] as const;

export async function buildClientPackage(): Promise<{ files: Record<string, number> }> {
  await rm(distDir, { recursive: true, force: true });
  await mkdir(distDir, { recursive: true });
  await build({
    entryPoints: [join(clientDir, 'index.ts')],
    outfile: join(distDir, 'index.js'),
    bundle: true,
    format: 'esm',
    // Fetch, AbortSignal and crypto.randomUUID are web globals: the bundle runs in Node ≥ 20, Deno, Bun and browsers.
    platform: 'neutral',
    target: 'es2022',
    logLevel: 'warning',
  });
  const declarations = declarationsOf(clientDir);
  for (const [name, text] of Object.entries(declarations)) await writeFile(join(distDir, name), text);
  checkAlone(Object.keys(declarations).map((name) => join(distDir, name)));

  const adapterFiles = await buildAdapters();
  const files: Record<string, number> = {};
  for (const name of ['index.js', ...Object.keys(declarations), ...adapterFiles]) files[name] = (await stat(join(distDir, name))).size;
  return { files };
}

// ---------------------------------------------------------------------------------------------
// Adapters

/** The client, as an adapter imports it in the source and as the built adapter finds it beside itself. */
const CLIENT_FROM_ADAPTER = '../index.ts';
const CLIENT_BESIDE_ADAPTER = './index.js';

/** dist/<adapter>.js and .d.ts for each adapter; the names of the files written. */
async function buildAdapters(): Promise<string[]> {
  const written: string[] = [];
  for (const adapter of ADAPTERS) {
    await build({
      entryPoints: [join(adaptersDir, `${adapter}.ts`)],
      outfile: join(distDir, `${adapter}.js`),
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      logLevel: 'warning',
      // The frameworks stay the user's own install; the client is the package's one copy (one
      // MnemoError class, whichever subpath threw it).
      packages: 'external',
      plugins: [
        {
          name: 'client-beside-adapter',
          setup(pluginBuild) {
            pluginBuild.onResolve({ filter: /^\.\.\/index\.ts$/ }, () => ({ path: CLIENT_BESIDE_ADAPTER, external: true }));
          },
        },
      ],
    });
    written.push(`${adapter}.js`);
  }
  const sources = ADAPTERS.map((adapter) => join(adaptersDir, `${adapter}.ts`));
  const program = ts.createProgram(sources, compilerOptions());
  const declarationFiles: string[] = [];
  for (const file of sources) {
    const { emitted } = emitDeclarations(program, file);
    const local = [...emitted.matchAll(/from ['"](\.[^'"]*)['"]/g)].map((m) => m[1]).filter((specifier) => specifier !== CLIENT_FROM_ADAPTER);
    if (local.length > 0) throw new Error(`${relative(repositoryRoot, file)}: its declarations import ${local.join(', ')}; an adapter's types may come from the client (${CLIENT_FROM_ADAPTER}) and its framework only`);
    const name = `${relative(adaptersDir, file).replace(/\.ts$/, '')}.d.ts`;
    await writeFile(join(distDir, name), emitted.replaceAll(`'${CLIENT_FROM_ADAPTER}'`, `'${CLIENT_BESIDE_ADAPTER}'`).replaceAll(`"${CLIENT_FROM_ADAPTER}"`, `"${CLIENT_BESIDE_ADAPTER}"`));
    declarationFiles.push(join(distDir, name));
    written.push(name);
  }
  // As a user with the frameworks installed sees them (this repository's node_modules has them).
  checkAlone(declarationFiles);
  return written;
}

// ---------------------------------------------------------------------------------------------
// Declarations

/** The repository's compiler options, emitting declarations only. */
function compilerOptions(): ts.CompilerOptions {
  const configPath = join(repositoryRoot, 'tsconfig.json');
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, repositoryRoot, undefined, configPath);
  return { ...options, noEmit: false, declaration: true, emitDeclarationOnly: true };
}

/** tsc's declarations of one source file of `program`; its type errors fail the build. */
function emitDeclarations(program: ts.Program, file: string): { source: ts.SourceFile; emitted: string } {
  const source = program.getSourceFile(file)!;
  let emitted = '';
  const result = program.emit(source, (_name, text) => (emitted = text), undefined, true);
  const errors = ts.getPreEmitDiagnostics(program, source).concat(result.diagnostics);
  if (errors.length > 0) throw new Error(`declarations of ${relative(repositoryRoot, file)}:\n${format(errors)}`);
  return { source, emitted };
}

/** `{ 'index.d.ts': text, … }` for each module of src/client/ (the adapters apart), with nothing outside it referenced. */
function declarationsOf(dir: string): Record<string, string> {
  const sources = ts.sys.readDirectory(dir, ['.ts']).filter((file) => !file.endsWith('.d.ts') && !file.startsWith(`${adaptersDir}/`));
  const program = ts.createProgram(sources, compilerOptions());
  const checker = program.getTypeChecker();
  const out: Record<string, string> = {};
  for (const file of sources) {
    const { source, emitted } = emitDeclarations(program, file);
    out[`${relative(dir, file).replace(/\.ts$/, '')}.d.ts`] = selfContained(emitted, source, checker, program, dir);
  }
  return out;
}

/**
 * The declarations of one client module without its imports from outside src/client/: an alias
 * that names an outside type (`z.input<typeof X>`) gets the type it stands for written out, and an
 * outside type still named (`Fact`, in a method's return type) is declared here as its type.
 */
function selfContained(declarations: string, source: ts.SourceFile, checker: ts.TypeChecker, program: ts.Program, dir: string): string {
  const emitted = ts.createSourceFile('emitted.d.ts', declarations, ts.ScriptTarget.Latest, true);
  const isOurs = (specifier: string) => specifier.startsWith('.') && resolve(dirname(source.fileName), specifier).startsWith(`${dir}/`);
  const outsideNames = new Set<string>();
  for (const statement of emitted.statements) {
    if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier) && !isOurs(statement.moduleSpecifier.text)) {
      for (const name of importedNames(statement)) outsideNames.add(name);
    }
  }
  // The outside types by name (not zod's `z`, nor a schema, which are values): a type written out
  // names them where they occur in it (`fact: Fact` in RetrieveResult), as the source does.
  const outsideTypes = new Map<string, ts.Type>();
  for (const name of outsideNames) {
    const specifier = sourceDeclaration(source, name, ts.isImportSpecifier);
    const symbol = specifier && checker.getAliasedSymbol(checker.getSymbolAtLocation(specifier.name)!);
    if (symbol && symbol.flags & (ts.SymbolFlags.TypeAlias | ts.SymbolFlags.Interface)) outsideTypes.set(name, checker.getDeclaredTypeOfSymbol(symbol));
  }
  const print = typePrinter(checker, program, new Map([...outsideTypes].map(([name, type]) => [type, name])));

  const kept: string[] = [];
  for (const statement of emitted.statements) {
    if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier) && !isOurs(statement.moduleSpecifier.text)) continue;
    if (ts.isTypeAliasDeclaration(statement) && namesIn(statement.type).some((name) => outsideNames.has(name))) {
      const alias = sourceDeclaration(source, statement.name.text, ts.isTypeAliasDeclaration);
      if (!alias || alias.typeParameters) throw new Error(`${statement.name.text}: no plain type alias of that name in ${source.fileName}`);
      const head = statement.getText(emitted).slice(0, statement.type.getStart(emitted) - statement.getStart(emitted));
      kept.push(`${leadingComments(statement, emitted)}${head}${print(checker.getTypeAtLocation(alias.name), true)};`);
      continue;
    }
    // Between the modules of the package, the built files' names: `./errors.ts` → `./errors.js`.
    const text = statement.getFullText(emitted);
    const specifier = (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier;
    kept.push(specifier && ts.isStringLiteral(specifier) ? text.replace(/(['"])(\.{1,2}\/[^'"]+)\.ts\1/, '$1$2.js$1') : text);
  }

  // Outside types the text names: declared here, and the outside types their own text names.
  const declared = new Map<string, string>();
  const named = (text: string) => namesIn(ts.createSourceFile('named.d.ts', text, ts.ScriptTarget.Latest, true)).filter((n) => outsideNames.has(n));
  const pending = named(kept.join('\n'));
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (declared.has(name)) continue;
    const type = outsideTypes.get(name);
    if (!type) throw new Error(`${name}: named by the declarations of ${source.fileName}, but not a type imported there`);
    const text = `type ${name} = ${print(type, true)};`;
    declared.set(name, text);
    pending.push(...named(text));
  }
  const typeDeclarations = [...declared].sort(([a], [b]) => a.localeCompare(b)).map(([, text]) => text);
  return `${kept.join('\n').trim()}\n\n${typeDeclarations.join('\n\n')}\n`;
}

function importedNames(statement: ts.ImportDeclaration): string[] {
  const clause = statement.importClause;
  if (!clause) return [];
  const names = clause.name ? [clause.name.text] : [];
  const bindings = clause.namedBindings;
  if (bindings && ts.isNamespaceImport(bindings)) names.push(bindings.name.text);
  if (bindings && ts.isNamedImports(bindings)) names.push(...bindings.elements.map((element) => element.name.text));
  return names;
}

/** Every identifier in `node`, `z` and `WriteFactBodySchema` of `z.input<typeof WriteFactBodySchema>` included. */
function namesIn(node: ts.Node): string[] {
  const names: string[] = [];
  const visit = (child: ts.Node) => {
    if (ts.isIdentifier(child)) names.push(child.text);
    ts.forEachChild(child, visit);
  };
  visit(node);
  return names;
}

/** The declaration named `name` in `source`, of the kind `is` picks. */
function sourceDeclaration<T extends ts.Node & { name: ts.Node }>(source: ts.SourceFile, name: string, is: (node: ts.Node) => node is T): T | undefined {
  let found: T | undefined;
  const visit = (node: ts.Node) => {
    if (found) return;
    if (is(node) && ts.isIdentifier(node.name) && node.name.text === name) found = node;
    else ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function leadingComments(node: ts.Node, file: ts.SourceFile): string {
  const full = node.getFullText(file);
  return full.slice(0, node.getStart(file) - node.getFullStart());
}

/**
 * A type written out in TypeScript: object types member by member (whatever alias or interface
 * of the server or zod they come from), the standard library's types by name (`Promise<…>`,
 * `Omit<…>`, `Date`), so the text needs no import.
 */
function typePrinter(checker: ts.TypeChecker, program: ts.Program, names: Map<ts.Type, string>) {
  const isStandard = (symbol: ts.Symbol | undefined) =>
    (symbol?.declarations?.length ?? 0) > 0 && symbol!.declarations!.every((d) => program.isSourceFileDefaultLibrary(d.getSourceFile()));
  const key = (name: string) => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name));
  const inParens = (type: ts.Type, text: string) => (type.isUnion() || type.isIntersection() ? `(${text})` : text);
  const simple = ts.TypeFlags.Any | ts.TypeFlags.Unknown | ts.TypeFlags.Never | ts.TypeFlags.Void | ts.TypeFlags.Undefined | ts.TypeFlags.Null |
    ts.TypeFlags.StringLike | ts.TypeFlags.NumberLike | ts.TypeFlags.BigIntLike | ts.TypeFlags.BooleanLike | ts.TypeFlags.ESSymbolLike | ts.TypeFlags.NonPrimitive;

  /** `depth`: the objects it is inside, for the indentation of its members; `top`: the type being declared, never its own name. */
  const print = (type: ts.Type, depth: number, top = false): string => {
    if (depth > 32) throw new Error(`type too deep to write out: ${checker.typeToString(type)}`);
    const name = names.get(type);
    if (name && !top) return name;
    const next = (inner: ts.Type) => print(inner, depth);
    if (type.aliasSymbol && isStandard(type.aliasSymbol)) {
      const args = type.aliasTypeArguments ?? [];
      return args.length > 0 ? `${type.aliasSymbol.name}<${args.map(next).join(', ')}>` : type.aliasSymbol.name;
    }
    if (type.isUnion()) {
      // As one writes them: `boolean` for true | false, null and undefined last.
      const last = ts.TypeFlags.Null | ts.TypeFlags.Undefined;
      const members = type.types.filter((t) => !(t.flags & (ts.TypeFlags.BooleanLiteral | last)));
      const booleans = type.types.filter((t) => t.flags & ts.TypeFlags.BooleanLiteral);
      const texts = members.map((t) => inParens(t, next(t)));
      if (booleans.length === 2) texts.push('boolean');
      else texts.push(...booleans.map((t) => checker.typeToString(t)));
      texts.push(...type.types.filter((t) => t.flags & last).map((t) => checker.typeToString(t)));
      return texts.join(' | ');
    }
    if (type.isIntersection()) return type.types.map((t) => inParens(t, next(t))).join(' & ');
    if (type.flags & simple) return checker.typeToString(type);
    if (checker.isArrayType(type)) {
      const [element] = checker.getTypeArguments(type as ts.TypeReference);
      return `${inParens(element!, next(element!))}[]`;
    }
    if (checker.isTupleType(type)) return `[${checker.getTypeArguments(type as ts.TypeReference).map(next).join(', ')}]`;
    if (type.flags & ts.TypeFlags.Object) {
      const symbol = type.getSymbol();
      if (isStandard(symbol)) {
        const args = (type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference ? checker.getTypeArguments(type as ts.TypeReference) : [];
        return args.length > 0 ? `${symbol!.name}<${args.map(next).join(', ')}>` : symbol!.name;
      }
      if (type.getCallSignatures().length > 0 || type.getConstructSignatures().length > 0) {
        throw new Error(`cannot write out a function type: ${checker.typeToString(type)}`);
      }
      const member = (inner: ts.Type) => print(inner, depth + 1);
      const members = checker.getPropertiesOfType(type).map((property) => {
        const optional = property.flags & ts.SymbolFlags.Optional ? '?' : '';
        return `${key(property.name)}${optional}: ${member(checker.getTypeOfSymbol(property))};`;
      });
      for (const index of checker.getIndexInfosOfType(type)) members.push(`[key: ${checker.typeToString(index.keyType)}]: ${member(index.type)};`);
      const indent = '    '.repeat(depth + 1);
      return members.length > 0 ? `{\n${members.map((line) => `${indent}${line}\n`).join('')}${'    '.repeat(depth)}}` : '{}';
    }
    throw new Error(`cannot write out type ${checker.typeToString(type)}`);
  };
  return (type: ts.Type, top = false) => print(type, 0, top);
}

/** A user's project as the package must satisfy it: strict, no @types/node, no zod, libraries checked. */
export const CONSUMER_COMPILER_OPTIONS: ts.CompilerOptions = {
  strict: true,
  noEmit: true,
  skipLibCheck: false,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
  types: [],
};

/** The declarations type-checked on their own, as a user's project sees them. */
function checkAlone(files: string[], extra: ts.CompilerOptions = {}): void {
  const program = ts.createProgram(files, { ...CONSUMER_COMPILER_OPTIONS, ...extra });
  const errors = ts.getPreEmitDiagnostics(program);
  if (errors.length > 0) throw new Error(`the declarations do not stand alone:\n${format(errors)}`);
}

function format(diagnostics: readonly ts.Diagnostic[]): string {
  return ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => repositoryRoot, getNewLine: () => '\n' });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const { files } = await buildClientPackage();
  const sizes = Object.entries(files).map(([name, bytes]) => `${name} ${(bytes / 1024).toFixed(1)} KiB`);
  console.log(`built ${relative(process.cwd(), distDir) || '.'}/ in ${((Date.now() - started) / 1000).toFixed(1)} s: ${sizes.join(', ')}`);
}
