/**
 * `npm run bench`: Mnemo side by side with the raw SQL it runs and with LangGraph.js's store, on
 * synthetic data at tenant scale (issue 12, part 8). See `npm run bench -- --help`.
 *
 * One scratch database for the run. The main tenant grows through the sizes (1k → 10k → 100k
 * facts …) with other tenants beside it (half as many facts again, in clusters of their own) and
 * an adversarial tenant whose vectors sit in the main tenant's clusters. Facts and vectors are
 * loaded as the owner in multi-row inserts; before each load the model's HNSW index is dropped
 * and after it rebuilt by ensure_embedding_index (what the app calls), then ANALYZE. The API and
 * the worker run as their own processes against an instant synthetic embeddings endpoint.
 */
import { execSync } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, machine as arch, release, totalmem, type as osType } from 'node:os';
import { dirname, join } from 'node:path';
import { startFakeEmbeddings } from '../support/fake-embeddings.ts';
import { IR_ROOT } from './ir.ts';
import {
  cleanUp,
  cleanUpOnSignal,
  createScratch,
  endpointEmbedder,
  environment,
  progress,
  type Scratch,
  startApi,
  startWorker,
  tokenFor,
  UsageError,
} from './harness.ts';
import { langGraphPuts, langGraphSearch, loadLangGraph, openLangGraph } from './langgraph.ts';
import { LOCOMO_SOURCE, LOCOMO_SPLITS, type LocomoOptions, type LocomoResult, type LocomoSplit } from './locomo.ts';
import { renderMarkdown, renderSvg } from './results.ts';
import { type Section, SECTIONS, type SideBySideRun } from './side-by-side-run.ts';
import { filteredRecall, type Mode, searchBreakdown, searchSideBySide } from './search-scale.ts';
import { loadFacts, loadQueries, loadSentences, type TenantLoad, VectorSpace } from './synthetic.ts';
import { embedPipeline, writesSideBySide } from './write-side.ts';

interface Profile {
  sizes: number[];
  rounds: number;
  queries: number;
  recallQueries: number;
  writeSeconds: number;
  embedLive: number;
  embedBacklog: number;
  reportEpisodes: number;
}

const PROFILES: Record<'default' | 'full', Profile> = {
  default: { sizes: [1_000, 10_000], rounds: 2, queries: 30, recallQueries: 20, writeSeconds: 3, embedLive: 1_000, embedBacklog: 2_000, reportEpisodes: 100_000 },
  full: { sizes: [1_000, 10_000, 100_000], rounds: 3, queries: 40, recallQueries: 30, writeSeconds: 6, embedLive: 5_000, embedBacklog: 20_000, reportEpisodes: 1_000_000 },
};

export const HELP = `npm run bench [-- options]

Mnemo side by side: search latency through the HTTP API vs the raw SQL, filtered recall,
writes, the embed pipeline, the coverage report and LangGraph.js's PostgresStore, on synthetic
data in a scratch database (dropped at the end, also on Ctrl-C); retrieval quality on the IR
collections; recall on LoCoMo's conversations (section locomo). Tables go to stdout and are
appended to bench/RESULTS.md with a chart (bench/latency-by-size.svg).

Needs DATABASE_URL (or DATABASE_ADMIN_URL: a role that may create databases and roles) and
REDIS_URL. Progress goes to stderr.

Options:
  --size=default|full   default: tenant sizes 1k and 10k facts, minutes;
                        full: 1k, 10k and 100k facts, longer timings (tens of minutes)
  --facts=N[,N…]        explicit tenant sizes, e.g. --facts=100000
  --only=a,b,…          sections: ${SECTIONS.join(', ')}
                        (default: all)
  --dims=N              synthetic vector dimension (default 256)
  --rounds=N            timed rounds over the queries per measure
  --no-save             print only; do not touch bench/RESULTS.md or the chart
  --skip-modules        only this file's measurements, not the modules of issue 12's other
                        parts (keyword-scale, writes, embed-pipeline, report-scale)
  --ir-data=<dir>       the IR collections (texts, queries, quality); default ../shared/data/ir
  --locomo=PATH         the LoCoMo conversations for section locomo (or MNEMO_LOCOMO): the file
                        data/locomo10.json of github.com/snap-research/LoCoMo (CC BY-NC 4.0, so
                        not shipped). Without it a run of every section leaves locomo out, and
                        --only=locomo refuses
  --locomo-split=S      dev: conversations 0-4, the default (tune on these); heldout: 5-9 (run
                        once and report, never tune on it); all
  --locomo-misses=FILE  also write each question's evidence and the top 10 of each ranking there
                        (JSON lines), for failure analysis
  --locomo-fusion=W,..  also fuse mode both with each semantic weight W (keyword 1) and report it
  --calibrate           measure the configured embeddings model's fusion weight (bench/calibrate.ts)
  --help                this text

Examples:
  npm run bench -- --only=keyword,semantic,both --facts=10000
  npm run bench -- --size=full
  npm run bench -- --only=locomo --locomo=../LoCoMo/data/locomo10.json`;

