/**
 * The import directions of docs/architecture.md, checked by test/unit/layers.test.ts (and by
 * `npx depcruise src workers` for a readable report). Layers from the top: each may import only
 * the layers below it, never one above, and folders of the same layer below the top stay apart,
 * so no two folders can import each other in a loop. Type-only imports count
 * (`tsPreCompilationDeps`): a type from a higher layer ties the two just the same. Every file of
 * src/ and workers/ has its place here, none is exempt: a file placed nowhere is itself a
 * violation (`every-file-in-a-layer`).
 */

/** Top to bottom. The files at the root of src/ are placed below, one by one. */
const layers = [
  { name: 'entry', folders: ['http', 'mcp', 'cli', 'client', 'workers'] },
  { name: 'domains', folders: ['lifecycle', 'episodes'] },
  { name: 'memory', folders: ['memory'] },
  { name: 'services', folders: ['jobs', 'embeddings'] },
  { name: 'core', folders: ['core'] },
  { name: 'rules', folders: ['kiwifs', 'auth'] },
  { name: 'embedded', folders: ['embedded'] },
  { name: 'db', folders: ['db'] },
];

const folderPath = (folder) => (folder === 'workers' ? '^workers/' : `^src/${folder}/`);
const anyOf = (folders) => folders.map(folderPath).join('|');
const rootFiles = (names) => `^src/(${names.join('|')})\\.ts$`;
/**
 * The composition root, beside the entry folders: the files that wire everything together
 * (config.ts reads the environment into a Config, with the data directory's secrets), imported by
 * the entry points only.
 */
const entryFiles = rootFiles(['app', 'server', 'shutdown', 'env-file', 'config']);
/**
 * Below every layer, imported from any: the configuration schema, storable text, the error codes,
 * logging, metrics and redaction. The foundation imports nothing of ours but its own files.
 */
const foundation = '^src/foundation/';

/**
 * A file placed nowhere above would import and be imported unchecked, so it is named: each of
 * its imports, each import of it, and the file alone when it has neither.
 */
const unplaced = {
  path: '^(src|workers)/',
  pathNot: [anyOf(layers.flatMap((layer) => layer.folders)), entryFiles, foundation].join('|'),
};
const everyFileInALayer = [
  { from: unplaced, to: {} },
  { from: {}, to: unplaced },
  { from: { ...unplaced, orphan: true }, to: {} },
].map(({ from, to }) => ({
  name: 'every-file-in-a-layer',
  comment: 'a file of src/ or workers/ in no layer, not in the composition root or the foundation: place it in .dependency-cruiser.cjs',
  severity: 'error',
  from,
  to,
}));

const upward = layers.slice(1).map((layer, i) => ({
  name: `${layer.name}-points-down`,
  comment: `${layer.folders.join(', ')} may import only the layers below (docs/architecture.md)`,
  severity: 'error',
  from: { path: anyOf(layer.folders) },
  to: { path: [anyOf(layers.slice(0, i + 1).flatMap((above) => above.folders)), entryFiles].join('|') },
}));

const peersApart = layers
  .slice(1)
  .filter((layer) => layer.folders.length > 1)
  .map((layer) => ({
    name: `${layer.name}-peers-apart`,
    comment: `${layer.folders.join(' and ')} share a layer: what one needs of the other belongs a layer down`,
    severity: 'error',
    from: { path: `^src/(${layer.folders.join('|')})/` },
    to: { path: `^src/(${layer.folders.join('|')})/`, pathNot: '^src/$1/' },
  }));

/**
 * The entry folders may lean on each other one way only: cli → mcp → http, cli → client and
 * cli → workers (the CLI starts them all; the MCP tools reuse the routes' helpers).
 */
const entryMayImport = { http: [], mcp: ['http'], client: [], workers: [] };
const entryOneWay = Object.entries(entryMayImport).map(([folder, allowed]) => {
  const others = layers[0].folders.filter((other) => other !== folder && !allowed.includes(other));
  return {
    name: `entry-${folder}-one-way`,
    comment: `among the entry folders only cli → mcp → http, cli → client and cli → workers`,
    severity: 'error',
    from: { path: folderPath(folder) },
    to: { path: anyOf(others) },
  };
});

/**
 * memory/'s own folders lean one way too: retrieval/ and remember/ build on facts/, never the
 * reverse and never on each other; the files at memory/'s root (the wire schemas' shared pieces)
 * import none of the folders.
 */
const memoryMayImport = { facts: [], retrieval: ['facts'], remember: ['facts'] };
const memoryFolders = Object.keys(memoryMayImport);
const memoryOneWay = [
  ...Object.entries(memoryMayImport).map(([folder, allowed]) => ({
    name: `memory-${folder}-one-way`,
    comment: 'inside memory/ only retrieval → facts and remember → facts',
    severity: 'error',
    from: { path: `^src/memory/${folder}/` },
    to: { path: `^src/memory/(${memoryFolders.filter((other) => other !== folder && !allowed.includes(other)).join('|')})/` },
  })),
  {
    name: 'memory-root-imports-no-folder',
    comment: "the files at memory/'s root are what its folders share, so they import none of them",
    severity: 'error',
    from: { path: '^src/memory/[^/]+\\.ts$' },
    to: { path: '^src/memory/[^/]+/' },
  },
];

module.exports = {
  forbidden: [
    ...upward,
    ...peersApart,
    ...entryOneWay,
    ...memoryOneWay,
    {
      name: 'foundation-imports-nothing-of-ours',
      comment: 'src/foundation/ is below every layer: it imports npm packages and its own files, nothing else of src/ (docs/architecture.md)',
      severity: 'error',
      from: { path: foundation },
      to: { path: '^(src|workers)/', pathNot: foundation },
    },
    ...everyFileInALayer,
    {
      name: 'no-cycles',
      comment: 'no module reaches itself through its imports',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    // The harness (docs/testing.md, decision 0103): support/ is the one kit test/ and bench/ share,
    // below both; checked by test/unit/harness-imports.test.ts.
    {
      name: 'bench-imports-no-test',
      comment: 'bench/ takes what it shares with the tests from support/, never from test/',
      severity: 'error',
      from: { path: '^bench/' },
      to: { path: '^test/' },
    },
    {
      name: 'support-imports-no-test-or-bench',
      comment: 'support/ sits below test/ and bench/: it imports src/ and itself only',
      severity: 'error',
      from: { path: '^support/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'support-runs-without-vitest',
      comment: 'the bench runs support/ outside vitest: what needs vitest (inject, the run\'s setup) stays in test/',
      severity: 'error',
      from: { path: '^support/' },
      to: { path: 'node_modules/(vitest|@vitest)/' },
    },
    {
      name: 'product-imports-no-harness',
      comment: 'src/ and workers/ never import the tests, the benchmarks or their kit',
      severity: 'error',
      from: { path: '^(src|workers)/' },
      to: { path: '^(support|test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
  },
};
