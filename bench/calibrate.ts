/**
 * `npm run bench -- --calibrate [--collections=a,b]`: which fusion weight the configured embeddings
 * model should get (DESIGN §5, MNEMO_SEMANTIC_WEIGHT).
 *
 * The model is the one KINDGI_MEMORY_EMBEDDINGS_* configure (the endpoint the API would use);
 * without KINDGI_MEMORY_EMBEDDINGS=openai-compat, the built-in model (use-lite-512) on a local
 * server. For each collection (cranfield, med, cacm under IR_ROOT by default) a scratch database
 * is migrated, the documents are written as facts and embedded with that model, and every judged
 * query's keyword and semantic lists are computed once, as retrieve() computes them for mode
 * "both". The lists are then fused with each semantic weight of a grid (RRF k = 60, keyword
 * weight 1) and scored by mean nDCG@10. Prints the table and the weight to set; the scratch
 * databases and roles are dropped at the end.
 */
import type { Principal } from '../src/auth/permissions.ts';
import { startLocalEmbeddingsServer } from '../src/embeddings/local-server.ts';
import { createOpenAICompatProvider } from '../src/embeddings/openai-compat.ts';
import type { EmbeddingProvider } from '../src/embeddings/provider.ts';
import { ensureConfiguredModel } from '../src/memory/facts/vectors.ts';
import { RRF_K } from '../src/memory/retrieval/fusion.ts';
import { createScratchDatabase } from '../support/database.ts';
import { databaseServer } from './harness.ts';
import { embedAll, embedderFor, fusedNdcg, fusionLists, indexCollection, IR_ROOT, loadCollection, singleListNdcg } from './ir.ts';

/** Semantic weights tried (keyword weight 1). 0 is keyword alone; 1 is standard RRF. */
export const CALIBRATION_WEIGHTS = [0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 0.75, 1] as const;
/** How far `both` may fall below the better single mode on any collection (issue 12's bar). */
export const FUSION_TOLERANCE = 0.02;
const DEFAULT_COLLECTIONS = ['cranfield', 'med', 'cacm'];

export interface CollectionSweep {
  name: string;
  keyword: number;
  semantic: number;
  /** Mean nDCG@10 of `both` per weight of `weights`, in that order. */
  both: number[];
}

export interface Calibration {
  weights: readonly number[];
  collections: CollectionSweep[];
  /** The weight to use, and why it was chosen. */
  chosen: number;
  reason: string;
}

/** `both` minus the better single mode, per collection, at weight index `i`. */
const gaps = (collections: readonly CollectionSweep[], i: number) => collections.map((c) => c.both[i]! - Math.max(c.keyword, c.semantic));
const mean = (values: readonly number[]) => values.reduce((sum, x) => sum + x, 0) / values.length;

/**
 * The weight whose `both` is best on average among those within FUSION_TOLERANCE of the better
 * single mode on every collection; when none is, the one whose worst collection falls least.
 */
export function chooseSemanticWeight(weights: readonly number[], collections: readonly CollectionSweep[]): { chosen: number; reason: string } {
  const scored = weights.map((weight, i) => ({ weight, mean: mean(collections.map((c) => c.both[i]!)), worst: Math.min(...gaps(collections, i)) }));
  const within = scored.filter((s) => s.worst >= -FUSION_TOLERANCE);
  if (within.length > 0) {
    const best = within.reduce((a, b) => (b.mean > a.mean ? b : a));
    return { chosen: best.weight, reason: `best mean nDCG@10 (${best.mean.toFixed(3)}) of the weights within ${FUSION_TOLERANCE} of the better single mode on every collection` };
  }
  const best = scored.reduce((a, b) => (b.worst > a.worst ? b : a));
  return { chosen: best.weight, reason: `no weight stays within ${FUSION_TOLERANCE} of the better single mode everywhere; this one falls least (${best.worst.toFixed(3)})` };
}

const progress = (line: string) => process.stderr.write(`${line}\n`);

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'calibrate', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