export interface SideBySideOptions {
  sizeLabel: string;
  profile: Profile;
  sections: Section[];
  dims: number;
  save: boolean;
  /** Run the other parts' measurement modules (keyword-scale.ts, writes.ts, embed-pipeline.ts, report-scale.ts) in their sections. */
  modules: boolean;
  /** The IR quality bench (bench/index.ts), returning its tables. */
  quality: () => Promise<string>;
  /** Section locomo's data; null when the section does not run. */
  locomo: LocomoOptions | null;
  /** The LoCoMo bench (bench/index.ts runs it with the local model). */
  runLocomo: (options: LocomoOptions) => Promise<LocomoResult>;
  /** Said at the start and kept in the results' notes: a section left out, and why. */
  notes: string[];
}

export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): SideBySideOptions | 'help' {
  const value = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (argv.includes('--help') || argv.includes('-h')) return 'help';
  const known = ['size', 'facts', 'only', 'dims', 'rounds', 'ir-data', 'locomo', 'locomo-split', 'locomo-misses', 'locomo-fusion'];
  for (const arg of argv) {
    if (!arg.startsWith('-')) continue;
    const name = arg.replace(/^--?/, '').split('=')[0]!;
    if (!known.includes(name) && name !== 'no-save' && name !== 'skip-modules') throw new UsageError(`unknown option ${arg}`);
  }
  const sizeLabel = value('size') ?? 'default';
  if (sizeLabel !== 'default' && sizeLabel !== 'full') throw new UsageError(`--size must be default or full, not ${sizeLabel}`);
  const profile = { ...PROFILES[sizeLabel] };
  const facts = value('facts');
  if (facts !== undefined) {
    const sizes = facts.split(',').map((s) => Number(s.replace(/_/g, '')));
    if (sizes.some((s) => !Number.isInteger(s) || s < 100 || s > 10_000_000)) throw new UsageError(`--facts takes whole numbers from 100 to 10,000,000, e.g. --facts=10000,100000`);
    profile.sizes = [...new Set(sizes)].sort((a, b) => a - b);
  }
  const rounds = value('rounds');
  if (rounds !== undefined) {
    profile.rounds = Number(rounds);
    if (!Number.isInteger(profile.rounds) || profile.rounds < 1) throw new UsageError('--rounds must be a whole number ≥ 1');
  }
  const only = value('only');
  let sections = only === undefined ? [...SECTIONS] : only.split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of sections) if (!(SECTIONS as readonly string[]).includes(s)) throw new UsageError(`unknown section ${s}; sections: ${SECTIONS.join(', ')}`);
  const dims = Number(value('dims') ?? 256);
  if (!Number.isInteger(dims) || dims < 2 || dims > 2000) throw new UsageError('--dims must be 2 to 2000');
  const notes: string[] = [];
  const locomo = locomoOptions(value, env);
  if (sections.includes('locomo') && locomo === null) {
    // The data cannot ship (its licence), so a plain run goes on without it; asking for it by name cannot.
    if (only !== undefined) throw new UsageError(`section locomo needs the LoCoMo data: --locomo=PATH or MNEMO_LOCOMO, the file ${LOCOMO_SOURCE}`);
    sections = sections.filter((s) => s !== 'locomo');
    notes.push(`locomo: left out, no data (--locomo=PATH or MNEMO_LOCOMO); the file is ${LOCOMO_SOURCE}.`);
  }
  return {
    sizeLabel: facts ? `facts=${profile.sizes.join(',')}` : sizeLabel,
    profile,
    sections: sections as Section[],
    dims,
    save: !argv.includes('--no-save'),
    modules: !argv.includes('--skip-modules'),
    quality: async () => '',
    locomo: sections.includes('locomo') ? locomo : null,
    runLocomo: async () => {
      throw new Error('the LoCoMo bench runs from bench/index.ts');
    },
    notes,
  };
}

