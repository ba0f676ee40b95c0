/**
 * The import directions of docs/architecture.md, checked by test/unit/layers.test.ts (and by
 * `npx depcruise src workers` for a readable report). Layers from the top: each may import only
 * the layers below it, never one above, and folders of the same layer below the top stay apart,
 * so no two folders can import each other in a loop. Type-only imports count
 * (`tsPreCompilationDeps`): a type from a higher layer ties the two just the same.
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
/** The composition root: the entry files that wire everything together, above every layer. */
const entryFiles = '^src/(app|server|shutdown|env-file)\\.ts$';

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

module.exports = {
  forbidden: [
    ...upward,
    ...peersApart,
    ...entryOneWay,
    {
      name: 'root-leaves-import-nothing',
      comment: 'src/errors.ts, log.ts, metrics.ts and redact.ts are imported from every layer, so they import none',
      severity: 'error',
      from: { path: '^src/(errors|log|metrics|redact)\\.ts$' },
      to: { path: '^(src|workers)/' },
    },
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
