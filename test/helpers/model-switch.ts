/**
 * The blue-green switch of embedding model (DESIGN §9), end to end: the real local model, real
 * Postgres + pgvector, real Redis and BullMQ, the API over HTTP, the in-process worker running the
 * backfill, and the `mnemo reembed` / `mnemo embeddings-server` commands as operators run them.
 * `npm test` runs it over 40 facts in batches of 4 (test/e2e/model-switch.test.ts), so a
 * backfill still takes ten steps that searches and progress reports are seen between;
 * `npm run test:slow` over 1,000 facts in batches of 64, the size a deployment would see
 * (test/slow/model-switch.test.ts).
 *
 * The local server answers to B, C and D as aliases of its one model (A), so all four give the
 * same vectors: what is tested is the switch's mechanics (which model serves, when, and what is
 * left behind), not ranking quality.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { needs } from './needs.ts';
import type { Principal } from '../../src/auth/permissions.ts';
import { reembedJobId, scheduleBackfill, scheduleEmbedding } from '../../src/jobs/embedding-jobs.ts';
import { reembedQueue } from '../../src/jobs/queues.ts';
import { embedPending, ensureConfiguredModel } from '../../src/memory/facts/vectors.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { type QueryEmbedder, retrieve } from '../../src/memory/retrieval/retrieve.ts';
import { startTestApi, type TestApi } from './api.ts';
import { freePort } from '../../support/ports.ts';
import { startProcess } from './process.ts';
import { sleep } from '../../support/wait.ts';

const A = 'use-lite-512';
const B = 'use-lite-512-b';
const C = 'use-lite-512-c';
const D = 'use-lite-512-d';

/** 20 people × 10 kinds of statement × 5 objects: 1,000 different sentences on 10 topics. */
const people = [
  'Ana', 'Bilal', 'Chen', 'Dara', 'Emeka', 'Farah', 'Goran', 'Hana', 'Ivo', 'Jonas',
  'Kemal', 'Lena', 'Mateo', 'Nadia', 'Omar', 'Priya', 'Quentin', 'Rosa', 'Sven', 'Tariq',
];
const statements: [(who: string, what: string) => string, string[]][] = [
  [(who, what) => `${who} reported that the ${what} in the kitchen is leaking water`, ['washing machine', 'dishwasher', 'fridge', 'coffee maker', 'sink']],
  [(who, what) => `${who} paid the ${what} invoice late and owes a fee`, ['electricity', 'internet', 'rent', 'insurance', 'phone']],
  [(who, what) => `${who} booked a flight to ${what} for the spring conference`, ['Lisbon', 'Tokyo', 'Nairobi', 'Toronto', 'Oslo']],
  [(who, what) => `${who} adopted a ${what} from the animal shelter`, ['puppy', 'kitten', 'rabbit', 'parrot', 'hamster']],
  [(who, what) => `${who} cooks ${what} every Sunday for the whole family`, ['lasagna', 'curry', 'paella', 'ramen', 'tacos']],
  [(who, what) => `${who} fixed a ${what} bug in the billing service`, ['memory leak', 'race condition', 'timeout', 'null pointer', 'deadlock']],
  [(who, what) => `${who} planted ${what} in the back garden`, ['tomatoes', 'roses', 'tulips', 'basil', 'potatoes']],
  [(who, what) => `${who} is allergic to ${what}`, ['peanuts', 'penicillin', 'pollen', 'shellfish', 'cat hair']],
  [(who, what) => `${who} plays ${what} on Tuesday evenings`, ['tennis', 'chess', 'football', 'basketball', 'volleyball']],
  [(who, what) => `${who} drinks ${what} when the weather turns cold`, ['green tea', 'hot chocolate', 'mulled wine', 'ginger tea', 'black coffee']],
];
const allSentences = people.flatMap((who) => statements.flatMap(([say, objects]) => objects.map((what) => say(who, what))));

const queries = ['a kitchen appliance is leaking', 'allergy to a medicine', 'travelling abroad to a conference', 'adopting a pet'];

const indexName = (model: string) => `fact_embeddings_hnsw_${createHash('md5').update(model).digest('hex').slice(0, 16)}`;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export interface ModelSwitchSize {
  /** How many facts are written and switched (at most 1,000: the sentences below). */
  facts: number;
  /** Facts per call to the model in the embed and backfill jobs. */
  embedBatch: number;
}