/** --locomo (or MNEMO_LOCOMO), --locomo-split and --locomo-misses; null without data. */
function locomoOptions(value: (name: string) => string | undefined, env: NodeJS.ProcessEnv): LocomoOptions | null {
  const split = value('locomo-split') ?? 'dev';
  if (!(LOCOMO_SPLITS as readonly string[]).includes(split)) throw new UsageError(`--locomo-split must be ${LOCOMO_SPLITS.join(', ')}, not ${split}`);
  const misses = value('locomo-misses');
  // Checked now: the file is written at the end of a run of minutes.
  if (misses === '') throw new UsageError('--locomo-misses needs a file name');
  if (misses !== undefined && !existsSync(dirname(misses))) throw new UsageError(`--locomo-misses: no folder ${dirname(misses)} to write ${misses} in`);
  const fusionText = value('locomo-fusion');
  const fusion = fusionText === undefined ? undefined : fusionText.split(',').map(Number);
  if (fusion && (fusion.length === 0 || fusion.some((w) => !Number.isFinite(w) || w < 0 || w > 100))) {
    throw new UsageError(`--locomo-fusion takes semantic weights 0-100 separated by commas, not ${fusionText}`);
  }
  const path = value('locomo') || env.MNEMO_LOCOMO || undefined;
  if (path === undefined) return null;
  if (!existsSync(path)) throw new UsageError(`--locomo / MNEMO_LOCOMO: no file at ${path}; the data is ${LOCOMO_SOURCE}`);
  return { path, split: split as LocomoSplit, ...(misses === undefined ? {} : { misses }), ...(fusion ? { fusion } : {}) };
}

const MODEL = 'bench-synthetic';
const OTHER_TENANTS = 4;
const MAIN_CLUSTERS = Array.from({ length: 100 }, (_, i) => i);

function machine(): SideBySideRun['machine'] {
  let commit = 'unknown';
  try {
    commit = execSync('git rev-parse --short HEAD', { cwd: join(import.meta.dirname, '..') }).toString().trim();
    const dirty = execSync('git status --porcelain -- src bench', { cwd: join(import.meta.dirname, '..') }).toString().trim();
    if (dirty) commit += ' (with uncommitted changes in src or bench)';
  } catch {
    // Not a git checkout: the commit stays unknown.
  }
  return {
    date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
    commit,
    uname: `${osType()} ${release()} ${arch()}`,
    cpus: cpus().length,
    memoryGiB: totalmem() / 2 ** 30,
    loadBefore: loadavg().map((l) => l.toFixed(2)).join(' '),
  };
}

/** Optional modules other parts of issue 12 contribute: called when present. */
async function optionalModule<T>(file: string): Promise<T | null> {
  if (!existsSync(join(import.meta.dirname, file))) return null;
  return (await import(/* @vite-ignore */ `./${file}`)) as T;
}

