/**
 * `npm run bench [-- options]`: the side-by-side bench (bench/side-by-side.ts; `--help` lists the
 * options and sections) and, as its `quality` section, retrieval quality and latency on the
 * classic IR collections under IR_ROOT (--ir-data, MNEMO_IR_DATA, else ../shared/data/ir/;
 * cranfield, med, cacm by default, or `--collections=a,b`), with the real local model (USE lite).
 *
 * Quality, for each collection: a scratch database is created and migrated (as the test setup
 * does: the owner from DATABASE_URL runs the migrations, and a login role of this run is
 * provisioned as a member of the scratch database's app group, so searches run under row-level
 * security as the API's do), the documents are written as facts through the real write path,
 * embedded batch by batch (embedPending, as the embed jobs do), and every judged query is run
 * through retrieve() in each mode. Reports mean nDCG@10 per mode and latency percentiles; the
 * scratch databases and the roles are dropped at the end.
 *
 * LoCoMo (section locomo, --locomo=PATH): the conversations of the split in one scratch database
 * made the same way, one tenant each, with the same model (bench/locomo.ts measures them).
 */
import { startLocalEmbeddingsServer } from '../src/embeddings/local-server.ts';
import { LOCAL_MODEL } from '../src/foundation/local-model.ts';
import { semanticWeightOf } from '../src/embeddings/registry.ts';
import { createOpenAICompatProvider } from '../src/embeddings/openai-compat.ts';
import type { EmbeddingProvider } from '../src/embeddings/provider.ts';
import { ensureConfiguredModel } from '../src/memory/facts/vectors.ts';
import { FUSION_DEPTH, RRF_K } from '../src/memory/retrieval/fusion.ts';
import type { QueryEmbedder, RetrievalCaller } from '../src/memory/retrieval/retrieve.ts';
import { EXACT_SCAN_LIMIT } from '../src/memory/retrieval/semantic.ts';
import { type ConnectedDatabase, createScratchDatabase } from '../support/database.ts';
import {
  embedAll,
  embedderFor,
  type FusionVariant,
  fusionSweep,
  indexCollection,
  IR_ROOT,
  loadCollection,
  meanNdcg10,
  retrieveRanker,
  SEARCH_MODES,
  type SearchMode,
} from './ir.ts';
import { runCalibration } from './calibrate.ts';
import { admin, databaseServer, registerCleanup, table, UsageError } from './harness.ts';
import { benchLocomo, loadLocomo, type LocomoOptions, type LocomoResult, writeAnswers } from './locomo.ts';
import { HELP, parseOptions, runSideBySide } from './side-by-side.ts';
import { type Latency, measureRetrievalLatency, type RetrievalLatencies } from './latency.ts';

/** Mean nDCG@10 of the BM25 reference (shared/data/ir), as quoted by the retrieval issue. */
const BM25_REFERENCE: Record<string, number> = { cranfield: 0.396, med: 0.661, cacm: 0.487 };
const DEFAULT_COLLECTIONS = ['cranfield', 'med', 'cacm'];
/** RRF settings compared on the same lists (equal weights, then others); retrieve()'s own weight is the model's measured one. */
const FUSION_VARIANTS: FusionVariant[] = [
  { k: RRF_K, semanticWeight: 1 },
  { k: RRF_K, semanticWeight: 0.5 },
  { k: 10, semanticWeight: 1 },
  { k: 10, semanticWeight: 0.5 },
];
const LATENCY_ROUNDS = Number(process.env.MNEMO_BENCH_ROUNDS ?? 3);

const progress = (line: string) => process.stderr.write(`${line}\n`);

interface CollectionResult {
  name: string;
  docs: number;
  queries: number;
  ndcg: Record<SearchMode, number>;
  /** nDCG@10 of each FUSION_VARIANTS entry. */
  fusion: number[];
  latency: RetrievalLatencies;
  loadSeconds: number;
  embedSeconds: number;
}