export function describeModelSwitch({ facts: FACTS, embedBatch }: ModelSwitchSize): void {
  // The CLI's processes queue the backfill for the test's worker in BullMQ, and the test reads its job's state there.
  describe(`A model switch with ${FACTS.toLocaleString('en')} facts`, needs('redis'), () => {
    let api: TestApi;
    let tenantId: string;
    let admin: string;
    const timings: Record<string, string> = {};
    /** What model A found for each query before the switch started. */
    const baseline = new Map<string, string[]>();

    const states = async () =>
      Object.fromEntries(
        (await api.db.admin<{ model: string; state: string }[]>`select model, state from embedding_models order by model`).map((r) => [r.model, r.state]),
      ) as Record<string, string>;

    const search = async (query: string) => {
      const response = await api.request('POST', '/v1/memory/retrieve', { token: admin, body: { mode: 'semantic', query, limit: 10 } });
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return {
        model: response.body.journal.embeddingModel as string | undefined,
        ids: (response.body.results as { fact: { id: string } }[]).map((r) => r.fact.id),
      };
    };

    /** Resolves once the backfill job of `model` has finished (it is removed on completion). */
    const backfillFinished = async (model: string, timeoutMs = 60_000) => {
      const queue = api.embeddings!.bullQueues!.get(reembedQueue.name)!;
      const started = Date.now();
      for (;;) {
        const job = await queue.getJob(reembedJobId(model));
        if (!job || (await job.isCompleted())) return;
        if (Date.now() - started > timeoutMs) throw new Error(`backfill of ${model} still ${await job.getState()}`);
        await sleep(100);
      }
    };

    const cliEnv = (model: string): Record<string, string> => ({
      DATABASE_URL: api.db.appUrl,
      REDIS_URL: inject('redisUrl'),
      KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
      KINDGI_MEMORY_EMBEDDINGS_URL: api.embeddings!.server.url,
      KINDGI_MEMORY_EMBEDDINGS_MODEL: model,
      MNEMO_QUEUE_PREFIX: api.embeddings!.prefix,
    });

    /** `bin/mnemo.js` to completion, killed if it outlives `timeoutMs`. */
    const mnemo = async (args: string[], env: Record<string, string>, timeoutMs = 60_000) => {
      const running = startProcess('bin/mnemo.js', args, env);
      const timer = setTimeout(() => running.child.kill('SIGKILL'), timeoutMs);
      try {
        const code = await running.exited;
        return { code, stdout: running.stdout(), stderr: running.stderr() };
      } finally {
        clearTimeout(timer);
      }
    };

    beforeAll(async () => {
      api = await startTestApi({ embeddings: true, embedBatch, embeddingAliases: [B, C, D] });
      ({ tenantId, admin } = await api.newTenant('switch'));
    });
    afterAll(async () => {
      await api?.close();
      console.info(`model switch with ${FACTS} facts: ${JSON.stringify(timings)}`);
    });

    it(`writes ${FACTS.toLocaleString('en')} facts, which model A embeds`, { timeout: 180_000 }, async () => {
      const sentences = allSentences.slice(0, FACTS);
      expect(new Set(sentences).size).toBe(FACTS);
      expect(await states()).toEqual({ [A]: 'active' });
      const principal: Principal = { tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } };
      const ctx = { db: api.db.app.db, principal };

      let started = performance.now();
      for (let i = 0; i < FACTS; i += 4) {
        await Promise.all(sentences.slice(i, i + 4).map((text, j) => writeFact(ctx, { type: 'note', content: { text, n: i + j } })));
      }
      timings.write = seconds(performance.now() - started);

      // writeFact is the domain verb; the HTTP route is what schedules embedding, so schedule here as it does.
      started = performance.now();
      await scheduleEmbedding(api.embeddings!.queues, tenantId);
      await api.embeddings!.settled(tenantId, 120_000);
      timings.embedA = seconds(performance.now() - started);

      const [row] = await api.db.admin<{ n: number }[]>`select count(*)::int as n from fact_embeddings where model = ${A} and tenant_id = ${tenantId}`;
      expect(row!.n).toBe(FACTS);

      for (const query of queries) {
        const { model, ids } = await search(query);
        expect(model).toBe(A);
        expect(ids).toHaveLength(10);
        baseline.set(query, ids);
      }
      // The searches find what they are about (the model is real): a leak query finds leaks.
      const leaks = await api.request('POST', '/v1/memory/retrieve', { token: admin, body: { mode: 'semantic', query: queries[0], limit: 3 } });
      for (const r of leaks.body.results) expect(r.fact.content.text).toContain('leaking');
    });

    it('backfills model B while search keeps serving A, then switches and retires A', { timeout: 180_000 }, async () => {
      const provider = api.embeddings!.providers.forModel(B);
      expect(await ensureConfiguredModel(api.db.app.db, provider)).toEqual({ model: B, dims: 512, state: 'backfilling' });
      expect(await states()).toEqual({ [A]: 'active', [B]: 'backfilling' });
      const [indexB] = await api.db.admin`select 1 from pg_indexes where indexname = ${indexName(B)}`;
      expect(indexB, 'B gets its HNSW index when registered').toBeDefined();

      const started = performance.now();
      expect(await scheduleBackfill(api.embeddings!.queues, B)).toBe('added');
      const queue = api.embeddings!.bullQueues!.get(reembedQueue.name)!;

      interface Observation {
        query: string;
        before: string;
        after: string;
        model: string | undefined;
        ids: string[];
      }
      const observations: Observation[] = [];
      const progress: { live: number; embedded: number }[] = [];
      for (;;) {
        if (performance.now() - started > 150_000) throw new Error(`no switch to ${B} within 150 s: ${JSON.stringify(await states())}`);
        const before = (await states())[B]!;
        const answers = await Promise.all(queries.map(async (query) => ({ query, ...(await search(query)) })));
        const after = (await states())[B]!;
        for (const answer of answers) observations.push({ ...answer, before, after });
        const job = await queue.getJob(reembedJobId(B));
        if (job && typeof job.progress === 'object') progress.push(job.progress as { live: number; embedded: number });
        if (after === 'active') break;
        await sleep(50);
      }
      timings.switchToB = seconds(performance.now() - started);

      // Searches answered entirely while B was backfilling were served by A; those that started
      // after the switch by B; those across it by either. None lost a fact A found before.
      const wrongModel = observations.filter(
        (o) => (o.after === 'backfilling' && o.model !== A) || (o.before === 'active' && o.model !== B) || (o.model !== A && o.model !== B),
      );
      expect(wrongModel, 'journal.embeddingModel per state of B').toEqual([]);
      const lost = observations
        .map((o) => ({ query: o.query, before: o.before, after: o.after, model: o.model, found: o.ids.length, missing: baseline.get(o.query)!.filter((id) => !o.ids.includes(id)) }))
        .filter((o) => o.missing.length > 0);
      expect(lost, 'searches that lost facts model A had found').toEqual([]);
      const duringBackfill = observations.filter((o) => o.after === 'backfilling').length / queries.length;
      expect(duringBackfill, 'rounds of searches while B was backfilling').toBeGreaterThanOrEqual(3);

      // The job reported its progress as it went.
      expect(progress.some((p) => p.embedded > 0 && p.embedded < p.live), JSON.stringify(progress)).toBe(true);
      for (const p of progress) expect(p).toMatchObject({ model: B, live: FACTS });

      await backfillFinished(B);
      timings.switchToBWithCleanup = seconds(performance.now() - started);

      expect(await states()).toEqual({ [A]: 'retired', [B]: 'active' });
      const [stale] = await api.db.admin<{ n: number }[]>`
        select count(*)::int as n from facts f
        where f.invalidated_at is null and (f.expires_at is null or f.expires_at > now())
          and not exists (select 1 from fact_embeddings e
                          where e.tenant_id = f.tenant_id and e.fact_id = f.id and e.model = ${B} and e.version = f.version)`;
      expect(stale!.n, 'live facts without a current vector of B').toBe(0);
      const [ofB] = await api.db.admin<{ n: number }[]>`select count(*)::int as n from fact_embeddings where model = ${B}`;
      expect(ofB!.n).toBe(FACTS);
      const [ofA] = await api.db.admin<{ n: number }[]>`select count(*)::int as n from fact_embeddings where model = ${A}`;
      expect(ofA!.n, "A's vectors are deleted").toBe(0);
      expect(await api.db.admin`select indexname from pg_indexes where indexname = ${indexName(A)}`, "A's HNSW index is dropped").toHaveLength(0);
      expect(await api.db.admin`select indexname from pg_indexes where indexname = ${indexName(B)}`).toHaveLength(1);

      for (const query of queries) {
        const { model, ids } = await search(query);
        expect(model).toBe(B);
        expect(ids).toEqual(expect.arrayContaining(baseline.get(query)!));
      }
      const facts = await api.request('POST', '/v1/memory/retrieve', { token: admin, body: { mode: 'semantic', query: queries[0], limit: 3 } });
      for (const r of facts.body.results) expect(r.fact.embeddingModel).toBe(B);

      const status = await api.request('GET', '/v1/memory/embeddings', { token: admin });
      expect(status.status).toBe(200);
      expect(status.body.models).toEqual([{ model: B, dims: 512, state: 'active', live: FACTS, embedded: FACTS, backlog: 0 }]);
    });

    it('mnemo reembed --no-start registers model C and only reports its state', { timeout: 60_000 }, async () => {
      const result = await mnemo(['reembed', '--no-start'], cliEnv(C));
      expect(result.stderr).toBe('');
      expect(result).toMatchObject({ code: 0, stdout: `model ${C}: backfilling 0/${FACTS} live facts (0%)\n` });
      expect(await states()).toEqual({ [A]: 'retired', [B]: 'active', [C]: 'backfilling' });
      expect(await api.embeddings!.bullQueues!.get(reembedQueue.name)!.getJob(reembedJobId(C)), 'nothing queued').toBeUndefined();
    });

    it('mnemo reembed --watch starts the backfill of C, shows progress, and exits once search switched', { timeout: 180_000 }, async () => {
      const started = performance.now();
      const result = await mnemo(['reembed', '--watch'], cliEnv(C), 150_000);
      timings.cliSwitchToC = seconds(performance.now() - started);
      expect(result.code, result.stderr).toBe(0);
      const out = result.stdout.split('\n');
      expect(out[0]).toMatch(new RegExp(`^model ${C}: backfilling \\d+/${FACTS} live facts \\(\\d+%\\)$`));
      expect(out).toContain(`switched to ${C}`);
      // Not a terminal: one progress line per 10% step, ending at 100%.
      const steps = result.stderr.split('\n').filter(Boolean);
      expect(steps.length).toBeGreaterThanOrEqual(2);
      for (const line of steps) expect(line).toMatch(new RegExp(`^${C}: \\d+% \\(\\d+/${FACTS} live facts\\)$`));
      expect(steps.at(-1)).toBe(`${C}: 100% (${FACTS}/${FACTS} live facts)`);

      await backfillFinished(C);
      expect(await states()).toEqual({ [A]: 'retired', [B]: 'retired', [C]: 'active' });
      const [ofB] = await api.db.admin<{ n: number }[]>`select count(*)::int as n from fact_embeddings where model = ${B}`;
      expect(ofB!.n).toBe(0);
      expect((await search(queries[0]!)).model).toBe(C);

      // Run again: the model is active, nothing to do.
      const again = await mnemo(['reembed', '--watch'], cliEnv(C));
      expect(again).toMatchObject({ code: 0, stdout: `model ${C}: active\n`, stderr: '' });
    });

    it('a search in flight across the switch still finds what its model found', { timeout: 120_000 }, async () => {
      // Model D covers every fact before its backfill job starts (embedded here through the same
      // domain function the job uses), so the job's only work is the switch itself.
      const provider = api.embeddings!.providers.forModel(D);
      const info = await ensureConfiguredModel(api.db.app.db, provider);
      expect(info.state).toBe('backfilling');
      while ((await embedPending(api.db.app.db, provider, tenantId, info, { batch: 256 })) > 0);
      expect(await states()).toEqual({ [A]: 'retired', [B]: 'retired', [C]: 'active', [D]: 'backfilling' });

      // The search as the route runs it, with the real model; its query vector is held back until
      // the switch has happened, as a busy embeddings endpoint would hold it.
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let asked: string | undefined;
      const embedder: QueryEmbedder = {
        async embed(model, text) {
          asked = model;
          await gate;
          return (await api.embeddings!.providers.forModel(model).embed([text]))[0]!;
        },
      };
      const principal: Principal = { tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } };
      const inFlight = retrieve({ db: api.db.app.db, principal, embedder }, { mode: 'semantic', query: queries[0]!, limit: 10 });
      while (asked === undefined) await sleep(5);
      expect(asked, 'the search read the serving model before the switch').toBe(C);

      expect(await scheduleBackfill(api.embeddings!.queues, D)).toBe('added');
      await backfillFinished(D);
      expect(await states()).toEqual({ [A]: 'retired', [B]: 'retired', [C]: 'retired', [D]: 'active' });
      release();

      const answer = await inFlight;
      // The query was embedded with C before any connection was taken; the search's snapshot then
      // found D serving (C's vectors gone), so it embedded the query again with D.
      expect(asked, 'embedded again with the model that serves in the snapshot').toBe(D);
      expect(answer.journal.embeddingModel).toBe(D);
      expect(
        answer.results.map((r) => r.fact.id),
        'a search that started before the switch lost the facts its model had found',
      ).toEqual(expect.arrayContaining(baseline.get(queries[0]!)!));

      // The next search is served by D.
      const next = await search(queries[0]!);
      expect(next.model).toBe(D);
      expect(next.ids).toEqual(expect.arrayContaining(baseline.get(queries[0]!)!));
    });

    it('mnemo reembed: one line and exit 2 without embeddings configured, exit 1 when the endpoint is down', { timeout: 60_000 }, async () => {
      const { KINDGI_MEMORY_EMBEDDINGS: _, ...noEmbeddings } = cliEnv(C);
      const unconfigured = await mnemo(['reembed'], noEmbeddings);
      expect(unconfigured.code).toBe(2);
      expect(unconfigured.stderr).toMatch(/^Invalid configuration: KINDGI_MEMORY_EMBEDDINGS must be "openai-compat" for mnemo reembed[^\n]*\n$/);

      const badOption = await mnemo(['reembed', '--follow'], cliEnv(C));
      expect(badOption.code).toBe(2);

      const down = `http://127.0.0.1:${await freePort()}/v1`;
      const unreachable = await mnemo(['reembed'], { ...cliEnv('use-lite-512-e'), KINDGI_MEMORY_EMBEDDINGS_URL: down });
      expect(unreachable.code).toBe(1);
      expect(unreachable.stderr).toMatch(new RegExp(`^mnemo: reembed: the embeddings endpoint ${down.replace(/[./]/g, '\\$&')} did not embed with use-lite-512-e: [^\\n]+\\n$`));
      expect(await states()).not.toHaveProperty('use-lite-512-e');
    });

    it('mnemo embeddings-server: answers POST /v1/embeddings, stops with exit 0 on SIGTERM', { timeout: 90_000 }, async () => {
      const port = await freePort();
      const server = startProcess('bin/mnemo.js', ['embeddings-server', '--port', String(port)], {});
      try {
        const url = `http://127.0.0.1:${port}/v1`;
        await server.waitFor('\n', 60_000);
        expect(server.stdout()).toBe(
          `Embeddings server: use-lite-512 at ${url} (set KINDGI_MEMORY_EMBEDDINGS=openai-compat, KINDGI_MEMORY_EMBEDDINGS_URL=${url}, KINDGI_MEMORY_EMBEDDINGS_MODEL=use-lite-512)\n`,
        );
        const response = await fetch(`${url}/embeddings`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'use-lite-512', input: ['the dishwasher is leaking', 'penicillin allergy'] }),
        });
        expect(response.status).toBe(200);
        const body = (await response.json()) as { data: { index: number; embedding: number[] }[] };
        expect(body.data.map((d) => d.index)).toEqual([0, 1]);
        for (const d of body.data) expect(d.embedding).toHaveLength(512);
      } finally {
        server.child.kill('SIGTERM');
      }
      expect(await server.exited).toBe(0);

      const bad = await mnemo(['embeddings-server', '--port', 'eighty'], {});
      expect(bad).toMatchObject({ code: 2, stderr: 'mnemo: embeddings-server: --port must be a port number (0 to 65535)\n' });
    });
  });
}