export async function runSideBySide(options: SideBySideOptions): Promise<SideBySideRun> {
  const started = performance.now();
  const env = environment(process.env);
  const has = (s: Section) => options.sections.includes(s);
  const { profile, dims } = options;
  const run: SideBySideRun = {
    sizeLabel: options.sizeLabel,
    sizes: profile.sizes,
    sections: options.sections,
    dims,
    machine: machine(),
    otherTenantsNote: `${OTHER_TENANTS} tenants holding half the main tenant's size between them, and an adversarial tenant of 1% of it (at least 500) in the main tenant's clusters`,
    clustersNote: `200 clusters (main tenant and adversarial tenant 100, the others 100 others)`,
    queriesNote: `${profile.queries} queries from the IR collections (semantic and both: the same texts, placed in the tenant's clusters), ${profile.rounds} timed rounds after a warm-up, API and raw interleaved query by query.`,
    search: [],
    breakdown: [],
    recall: [],
    writes: [],
    batch: [],
    writeSeconds: profile.writeSeconds,
    embed: [],
    langgraph: [],
    langgraphPuts: [],
    langgraphVersion: langgraphVersion(),
    modules: {},
    notes: [...options.notes],
    seconds: 0,
  };
  for (const note of options.notes) progress(note);
  cleanUpOnSignal();
  try {
    const searching = (['keyword', 'semantic', 'both'] as const).filter(has);
    const needsApi = searching.length > 0 || has('recall') || has('writes') || has('embed');
    const needsData = searching.length > 0 || has('recall') || has('langgraph');
    const space = new VectorSpace(dims);
    const sentences = loadSentences(IR_ROOT);
    const queries = loadQueries(IR_ROOT, profile.queries);

    if (needsApi || needsData) {
      progress(`scratch database, migrations…`);
      const scratch = await createScratch(env, 'sbs');
      // The endpoint the API embeds queries through, and the worker facts: VectorSpace vectors, at once.
      const embeddings = await startFakeEmbeddings({ model: MODEL, dims, vectorOf: (text) => space.embedText(text) });
      try {
        await scratch.admin`insert into embedding_models (model, dims, state, activated_at) values (${MODEL}, ${dims}, 'active', now())`;
        const endpoint = { url: embeddings.url, model: MODEL };
        const embed = endpointEmbedder(endpoint);
        const api = needsApi ? await startApi(env, scratch, endpoint) : null;
        // The breakdown's API: the same, answering Server-Timing (its measuring is kept out of the figures above).
        const timedApi = searching.length > 0 || has('writes') ? await startApi(env, scratch, endpoint, { MNEMO_SERVER_TIMING: 'true' }) : null;
        const lg = has('langgraph') ? await openLangGraph(scratch.admin, scratch.adminUrl, space, embed) : null;
        try {
          if (needsData) {
            const mainToken = await tokenFor('bench-main');
            const adversarialToken = await tokenFor('bench-adversarial');
            let loaded = 0;
            for (const size of profile.sizes) {
              await growTo(scratch, space, sentences, loaded, size);
              loaded = size;
              const setup = {
                api: api!,
                owner: scratch.admin,
                space,
                model: MODEL,
                tenantId: 'bench-main',
                token: mainToken,
                clusters: MAIN_CLUSTERS,
                keywordQueries: queries,
                rounds: profile.rounds,
                embedQuery: async (text: string) => (await embed([text]))[0]!,
              };
              if (searching.length > 0) {
                for (const row of await searchSideBySide(setup, size, searching as Mode[])) run.search.push({ ...row, load: loadavg()[0]! });
                run.breakdown.push(...(await searchBreakdown(setup, timedApi!, size, searching as Mode[])));
              }
              if (has('recall')) {
                run.recall.push(
                  ...(await filteredRecall(
                    setup,
                    size,
                    [
                      { label: 'main tenant, 2% (type filter)', tenantId: 'bench-main', token: mainToken, clusters: MAIN_CLUSTERS, type: 'bench.rare2' },
                      { label: 'main tenant, 0.1% (type filter)', tenantId: 'bench-main', token: mainToken, clusters: MAIN_CLUSTERS, type: 'bench.rare01' },
                      { label: 'adversarial tenant (in the main tenant\'s clusters)', tenantId: 'bench-adversarial', token: adversarialToken, clusters: MAIN_CLUSTERS },
                    ],
                    profile.recallQueries,
                  )),
                );
              }
              if (lg) {
                progress(`langgraph: loading ${size} items…`);
                await loadLangGraph(scratch.admin, lg, space, sentences, mainLoad(0, size));
                const search = await langGraphSearch(lg, MAIN_CLUSTERS, queries, profile.rounds);
                progress(`langgraph ${size}: search p50 ${search.p50.toFixed(1)} ms`);
                run.langgraph.push({ size, search });
              }
            }
          }
          if (lg) run.langgraphPuts = await langGraphPuts(lg, sentences, profile.writeSeconds);
          if (api && has('writes')) {
            const { single, batch, breakdown } = await writesSideBySide(api, scratch, sentences, { clients: [1, 2, 8, 32], seconds: profile.writeSeconds, timedApi: timedApi ?? undefined });
            run.writes = single;
            run.batch = batch;
            run.breakdown.push(...breakdown);
          }
          if (api && has('embed')) {
            const worker = await startWorker(env, scratch, { url: embeddings.url, model: MODEL }, { MNEMO_RECONCILE_EVERY_MS: '2000' });
            try {
              run.embed = await embedPipeline(api, scratch, sentences, MODEL, { live: profile.embedLive, backlog: profile.embedBacklog, timeoutSeconds: 600 });
            } catch (error) {
              run.notes.push(`embed pipeline: ${error instanceof Error ? error.message : String(error)}`);
            } finally {
              await worker.stop();
            }
            run.notes.push('Embed backlog: facts inserted behind the API, found by the reconciler (MNEMO_RECONCILE_EVERY_MS=2000 for the bench).');
          }
        } finally {
          await lg?.close();
          await api?.stop();
          await timedApi?.stop();
        }
      } finally {
        await embeddings.close();
        await cleanUp();
      }
    }
    if (options.modules) await runModules(options, run);
    if (has('quality')) {
      progress('quality: IR collections with the real local model…');
      run.quality = await options.quality();
    }
    if (options.locomo) {
      progress(`locomo: ${options.locomo.split} split of ${options.locomo.path} with the real local model…`);
      run.locomo = await options.runLocomo(options.locomo);
    }
  } finally {
    await cleanUp();
  }
  run.machine.loadAfter = loadavg().map((l) => l.toFixed(2)).join(' ');
  run.seconds = (performance.now() - started) / 1000;
  const markdown = renderMarkdown(run);
  process.stdout.write(`\n${markdown}\n`);
  if (options.save) {
    const results = join(import.meta.dirname, 'RESULTS.md');
    if (!existsSync(results)) writeFileSync(results, '# Bench results\n\nAppended by `npm run bench` (bench/side-by-side.ts), newest last.\n\n');
    appendFileSync(results, `${markdown}\n`);
    if (run.search.length > 0) writeFileSync(join(import.meta.dirname, 'latency-by-size.svg'), renderSvg(run));
    progress('appended to bench/RESULTS.md' + (run.search.length > 0 ? ', chart in bench/latency-by-size.svg' : ''));
  }
  return run;
}