/** Sweeps the weights for `provider`'s model on each collection, one scratch database at a time. */
export async function calibrate(serverUrl: string, provider: EmbeddingProvider, names: readonly string[], root = IR_ROOT): Promise<Calibration> {
  const collections: CollectionSweep[] = [];
  for (const name of names) {
    const collection = loadCollection(name, root);
    const database = await createScratchDatabase(serverUrl, `calib_${name.replace(/[^a-z0-9_]/gi, '_')}`, { app: 2, admin: 1, applicationName: 'mnemo-calibrate' });
    try {
      const { app } = database;
      const principal = admin(`calibrate-${name}`);
      const model = await ensureConfiguredModel(app.db, provider);
      progress(`${name}: writing ${collection.docs.length} facts…`);
      const docOf = await indexCollection(app.db, principal, collection);
      progress(`${name}: embedding them with ${model.model}…`);
      await embedAll(app.db, provider, principal.tenantId, model, { expected: collection.docs.length });
      await database.admin`analyze facts`;
      await database.admin`analyze fact_embeddings`;
      progress(`${name}: searching ${collection.queries.length} judged queries…`);
      const lists = await fusionLists({ db: app.db, principal, embedder: embedderFor(provider) }, model, collection);
      const both: number[] = [];
      for (const semanticWeight of CALIBRATION_WEIGHTS) both.push(await fusedNdcg(collection, docOf, lists, { k: RRF_K, semanticWeight }));
      collections.push({
        name,
        keyword: await singleListNdcg(collection, docOf, lists, 'keyword'),
        semantic: await singleListNdcg(collection, docOf, lists, 'semantic'),
        both,
      });
    } finally {
      await database.drop();
    }
  }
  return { weights: CALIBRATION_WEIGHTS, collections, ...chooseSemanticWeight(CALIBRATION_WEIGHTS, collections) };
}

/**
 * The table docs/decisions/0052-fusion-weights-per-model.md records: nDCG@10 per collection for each
 * weight, and each weight's worst gap.
 */
export function calibrationTable({ weights, collections }: Pick<Calibration, 'weights' | 'collections'>): string {
  const header = ['semantic weight', ...collections.map((c) => c.name), 'mean', 'worst vs better single'];
  const rows = [
    ['keyword alone', ...collections.map((c) => c.keyword.toFixed(3)), mean(collections.map((c) => c.keyword)).toFixed(3), ''],
    ['semantic alone', ...collections.map((c) => c.semantic.toFixed(3)), mean(collections.map((c) => c.semantic)).toFixed(3), ''],
    ...weights.map((weight, i) => {
      const worst = Math.min(...gaps(collections, i));
      return [
        `both, ${weight}`,
        ...collections.map((c) => c.both[i]!.toFixed(3)),
        mean(collections.map((c) => c.both[i]!)).toFixed(3),
        `${worst >= 0 ? '+' : ''}${worst.toFixed(3)}`,
      ];
    }),
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [line(header), `|${widths.map((w, i) => (i === 0 ? ` ${'-'.repeat(w)} ` : ` ${'-'.repeat(w - 1)}: `)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** The endpoint the API would use (KINDGI_MEMORY_EMBEDDINGS_*), else the built-in model on a local server. */
async function configuredProvider(env: NodeJS.ProcessEnv): Promise<{ provider: EmbeddingProvider; close(): Promise<void> }> {
  if (env.KINDGI_MEMORY_EMBEDDINGS === 'openai-compat') {
    const url = env.KINDGI_MEMORY_EMBEDDINGS_URL;
    const model = env.KINDGI_MEMORY_EMBEDDINGS_MODEL;
    if (!url || !model) throw new Error('--calibrate: KINDGI_MEMORY_EMBEDDINGS_URL and KINDGI_MEMORY_EMBEDDINGS_MODEL are required with KINDGI_MEMORY_EMBEDDINGS=openai-compat');
    const batchSize = Number(env.KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE || 64);
    const provider = createOpenAICompatProvider({ url, model, apiKey: env.KINDGI_MEMORY_EMBEDDINGS_API_KEY || undefined, batchSize, timeoutMs: 120_000 });
    return { provider, close: async () => {} };
  }
  progress('KINDGI_MEMORY_EMBEDDINGS is not set: calibrating the built-in model on a local server');
  const local = await startLocalEmbeddingsServer({ port: 0, log: progress });
  return {
    provider: createOpenAICompatProvider({ url: local.url, model: local.model, batchSize: 64, timeoutMs: 120_000 }),
    close: () => local.close(),
  };
}

/** The `--calibrate` run: the sweep's table on stdout, then the setting to use. */
export async function runCalibration(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  const serverUrl = databaseServer(env);
  const listed = argv.find((arg) => arg.startsWith('--collections='))?.slice('--collections='.length).split(',');
  const names = (listed ?? argv.filter((arg) => !arg.startsWith('-'))).filter(Boolean);
  const { provider, close } = await configuredProvider(env);
  try {
    const result = await calibrate(serverUrl, provider, names.length > 0 ? names : DEFAULT_COLLECTIONS);
    process.stdout.write(
      [
        '',
        `Fusion weight of ${provider.model}: mean nDCG@10 of "both" (RRF k = ${RRF_K}, keyword weight 1) per semantic weight`,
        '',
        calibrationTable(result),
        '',
        `${provider.model}: MNEMO_SEMANTIC_WEIGHT=${result.chosen} (${result.reason})`,
        '',
      ].join('\n'),
    );
  } finally {
    await close();
  }
}