async function main(): Promise<void> {
  if (process.argv.includes('--calibrate')) {
    await runCalibration(process.argv.slice(2), process.env);
    return;
  }
  const argv = process.argv.slice(2).filter((arg) => !arg.startsWith('--collections='));
  const positional = argv.filter((arg) => !arg.startsWith('-'));
  if (positional.length > 0) throw new UsageError(`unexpected argument ${positional[0]}; collections go in --collections=a,b`);
  const options = parseOptions(argv);
  if (options === 'help') {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const names = process.argv.find((arg) => arg.startsWith('--collections='))?.slice('--collections='.length).split(',').filter(Boolean);
  await runSideBySide({
    ...options,
    quality: () => runQuality(names && names.length > 0 ? names : DEFAULT_COLLECTIONS),
    runLocomo,
  });
}

/** The real local model behind an OpenAI-compatible provider for `use`, stopped after. */
async function withLocalModel<T>(use: (provider: EmbeddingProvider) => Promise<T>): Promise<T> {
  const embeddings = await startLocalEmbeddingsServer({ port: 0, log: progress });
  try {
    return await use(createOpenAICompatProvider({ url: embeddings.url, model: embeddings.model, batchSize: 64, timeoutMs: 120_000 }));
  } finally {
    await embeddings.close();
  }
}

/**
 * A scratch database for one data set, dropped when `use` is done (or by the side-by-side
 * bench's cleanup on Ctrl-C), with `analyze` for after its bulk loads.
 */
async function withScratch<T>(
  label: string,
  describe: (database: string) => string,
  use: (database: ConnectedDatabase, analyze: () => Promise<void>) => Promise<T>,
): Promise<T> {
  const database = await createScratchDatabase(
    databaseServer(process.env),
    label.replace(/[^a-z0-9_]/gi, '_'),
    { app: 4, admin: 1, applicationName: 'mnemo-bench' },
    (created, drop) => {
      progress(describe(created));
      registerCleanup(drop);
    },
  );
  // Statistics after the bulk load, as autovacuum would gather them: without them the planner
  // takes each table for one row and never uses the HNSW index.
  const analyze = async () => {
    await database.admin`analyze facts`;
    await database.admin`analyze fact_embeddings`;
  };
  try {
    return await use(database, analyze);
  } finally {
    await database.drop();
  }
}

/** The quality section: the IR collections, one scratch database each; returns the tables. */
async function runQuality(collections: readonly string[]): Promise<string> {
  const results: CollectionResult[] = [];
  await withLocalModel(async (provider) => {
    for (const name of collections) {
      const collection = loadCollection(name, IR_ROOT);
      const described = (database: string) => `${name}: ${collection.docs.length} docs, ${collection.queries.length} judged queries; database ${database}`;
      results.push(await withScratch(name, described, (database, analyze) => benchCollection(database.app.db, provider, collection, analyze)));
    }
  });
  return report(results);
}

/** The locomo section: the split's conversations in one scratch database, a tenant each. */
async function runLocomo(options: LocomoOptions): Promise<LocomoResult> {
  const conversations = loadLocomo(options.path, options.split);
  const turns = conversations.reduce((n, c) => n + c.turns.length, 0);
  const questions = conversations.reduce((n, c) => n + c.questions.length, 0);
  const described = (database: string) =>
    `locomo: ${options.split} split, ${conversations.length} conversations (${conversations.map((c) => c.sampleId).join(', ')}), ${turns} turns, ${questions} questions; database ${database}`;
  return withLocalModel((provider) =>
    withScratch(`locomo_${options.split}`, described, async (database, analyze) => {
      const { result, answers } = await benchLocomo(database.app.db, provider, conversations, { split: options.split, analyze, log: progress, ...(options.fusion ? { fusion: options.fusion } : {}) });
      if (options.misses) {
        writeAnswers(options.misses, answers);
        progress(`locomo: each question's evidence and top 10 in ${options.misses}`);
      }
      return result;
    }),
  );
}

async function benchCollection(
  db: RetrievalCaller['db'],
  provider: EmbeddingProvider,
  collection: ReturnType<typeof loadCollection>,
  analyze: () => Promise<void>,
): Promise<CollectionResult> {
  const { name } = collection;
  const principal = admin(`bench-${name}`);
  const model = await ensureConfiguredModel(db, provider);
  let started = performance.now();
  const docOf = await indexCollection(db, principal, collection, {
    onProgress: (written) => {
      if (written % 250 === 0 || written === collection.docs.length) progress(`${name}: wrote ${written}/${collection.docs.length} facts`);
    },
  });
  const loadSeconds = (performance.now() - started) / 1000;

  started = performance.now();
  let lastReported = 0;
  const embedded = await embedAll(db, provider, principal.tenantId, model, {
    batch: 64,
    expected: collection.docs.length,
    onProgress: (done) => {
      if (done - lastReported >= 256 || done >= collection.docs.length) {
        lastReported = done;
        const rate = done / ((performance.now() - started) / 1000);
        progress(`${name}: embedded ${done}/${collection.docs.length} (${rate.toFixed(1)} facts/s)`);
      }
    },
  });
  const embedSeconds = (performance.now() - started) / 1000;
  if (embedded !== collection.docs.length) throw new Error(`${name}: embedded ${embedded} of ${collection.docs.length} facts`);
  await analyze();

  const ctx: RetrievalCaller & { embedder: QueryEmbedder } = { db, principal, embedder: embedderFor(provider) };
  const ndcg = {} as Record<SearchMode, number>;
  for (const mode of SEARCH_MODES) {
    ndcg[mode] = await meanNdcg10(collection, docOf, retrieveRanker(ctx, mode));
    progress(`${name}: ${mode} nDCG@10 = ${ndcg[mode].toFixed(3)}`);
  }
  const fusion = await fusionSweep(ctx, model, collection, docOf, FUSION_VARIANTS);
  progress(`${name}: timing retrieval (${LATENCY_ROUNDS} rounds of ${collection.queries.length} queries per measure)…`);
  const latency = await measureRetrievalLatency(ctx, provider, model, collection.queries.map((q) => q.text), LATENCY_ROUNDS);
  return { name, docs: collection.docs.length, queries: collection.queries.length, ndcg, fusion, latency, loadSeconds, embedSeconds };
}

const ms = (l: Latency) => `${l.p50.toFixed(1)} / ${l.p95.toFixed(1)}`;

function report(results: CollectionResult[]): string {
  const out: string[] = [];
  out.push('', 'Mean nDCG@10 (retrieve(), limit 10; documents judged 0 left out of rankings)', '');
  out.push(
    table(
      ['collection', 'docs', 'queries', 'keyword', 'semantic', 'both', 'BM25 reference', 'keyword − ref'],
      results.map((r) => {
        const ref = BM25_REFERENCE[r.name];
        return [
          r.name,
          String(r.docs),
          String(r.queries),
          ...SEARCH_MODES.map((m) => r.ndcg[m].toFixed(3)),
          ref === undefined ? '—' : ref.toFixed(3),
          ref === undefined ? '—' : (r.ndcg.keyword - ref >= 0 ? '+' : '') + (r.ndcg.keyword - ref).toFixed(3),
        ];
      }),
    ),
  );
  out.push(
    '',
    `BM25 reference (shared/data/ir): cranfield 0.396, med 0.661, cacm 0.487. Semantic: USE lite (512-d, local).`,
    `Both: retrieve()'s RRF (k = ${RRF_K}) of keyword and semantic, each ${FUSION_DEPTH} deep, with the model's semantic weight (${LOCAL_MODEL}: ${semanticWeightOf(LOCAL_MODEL)}; DESIGN §5).`,
    '',
    `RRF variants on the same lists (keyword and semantic, each ${FUSION_DEPTH} deep), mean nDCG@10:`,
    '',
    table(
      ['collection', 'keyword', ...FUSION_VARIANTS.map((v) => `k=${v.k}, semantic ×${v.semanticWeight}`)],
      results.map((r) => [r.name, r.ndcg.keyword.toFixed(3), ...r.fusion.map((x) => x.toFixed(3))]),
    ),
    '',
    `Latency in ms, p50 / p95 (${LATENCY_ROUNDS} timed rounds over each collection's queries after one warm-up round; limit 10)`,
    '',
  );
  out.push(
    table(
      ['collection', 'docs', 'keyword', 'semantic', 'both', 'embed query', 'vector exact', 'vector hnsw', 'hnsw index used'],
      results.map((r) => [
        r.name,
        String(r.docs),
        ...SEARCH_MODES.map((m) => ms(r.latency.retrieve[m])),
        ms(r.latency.embedQuery),
        ms(r.latency.vector.exact),
        ms(r.latency.vector.hnsw),
        `${r.latency.hnswIndexUsed.used}/${r.latency.hnswIndexUsed.of}`,
      ]),
    ),
  );
  out.push(
    '',
    'keyword / semantic / both: retrieve() end to end, in one tenant transaction, facts loaded; semantic and both',
    'include embedding the query with the local model over HTTP (the "embed query" column).',
    `vector exact / hnsw: semanticSearch() alone on pre-embedded queries, strategy forced (with fewer than`,
    `${EXACT_SCAN_LIMIT} candidates retrieve() picks exact); "hnsw index used": queries whose forced-hnsw plan scanned`,
    'the HNSW index (pg_stat_get_xact_numscans), the rest were planned as a scan of the tenant\'s rows.',
    'Tables analyzed after loading. One process, one call at a time, on this machine.',
    '',
    'Loading (writeFact, one transaction per fact) and embedding (batches of 64):',
    ...results.map(
      (r) =>
        `  ${r.name}: ${r.docs} facts written in ${r.loadSeconds.toFixed(1)} s (${(r.docs / r.loadSeconds).toFixed(0)}/s), embedded in ${r.embedSeconds.toFixed(1)} s (${(r.docs / r.embedSeconds).toFixed(1)}/s)`,
    ),
    '',
  );
  return out.join('\n');
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) process.stderr.write(`npm run bench: ${error.message}\n(npm run bench -- --help lists the options)\n`);
  else process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