/** The measurement modules of issues 12's other parts, run in the sections they belong to. */
async function runModules(options: SideBySideOptions, run: SideBySideRun): Promise<void> {
  const has = (s: Section) => options.sections.includes(s);
  const log = (line: string) => progress(line);
  const attempt = async (name: string, go: () => Promise<unknown>) => {
    try {
      run.modules[name] = await go();
    } catch (error) {
      // The first line only: a driver error's message can carry the whole statement.
      run.notes.push(`${name}: failed: ${(error instanceof Error ? error.message : String(error)).split('\n')[0]!.trim()}`);
    }
  };
  if (has('keyword')) {
    const m = await optionalModule<typeof import('./keyword-scale.ts')>('keyword-scale.ts');
    const sizes = options.profile.sizes.filter((s) => s >= 10_000);
    if (m && sizes.length > 0) await attempt('keyword-scale.ts (Mnemo keyword vs the previous BM25 and plain ts_rank)', () => m.keywordScaleBench({ sizes, log }));
  }
  if (has('writes')) {
    const m = await optionalModule<typeof import('./writes.ts')>('writes.ts');
    if (m) await attempt('writes.ts (single, keyed and batch writes vs raw)', () => m.writesBench({ clients: [1, 2, 8, 32], seconds: options.profile.writeSeconds, log }));
  }
  if (has('embed')) {
    const m = await optionalModule<typeof import('./embed-pipeline.ts')>('embed-pipeline.ts');
    if (m) await attempt('embed-pipeline.ts', () => m.embedPipelineBench({ facts: options.profile.embedBacklog, log }));
  }
  if (has('report')) {
    // report-scale.ts (issue 12, part 7) measures the coverage report at this many episodes.
    const file = 'report-scale.ts';
    const m = await optionalModule<{ reportScaleBench: (o: { episodes: number; log: (line: string) => void }) => Promise<unknown> }>(file);
    if (m) await attempt(`report-scale.ts (coverage report over ${options.profile.reportEpisodes.toLocaleString('en')} episodes)`, () => m.reportScaleBench({ episodes: options.profile.reportEpisodes, log }));
    else run.notes.push('report: bench/report-scale.ts is not in this checkout; the coverage report was not measured.');
  }
}

