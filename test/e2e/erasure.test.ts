import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { createClient } from '../../src/client/index.ts';
import { MemoryOperationUnsupportedError } from '../../src/client/errors.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { targetHash } from '../../src/core/erasure-guard.ts';
import { closeQueues, createQueues } from '../../src/jobs/queues.ts';
import { dispatchOutbox } from '../../src/jobs/outbox.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { queueDefinitions } from '../../src/jobs/queues.ts';
import { requestErasure } from '../../src/lifecycle/erasure.ts';
import { registerModel, storeEmbeddings } from '../../src/memory/facts/vectors.ts';
import { withTenant } from '../../src/db/client.ts';
import { startTestApi, TEST_ERASURE_KEY, TEST_SECRET, type TestApi, tokenFor } from '../helpers/api.ts';
import { killProcess } from '../../support/processes.ts';
import { startProcess } from '../helpers/process.ts';
import { sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';
import { seedFacts } from '../../support/seed.ts';

const admin = (tenantId: string) => ({ tenantId, sub: 'admin-1', role: 'admin' as const, projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

/** Erasure (DESIGN §10) through the API and real workers; what is left is checked as the owner. */
describe('erasure', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({ worker: true });
    await registerModel(api.db.app.db, 'test-model-3', 3);
  });
  afterAll(() => api.close());

  const write = (token: string, body: Record<string, unknown>) =>
    api.request('POST', '/v1/memory/facts', { token, body: { type: 'acme.note', content: { text: 'about end-9' }, ...body } });
  const waitFor = async (token: string, id: string) => {
    for (let i = 0; i < 400; i++) {
      const { body } = await api.request('GET', `/v1/memory/erasures/${id}`, { token });
      if (body.status === 'completed' || body.status === 'failed') return body;
      await sleep(50);
    }
    throw new Error(`erasure ${id} did not finish`);
  };
  /** Rows as the owner (a superuser: row-level security does not filter it, so the tenant is named). */
  const rows = async (tenantId: string) => ({
    facts: await api.db.admin`select id, version, content, subjects, invalidation_reason, participant_id from facts where tenant_id = ${tenantId}`,
    revisions: await api.db.admin`select fact_id, version, content, subjects, participant_id from fact_revisions where tenant_id = ${tenantId}`,
    vectors: await api.db.admin`select fact_id from fact_embeddings where tenant_id = ${tenantId}`,
  });

  it('is for tenant admins only (403), and takes exactly one target (400)', async () => {
    const { tenantId, admin: token } = await api.newTenant('perm');
    const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { read: ['p1'], write: ['p1'] } });
    const body = { subject: { kind: 'participant', id: 'end-9' } };
    expect((await api.request('POST', '/v1/memory/erasures', { token: member, body })).status).toBe(403);
    expect((await api.request('GET', '/v1/memory/erasures', { token: member })).status).toBe(403);
    const started = await api.request('POST', '/v1/memory/erasures', { token, body });
    expect(started.status).toBe(202);
    expect((await api.request('GET', `/v1/memory/erasures/${started.body.id}`, { token: member })).status).toBe(403);
    expect((await api.request('POST', `/v1/memory/erasures/${started.body.id}/resume`, { token: member })).status).toBe(403);
    for (const bad of [{}, { factId: '0190a000-0000-7000-8000-000000000000', conversationId: 'th-1' }, { subject: { kind: 'user', id: 'u' } }]) {
      const response = await api.request('POST', '/v1/memory/erasures', { token, body: bad });
      expect(response.status, JSON.stringify(bad)).toBe(400);
    }
    expect((await api.request('POST', '/v1/memory/erasures', { token, body: { factId: '0190a000-0000-7000-8000-000000000000' } })).status).toBe(404);
    const { admin: stranger } = await api.newTenant('stranger');
    expect((await api.request('GET', `/v1/memory/erasures/${started.body.id}`, { token: stranger })).status).toBe(404);
  });

  it('without MNEMO_ERASURE_KEY: 501 memory-operation-unsupported, nothing recorded, and the client does not retry it', async () => {
    const app = createApp({
      logger: createLogger('error', {}, () => {}),
      db: api.db.app.db,
      verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
      readiness: { accepting: () => true, checks: {} },
    });
    const { tenantId, admin: token } = await api.newTenant('no-key');
    const sent: string[] = [];
    const client = createClient({
      baseUrl: 'http://mnemo.test',
      token,
      fetch: async (input, init) => {
        sent.push(String(input));
        return app.request(String(input), init);
      },
    });
    const refused = await client.memory.erasures.request({ kind: 'participant', id: 'end-5' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(MemoryOperationUnsupportedError);
    expect(refused).toMatchObject({ status: 501, code: 'memory-operation-unsupported', message: expect.stringContaining('MNEMO_ERASURE_KEY') });
    expect(sent).toHaveLength(1);
    expect(await api.db.admin`select id from erasures where tenant_id = ${tenantId}`).toEqual([]);
  });

  it('honours Idempotency-Key: a retry replays the first answer, one erasure; the key record holds no plain hash of the id', async () => {
    const { tenantId, admin: token } = await api.newTenant('idempotent');
    const body = { subject: { kind: 'participant', id: 'end-idem-42' } };
    const ask = (what: unknown) => api.request('POST', '/v1/memory/erasures', { token, body: what, headers: { 'Idempotency-Key': 'erase-retry-1' } });
    const first = await ask(body);
    const again = await ask(body);
    expect(first.status).toBe(202);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await ask({ subject: { kind: 'participant', id: 'end-idem-43' } })).body.error.code).toBe('idempotency-key-reused');
    expect((await api.request('GET', '/v1/memory/erasures', { token })).body.data.map((e: { id: string }) => e.id)).toEqual([first.body.id]);

    // A plain SHA-256 of the request would let anyone reading the table test guesses of the id.
    const [record] = await api.db.admin`select request_hash, response_body from idempotency_keys where tenant_id = ${tenantId}`;
    const principal = admin(tenantId);
    const plain = (what: unknown) =>
      createHash('sha256').update(`POST\n/v1/memory/erasures\n${canonicalJson(principal)}\n${canonicalJson(what)}`).digest('hex');
    expect(record!.request_hash).not.toBe(plain(body));
    expect(record!.request_hash).not.toBe(plain({ kind: 'participant', id: 'end-idem-42' }));
    expect(record!.request_hash).toBe(plain({ kind: 'participant', hash: targetHash(TEST_ERASURE_KEY, 'participant', 'end-idem-42') }));
    expect(record!.response_body).not.toContain('end-idem-42');
    const resumed = await api.request('POST', `/v1/memory/erasures/${first.body.id}/resume`, { token, headers: { 'Idempotency-Key': 'resume-1' } });
    expect(resumed.status).toBe(400); // not failed: a domain error, stored and replayed like an answer
    const resumedAgain = await api.request('POST', `/v1/memory/erasures/${first.body.id}/resume`, { token, headers: { 'Idempotency-Key': 'resume-1' } });
    expect(resumedAgain.headers.get('idempotent-replayed')).toBe('true');
  });

  it("erases a person's facts (scope and subjects), revisions and vectors; ids, versions and times stay; the record keeps only a hash", async () => {
    const { tenantId, admin: token } = await api.newTenant('erase');
    const byScope = (await write(token, { scope: { projectId: 'p1', participantId: 'end-9' } })).body;
    const bySubject = (await write(token, { subjects: [{ kind: 'participant', id: 'end-9' }, { kind: 'external', id: 'crm-1' }] })).body;
    await api.request('POST', `/v1/memory/facts/${bySubject.id}/supersede`, { token, body: { content: { text: 'end-9, again' } } });
    // Named in its first revision only: a supersede dropped the person from the current one.
    const formerly = (await write(token, { subjects: [{ kind: 'participant', id: 'end-9' }] })).body;
    await api.request('POST', `/v1/memory/facts/${formerly.id}/supersede`, { token, body: { content: { text: 'no one in particular' }, subjects: [] } });
    const other = (await write(token, { scope: { projectId: 'p1', participantId: 'end-8' }, content: { text: 'about end-8' } })).body;
    await withTenant(api.db.app.db, tenantId, (tx) =>
      storeEmbeddings(tx, tenantId, 'test-model-3', 3, [
        { id: byScope.id, version: 1, embedding: [1, 0, 0] },
        { id: other.id, version: 1, embedding: [0, 1, 0] },
      ]),
    );

    const started = await api.request('POST', '/v1/memory/erasures', { token, body: { subject: { kind: 'participant', id: 'end-9' } } });
    expect(started.status).toBe(202);
    expect(started.body).toEqual({ id: expect.any(String), status: 'pending' });
    const done = await waitFor(token, started.body.id);
    expect(done).toMatchObject({
      status: 'completed',
      target: { kind: 'subject', subjectKind: 'participant' },
      factsErased: 3,
      revisionsErased: 5,
      embeddingsDeleted: 1,
      error: null,
    });

    const after = await rows(tenantId);
    const fact = (id: string) => after.facts.find((f) => f.id === id)!;
    for (const id of [byScope.id, bySubject.id, formerly.id]) {
      expect(fact(id)).toMatchObject({ content: null, subjects: [], invalidation_reason: 'erased' });
      for (const revision of after.revisions.filter((r) => r.fact_id === id)) expect(revision).toMatchObject({ content: null, subjects: [] });
      expect((await api.request('GET', `/v1/memory/facts/${id}`, { token })).status).toBe(404);
    }
    // The person's id left the scope too; the fact stays in its project.
    expect(fact(byScope.id).participant_id).toBeNull();
    expect(after.revisions.filter((r) => r.fact_id === byScope.id).map((r) => r.participant_id)).toEqual([null]);
    expect(fact(bySubject.id).version).toBe(2);
    expect(after.revisions.filter((r) => r.fact_id === bySubject.id)).toHaveLength(2);
    expect(fact(other.id)).toMatchObject({ content: { text: 'about end-8' }, invalidation_reason: null });
    expect(after.vectors.map((v) => v.fact_id)).toEqual([other.id]);

    // Nothing kept about the request names the person: the erasure row has a keyed hash, the outbox row was scrubbed.
    const records = await api.db.admin`select row_to_json(e)::text as row from erasures e where tenant_id = ${tenantId}`;
    const queued = await api.db.admin`select payload::text as payload from outbox where tenant_id = ${tenantId} and queue = 'erasure'`;
    expect(records).toHaveLength(1);
    expect(records[0]!.row).not.toContain('end-9');
    expect(queued.map((q) => q.payload).join()).not.toContain('end-9');
    const list = await api.request('GET', '/v1/memory/erasures', { token });
    expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([started.body.id]);
  });

  it("drops the stored Idempotency-Key answers that show the person's facts: a retry cannot replay erased content", async () => {
    const { tenantId, admin: token } = await api.newTenant('erase-keys');
    const keyed = (path: string, key: string, body: unknown) => api.request('POST', path, { token, body, headers: { 'Idempotency-Key': key } });
    const about = { type: 'acme.note', content: { text: 'end-31 lives at 4 Elm St' }, subjects: [{ kind: 'participant', id: 'end-31' }] };
    const written = await keyed('/v1/memory/facts', 'w-1', about);
    const batch = await keyed('/v1/memory/facts:batch', 'b-1', {
      facts: [
        { type: 'acme.note', content: { text: 'end-31 prefers tea' }, scope: { projectId: 'p1', participantId: 'end-31' } },
        { type: 'acme.note', content: { text: 'the office opens at 9' } },
      ],
    });
    const plain = (await write(token, { content: { text: 'end-31 was here' }, subjects: [{ kind: 'participant', id: 'end-31' }] })).body;
    const superseded = await keyed(`/v1/memory/facts/${plain.id}/supersede`, 's-1', { content: { text: 'end-31 moved to 9 Oak Rd' } });
    const unrelated = await keyed('/v1/memory/facts', 'w-2', { type: 'acme.note', content: { text: 'about end-32' } });
    expect([written.status, batch.status, superseded.status, unrelated.status]).toEqual([201, 201, 200, 201]);
    const stored = async () =>
      (await api.db.admin<{ key: string; body: string }[]>`
        select key, response_body as body from idempotency_keys where tenant_id = ${tenantId} order by key`).map((r) => [r.key, r.body] as const);
    expect((await stored()).map(([key]) => key)).toEqual(['b-1', 's-1', 'w-1', 'w-2']);
    expect((await stored()).filter(([, body]) => body.includes('Elm St') || body.includes('Oak Rd'))).toHaveLength(2);

    const started = await api.request('POST', '/v1/memory/erasures', { token, body: { subject: { kind: 'participant', id: 'end-31' } } });
    expect(await waitFor(token, started.body.id)).toMatchObject({ status: 'completed', factsErased: 3 });

    // The three answers that showed the person's facts are gone (the batch's with them: it showed
    // one); the unrelated write's answer still replays.
    expect(await stored()).toEqual([['w-2', expect.stringContaining('about end-32')]]);
    const replayed = await keyed('/v1/memory/facts', 'w-2', { type: 'acme.note', content: { text: 'about end-32' } });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body.id).toBe(unrelated.body.id);
    // A retry of the erased write is a new request now: no replay of the erased fact.
    const retried = await keyed('/v1/memory/facts', 'w-1', about);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(retried.body.id).not.toBe(written.body.id);
    expect((await api.request('GET', `/v1/memory/facts/${written.body.id}`, { token })).status).toBe(404);
  });

  it('a conversation, an external subject, and a single fact', async () => {
    const { admin: token } = await api.newTenant('targets');
    const inThread = (await write(token, { scope: { projectId: 'p1', threadId: 'th-1' } })).body;
    const external = (await write(token, { subjects: [{ kind: 'external', id: 'crm-7' }] })).body;
    const single = (await write(token, {})).body;
    const keep = (await write(token, { scope: { projectId: 'p1', threadId: 'th-2' } })).body;
    for (const body of [{ conversationId: 'th-1' }, { subject: { kind: 'external', id: 'crm-7' } }, { factId: single.id }]) {
      const started = await api.request('POST', '/v1/memory/erasures', { token, body });
      expect(await waitFor(token, started.body.id)).toMatchObject({ status: 'completed', factsErased: 1 });
    }
    for (const id of [inThread.id, external.id, single.id]) expect((await api.request('GET', `/v1/memory/facts/${id}`, { token })).status).toBe(404);
    const [thread] = await api.db.admin`select thread_id, project_id from facts where id = ${inThread.id}`;
    expect(thread).toEqual({ thread_id: null, project_id: 'p1' });
    expect((await api.request('GET', `/v1/memory/facts/${keep.id}`, { token })).status).toBe(200);
  });

  it('while an erasure is pending, writes naming that person or conversation answer 409 erasure-in-progress', async () => {
    const { tenantId, admin: token } = await api.newTenant('inprogress');
    const existing = (await write(token, { subjects: [{ kind: 'participant', id: 'end-5' }] })).body;
    // Recorded, not handed to the worker: it stays pending for the whole test.
    await requestErasure({ db: api.db.app.db, principal: admin(tenantId) }, { kind: 'participant', id: 'end-5' }, TEST_ERASURE_KEY);
    await requestErasure({ db: api.db.app.db, principal: admin(tenantId) }, { kind: 'conversation', id: 'th-5' }, TEST_ERASURE_KEY);

    for (const body of [
      { scope: { projectId: 'p1', participantId: 'end-5' } },
      { subjects: [{ kind: 'participant', id: 'end-5' }] },
      { scope: { projectId: 'p1', threadId: 'th-5' } },
    ]) {
      const response = await write(token, body);
      expect(response.status, JSON.stringify(body)).toBe(409);
      expect(response.body.error.code).toBe('erasure-in-progress');
    }
    const supersede = await api.request('POST', `/v1/memory/facts/${existing.id}/supersede`, { token, body: { content: { text: 'x' } } });
    expect(supersede.status).toBe(409);
    expect(supersede.body.error.code).toBe('erasure-in-progress');
    // Someone else is not affected.
    expect((await write(token, { scope: { projectId: 'p1', participantId: 'end-6' } })).status).toBe(201);
    const { admin: otherTenant } = await api.newTenant('unaffected');
    expect((await write(otherTenant, { subjects: [{ kind: 'participant', id: 'end-5' }] })).status).toBe(201);
  });

  it('a legal hold on any match fails it with legal-hold and the fact ids; resumed once the hold is lifted', async () => {
    const { tenantId, admin: token } = await api.newTenant('hold');
    const held = (await write(token, { subjects: [{ kind: 'participant', id: 'end-9' }], retention: { legalHold: true } })).body;
    const free = (await write(token, { subjects: [{ kind: 'participant', id: 'end-9' }] })).body;
    const started = await api.request('POST', '/v1/memory/erasures', { token, body: { subject: { kind: 'participant', id: 'end-9' } } });
    const failed = await waitFor(token, started.body.id);
    expect(failed).toMatchObject({ status: 'failed', factsErased: 0, error: { code: 'legal-hold', factIds: [held.id] } });
    expect((await rows(tenantId)).facts.find((f) => f.id === free.id)!.content).not.toBeNull();
    // Resumed with the hold still on: it fails the same way.
    expect((await api.request('POST', `/v1/memory/erasures/${started.body.id}/resume`, { token })).status).toBe(202);
    expect(await waitFor(token, started.body.id)).toMatchObject({ status: 'failed', error: { code: 'legal-hold' } });

    // One fact under hold, named directly: refused at once.
    const direct = await api.request('POST', '/v1/memory/erasures', { token, body: { factId: held.id } });
    expect(direct.status).toBe(409);
    expect(direct.body.error.code).toBe('legal-hold');

    const lifted = await api.request('POST', `/v1/memory/facts/${held.id}/supersede`, { token, body: { content: held.content, retention: { legalHold: false } } });
    expect(lifted.status).toBe(200);
    expect((await api.request('POST', `/v1/memory/erasures/${started.body.id}/resume`, { token })).status).toBe(202);
    expect(await waitFor(token, started.body.id)).toMatchObject({ status: 'completed', factsErased: 2, error: null });
    const again = await api.request('POST', `/v1/memory/erasures/${started.body.id}/resume`, { token });
    expect(again.status).toBe(400);
  });

  it('a worker killed (SIGKILL) mid-erasure: the next worker finishes it, nothing left over, nothing counted twice', { ...needs('redis'), timeout: 180_000 }, async () => {
    const { tenantId, admin: token } = await api.newTenant('killed');
    const n = 4000;
    await api.db.admin.begin(async (sql) => {
      await sql`insert into tenants (id) values (${tenantId}) on conflict do nothing`;
      await seedFacts(sql, {
        tenantId,
        last: n,
        type: 'acme.note',
        text: sql`'end-kill ' || i`,
        assertedBy: 'test',
        columns: { project_id: 'p1', participant_id: 'end-kill' },
        revisions: true,
      });
    });
    const prefix = `mnemo-erase-${api.db.name}`;
    const env = {
      DATABASE_URL: api.db.appUrl,
      REDIS_URL: inject('redisUrl'),
      MNEMO_JWT_SECRET: TEST_SECRET,
      MNEMO_QUEUE_PREFIX: prefix,
      MNEMO_JOB_LOCK_MS: '1500',
      MNEMO_SHUTDOWN_TIMEOUT_MS: '3000',
    };
    const redis = createRedis(inject('redisUrl'), 'producer');
    const queues = createQueues(redis, queueDefinitions, prefix);
    const workers: ReturnType<typeof startProcess>[] = [];
    try {
      const { erasure, outbox } = await requestErasure(
        { db: api.db.app.db, principal: admin(tenantId) },
        { kind: 'participant', id: 'end-kill' },
        TEST_ERASURE_KEY,
      );
      const first = startProcess('workers/index.ts', [], env);
      workers.push(first);
      await first.waitFor('"worker started"', 30_000);
      await dispatchOutbox(queues, [outbox]);
      let erased = 0;
      for (let i = 0; i < 600 && erased === 0; i++) {
        erased = (await api.request('GET', `/v1/memory/erasures/${erasure.id}`, { token })).body.factsErased;
        if (erased === 0) await sleep(20);
      }
      await killProcess(first);
      const midway = (await api.request('GET', `/v1/memory/erasures/${erasure.id}`, { token })).body;
      expect(midway.status).toBe('running');
      expect(midway.factsErased).toBeGreaterThan(0);
      expect(midway.factsErased).toBeLessThan(n);

      const second = startProcess('workers/index.ts', [], env);
      workers.push(second);
      const done = await waitFor(token, erasure.id);
      expect(done).toMatchObject({ status: 'completed', factsErased: n, revisionsErased: n });
      const [left] = await api.db.admin<{ n: number }[]>`
        select count(*)::int as n from facts where tenant_id = ${tenantId} and (content is not null or invalidation_reason is distinct from 'erased')`;
      expect(left!.n).toBe(0);
      const [leftRevisions] = await api.db.admin<{ n: number }[]>`
        select count(*)::int as n from fact_revisions where tenant_id = ${tenantId} and content is not null`;
      expect(leftRevisions!.n).toBe(0);
    } finally {
      for (const worker of workers) await killProcess(worker);
      await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true })));
      await closeQueues(queues);
      await redis.quit();
    }
  });
});