/** The main tenant's facts [from, to): the clusters and seeds every section (and LangGraph) shares. */
const mainLoad = (from: number, to: number): TenantLoad => ({ tenantId: 'bench-main', from, to, clusters: MAIN_CLUSTERS, seedBase: 0 });

/** Grows every tenant to its share of `size`, with the model's HNSW index rebuilt after. */
async function growTo(scratch: Scratch, space: VectorSpace, sentences: readonly string[], from: number, size: number): Promise<void> {
  const { admin: owner } = scratch;
  const loads: TenantLoad[] = [mainLoad(from, size)];
  const otherClusters = Array.from({ length: 100 }, (_, i) => 100 + i);
  for (let t = 0; t < OTHER_TENANTS; t++) {
    const share = (n: number) => Math.floor(n / 2 / OTHER_TENANTS);
    loads.push({ tenantId: `bench-other-${t}`, from: share(from), to: share(size), clusters: otherClusters.filter((_, i) => i % OTHER_TENANTS === t), seedBase: 10_000_000 * (t + 1) });
  }
  const adversarial = (n: number) => (n === 0 ? 0 : Math.max(500, Math.floor(n / 100)));
  loads.push({ tenantId: 'bench-adversarial', from: adversarial(from), to: adversarial(size), clusters: MAIN_CLUSTERS, seedBase: 90_000_000 });

  const [{ index }] = await owner<[{ index: string }]>`select 'fact_embeddings_hnsw_' || substr(md5(${MODEL}), 1, 16) as index`;
  await owner.unsafe(`drop index if exists "${index}"`);
  const total = loads.reduce((n, l) => n + l.to - l.from, 0);
  let done = 0;
  const loadStarted = performance.now();
  for (const load of loads) {
    let before = load.from;
    await loadFacts(owner, space, sentences, MODEL, load, (upTo) => {
      done += upTo - before;
      before = upTo;
      if (done % 10_000 < 1000 || done === total) progress(`loading to ${size}: ${done}/${total} facts (${(done / ((performance.now() - loadStarted) / 1000)).toFixed(0)}/s)`);
    });
  }
  progress(`building the HNSW index (ensure_embedding_index)…`);
  const indexStarted = performance.now();
  await owner.begin(async (tx) => {
    await tx`set local maintenance_work_mem = '512MB'`;
    await tx`select ensure_embedding_index(${MODEL}, ${space.dims})`;
  });
  await owner`analyze facts`;
  await owner`analyze fact_embeddings`;
  await owner`analyze fact_revisions`;
  progress(`loaded ${total} facts in ${((indexStarted - loadStarted) / 1000).toFixed(1)} s, index and ANALYZE in ${((performance.now() - indexStarted) / 1000).toFixed(1)} s`);
}

function langgraphVersion(): string {
  try {
    const manifest = join(import.meta.dirname, '../node_modules/@langchain/langgraph-checkpoint-postgres/package.json');
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
  } catch {
    return '(version unknown)';
  }
}
