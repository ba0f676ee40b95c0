import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestReport } from '../../src/episodes/stored-reports.ts';
import { nightlySchedulerId } from '../../src/jobs/report-jobs.ts';
import { REPORT_LIST_DEFAULT } from '../../src/episodes/schemas.ts';
import { reportQueue } from '../../src/jobs/queues.ts';
import { reconcileHandler } from '../../workers/reconcile.ts';
import { reportHandler } from '../../workers/report.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { startTestApi, type TestApi, tokenFor } from '../helpers/api.ts';
import { checkStreamedReport } from '../helpers/episodes-report.ts';
import { sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';
import { seedEpisodes } from '../../support/seed.ts';

/** Episodic memory through the API (DESIGN §6): the KiwiFS fields, the report, background reports. */
describe('episodic memory', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({ worker: true });
  });
  afterAll(() => api.close());

  const write = (token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    api.request('POST', '/v1/memory/facts', { token, body: { type: 'kiwi.page', content: { text: 'x' }, ...body }, headers });
  const episode = (token: string, path: string, episodeId?: string, extra: Record<string, unknown> = {}) =>
    write(token, { path, memoryKind: 'episodic', ...(episodeId ? { episodeId } : {}), ...extra });
  const report = (token: string, query = '') => api.request('GET', `/v1/memory/report${query}`, { token });
  const paths = (list: { path: string }[]) => list.map((f) => f.path);

  describe('KiwiFS fields on write and supersede', () => {
    let admin: string;
    beforeAll(async () => {
      ({ admin } = await api.newTenant('fields'));
    });

    it('takes a single mergedFrom entry as a list of one, dated when undated', async () => {
      const response = await write(admin, { mergedFrom: { type: 'episode', id: 'ep-1' } });
      expect(response.status).toBe(201);
      expect(response.body.mergedFrom).toHaveLength(1);
      expect(response.body.mergedFrom[0]).toMatchObject({ type: 'episode', id: 'ep-1' });
      expect(Date.parse(response.body.mergedFrom[0].date)).not.toBeNaN();
    });

    it.each([
      ['no id and no path', { type: 'episode' }, 'mergedFrom.0.id'],
      ['a blank type', { type: '  ', id: 'ep-1' }, 'mergedFrom.0.type'],
      ['no type', { id: 'ep-1' }, 'mergedFrom.0.type'],
      ['blank id and path', { type: 'episode', id: ' ', path: '' }, 'mergedFrom.0.id'],
    ])('refuses an entry with %s (400 naming the field)', async (_, entry, field) => {
      const response = await write(admin, { mergedFrom: [entry] });
      expect(response.status).toBe(400);
      expect(response.body.error.code).toBe('bad-input');
      expect(response.body.error.details.map((d: { path: string }) => d.path)).toContain(field);
    });

    it('keeps one entry per type+id or type+path, on write and when a supersede adds it again', async () => {
      const first = await write(admin, {
        mergedFrom: [
          { type: 'episode', id: 'ep-1', note: 'first' },
          { type: 'Episode', id: ' ep-1 ', note: 'same entry' },
          { type: 'episode', path: 'episodes/a.md' },
          { type: 'episode', path: '/episodes/a.md/' },
        ],
      });
      expect(first.status).toBe(201);
      expect(first.body.mergedFrom.map((e: { note?: string; path?: string }) => e.note ?? e.path)).toEqual(['first', 'episodes/a.md']);

      const again = await api.request('POST', `/v1/memory/facts/${first.body.id}/supersede`, {
        token: admin,
        body: { content: { text: 'y' }, mergedFrom: [{ type: 'EPISODE', id: 'ep-1' }, { type: 'run', id: 'run-9', date: '2026-01-01T00:00:00Z' }] },
      });
      expect(again.status).toBe(200);
      expect(again.body.version).toBe(2);
      expect(again.body.mergedFrom).toHaveLength(3);
      expect(again.body.mergedFrom[2]).toEqual({ type: 'run', id: 'run-9', date: '2026-01-01T00:00:00Z' });
    });

    it.each([
      ['  run  :  run-249 ', { type: 'run', id: 'run-249' }],
      ['run:prefix:suffix', { type: 'run', id: 'prefix:suffix' }],
      ['run:', undefined],
      [':run-1', undefined],
      ['runid', undefined],
    ])('X-Provenance %j → derivedFrom %j', async (header, expected) => {
      const response = await write(admin, {}, { 'X-Provenance': header, 'X-Actor': 'agent:exec_abc' });
      expect(response.status).toBe(201);
      if (expected) expect(response.body.derivedFrom).toEqual([{ ...expected, actor: 'agent:exec_abc', date: expect.any(String) }]);
      else expect(response.body.derivedFrom).toEqual([]);
    });

    it('lists the fact holding an exact path', async () => {
      await write(admin, { path: 'notes/exact.md' });
      await write(admin, { path: 'notes/exact.md.bak' });
      const response = await api.request('GET', '/v1/memory/facts?path=notes/exact.md', { token: admin });
      expect(response.status).toBe(200);
      expect(response.body.data.map((f: { path: string }) => f.path)).toEqual(['notes/exact.md']);
    });
  });

  describe('GET /v1/memory/report and /api/kiwi/memory/report', () => {
    it('KiwiFS TestMemoryReportEndpoint: unmerged until a semantic fact merges the episode', async () => {
      const { admin } = await api.newTenant('kiwi');
      await episode(admin, 'episodes/e.md', 'ep-api-1');
      const before = await api.request('GET', '/api/kiwi/memory/report', { token: admin });
      expect(before.status).toBe(200);
      expect(before.body).toMatchObject({ episodic_count: 1, merged_from_refs: 0, unmerged_count: 1 });
      expect(before.body.unmerged).toEqual([expect.objectContaining({ path: 'episodes/e.md', episode_id: 'ep-api-1', memory_kind: 'episodic' })]);

      await write(admin, { path: 'concepts/c.md', memoryKind: 'semantic', mergedFrom: [{ type: 'episode', id: 'ep-api-1' }] });
      const after = await api.request('GET', '/api/kiwi/memory/report', { token: admin });
      expect(after.body).toMatchObject({ episodic_count: 1, merged_from_refs: 1, unmerged_count: 0, unmerged: [] });
    });

    it('classifies by memoryKind, then by the prefix; covers by id (any covering type) or by path', async () => {
      const { admin } = await api.newTenant('rules');
      await episode(admin, 'episodes/a.md', 'run-1'); // covered: run id
      await write(admin, { path: 'episodes/b.md' }); // episodic by prefix; covered by path
      await write(admin, { path: 'episodes/c.md' }); // episodic by prefix; identity is its fact id; unmerged
      await write(admin, { path: 'episodes/d.md', memoryKind: 'semantic' }); // never episodic
      await write(admin, { path: 'raw/e.md', memoryKind: 'working' }); // not under episodes/
      await episode(admin, 'anywhere/f.md', 'ep-f'); // episodic anywhere; covered only by a note's id → unmerged
      await write(admin, {
        path: 'concepts/x.md',
        memoryKind: 'consolidation',
        mergedFrom: [
          { type: 'RUN', id: ' run-1 ' },
          { type: 'doc', path: '/episodes/b.md/' },
          { type: 'note', id: 'ep-f' },
        ],
      });
      const response = await report(admin);
      expect(response.status).toBe(200);
      expect(response.body.episodic_count).toBe(4);
      expect(response.body.merged_from_refs).toBe(3);
      expect(paths(response.body.episodic_files)).toEqual(['anywhere/f.md', 'episodes/a.md', 'episodes/b.md', 'episodes/c.md']);
      expect(paths(response.body.unmerged)).toEqual(['anywhere/f.md', 'episodes/c.md']);
      const c = response.body.unmerged[1];
      expect(c.episode_id).toBe(c.fact_id);

      const raw = await report(admin, '?episodesPrefix=raw');
      expect(paths(raw.body.episodic_files)).toEqual(['anywhere/f.md', 'episodes/a.md', 'raw/e.md']);
      const kiwi = await api.request('GET', '/api/kiwi/memory/report?episodes_prefix=raw/', { token: admin });
      expect(kiwi.body).toEqual(raw.body);
    });

    it('limit and offset cut the two lists, never the counts', async () => {
      const { admin } = await api.newTenant('pages');
      for (const name of ['a', 'b', 'c', 'd', 'e']) await episode(admin, `episodes/${name}.md`, `ep-${name}`);
      await write(admin, { memoryKind: 'semantic', mergedFrom: [{ type: 'episode', id: 'ep-a' }, { type: 'episode', id: 'ep-c' }] });
      const page = await report(admin, '?limit=2&offset=1');
      expect(page.body).toMatchObject({ episodic_count: 5, unmerged_count: 3 });
      expect(paths(page.body.episodic_files)).toEqual(['episodes/b.md', 'episodes/c.md']);
      expect(paths(page.body.unmerged)).toEqual(['episodes/d.md', 'episodes/e.md']);
      const none = await report(admin, '?limit=0');
      expect(none.body).toMatchObject({ episodic_count: 5, unmerged_count: 3, episodic_files: [], unmerged: [] });
    });

    it(`without limit, the lists hold the first ${REPORT_LIST_DEFAULT} entries (the default), the counts all`, async () => {
      const { tenantId, admin } = await api.newTenant('default-limit');
      const episodes = REPORT_LIST_DEFAULT + 200;
      // Straight into the table: more episodes than the default page, unmerged.
      await api.db.admin.begin(async (sql) => {
        await sql`insert into tenants (id) values (${tenantId}) on conflict do nothing`;
        await seedEpisodes(sql, { tenantId, last: episodes, pathDigits: 5, assertedBy: 'test' });
      });
      for (const path of ['/v1/memory/report', '/api/kiwi/memory/report']) {
        const whole = await api.request('GET', path, { token: admin });
        expect(whole.status).toBe(200);
        expect(whole.body).toMatchObject({ episodic_count: episodes, unmerged_count: episodes });
        expect(whole.body.episodic_files, path).toHaveLength(REPORT_LIST_DEFAULT);
        expect(whole.body.unmerged, path).toHaveLength(REPORT_LIST_DEFAULT);
        expect(whole.body.unmerged.at(-1).path).toBe(`episodes/0${REPORT_LIST_DEFAULT}.md`);
      }
      // The next page, and a limit given explicitly, still apply.
      const rest = await report(admin, `?offset=${REPORT_LIST_DEFAULT}`);
      expect(paths(rest.body.unmerged)).toHaveLength(200);
      expect((await report(admin, `?limit=${episodes}`)).body.unmerged).toHaveLength(episodes);
    });

    it.each(['?limit=-1', '?offset=-3', '?limit=1.5', '?offset=x', '?limit=10001', '?episodes_prefix=raw/'])('refuses %s with 400', async (query) => {
      const { admin } = await api.newTenant('bad');
      const response = await report(admin, query);
      expect(response.status).toBe(400);
      expect(response.body.error.code).toBe('bad-input');
    });

    it('needs a token on both paths', async () => {
      expect((await api.request('GET', '/v1/memory/report')).status).toBe(401);
      expect((await api.request('GET', '/api/kiwi/memory/report')).status).toBe(401);
    });

    it('never counts or lists what the caller cannot read; deleted facts neither count nor cover', async () => {
      const { tenantId, admin } = await api.newTenant('vis');
      await episode(admin, 'episodes/p1.md', 'ep-p1', { scope: { projectId: 'p1' } });
      await episode(admin, 'episodes/p2.md', 'ep-p2', { scope: { projectId: 'p2' } });
      // A p2 fact merging p1's episode: it covers it only for someone who can read p2.
      await write(admin, { scope: { projectId: 'p2' }, memoryKind: 'semantic', mergedFrom: [{ type: 'episode', id: 'ep-p1' }] });
      const gone = await episode(admin, 'episodes/gone.md', 'ep-gone');
      await api.request('DELETE', `/v1/memory/facts/${gone.body.id}`, { token: admin });
      const merger = await write(admin, { memoryKind: 'semantic', mergedFrom: [{ type: 'episode', id: 'ep-p2' }] });
      await api.request('DELETE', `/v1/memory/facts/${merger.body.id}`, { token: admin });

      const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { read: ['p1'] } });
      const mine = await report(member);
      expect(mine.body).toMatchObject({ episodic_count: 1, merged_from_refs: 0, unmerged_count: 1 });
      expect(paths(mine.body.unmerged)).toEqual(['episodes/p1.md']);

      const all = await report(admin);
      expect(all.body).toMatchObject({ episodic_count: 2, merged_from_refs: 1, unmerged_count: 1 });
      expect(paths(all.body.unmerged)).toEqual(['episodes/p2.md']);

      // The scope filter: only p1's facts and tenant-wide ones take part, so the p2 merger does not.
      const p1 = await report(admin, '?projectId=p1');
      expect(p1.body).toMatchObject({ episodic_count: 1, unmerged_count: 1 });

      const { admin: stranger } = await api.newTenant('other');
      expect((await report(stranger)).body).toMatchObject({ episodic_count: 0, merged_from_refs: 0, unmerged_count: 0 });
    });
  });

  describe('background reports', () => {
    const waitFor = async (token: string, id: string) => {
      for (let i = 0; i < 200; i++) {
        const response = await api.request('GET', `/v1/memory/reports/${id}`, { token });
        if (response.body.status === 'completed' || response.body.status === 'failed') return response.body;
        await sleep(50);
      }
      throw new Error(`report ${id} did not finish`);
    };

    it('honours Idempotency-Key: a retried request replays the first answer and queues one report', async () => {
      const { admin } = await api.newTenant('jobs-idempotent');
      const ask = (body: Record<string, unknown>) =>
        api.request('POST', '/v1/memory/reports', { token: admin, body, headers: { 'Idempotency-Key': 'report-retry-1' } });
      const first = await ask({ episodesPrefix: 'episodes/' });
      const again = await ask({ episodesPrefix: 'episodes/' });
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.body).toEqual(first.body);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await ask({ episodesPrefix: 'raw/' })).body.error.code).toBe('idempotency-key-reused');
      await waitFor(admin, first.body.id);
      expect((await api.request('GET', '/v1/memory/reports', { token: admin })).body.data.map((r: { id: string }) => r.id)).toEqual([first.body.id]);
    });

    it('runs the same report as the route, keeps it, and lists coverage over time', async () => {
      const { admin } = await api.newTenant('jobs');
      await episode(admin, 'episodes/a.md', 'ep-a');
      await episode(admin, 'episodes/b.md', 'ep-b');

      const queued = await api.request('POST', '/v1/memory/reports', { token: admin, body: {} });
      expect(queued.status).toBe(202);
      expect(queued.body).toEqual({ id: expect.any(String), status: 'pending' });
      const first = await waitFor(admin, queued.body.id);
      expect(first.status).toBe('completed');
      expect(first.progress).toEqual({ done: 2, total: 2 });
      expect(first.result).toEqual((await report(admin)).body);

      await write(admin, { memoryKind: 'semantic', mergedFrom: { type: 'episode', id: 'ep-a' } });
      const second = await waitFor(admin, (await api.request('POST', '/v1/memory/reports', { token: admin })).body.id);
      expect(second.result.unmerged_count).toBe(1);

      const history = await api.request('GET', '/v1/memory/reports', { token: admin });
      expect(history.status).toBe(200);
      expect(history.body.data.map((r: { id: string; episodicCount: number; unmergedCount: number }) => [r.id, r.episodicCount, r.unmergedCount])).toEqual([
        [second.id, 2, 1],
        [first.id, 2, 2],
      ]);
      expect(history.body.data[0]).toMatchObject({ status: 'completed', scheduled: false, requestedBy: 'admin-1' });
      expect(history.body.data[0]).not.toHaveProperty('result');
      const page = await api.request('GET', '/v1/memory/reports?limit=1', { token: admin });
      expect(page.body.hasMore).toBe(true);
      const rest = await api.request('GET', `/v1/memory/reports?limit=1&cursor=${page.body.nextCursor}`, { token: admin });
      expect(rest.body.data.map((r: { id: string }) => r.id)).toEqual([first.id]);
    });

    it('a report is read by who asked for it (and admins); it shows what its requester could see', async () => {
      const { tenantId, admin } = await api.newTenant('jobvis');
      await episode(admin, 'episodes/p2.md', 'ep-p2', { scope: { projectId: 'p2' } });
      const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { read: ['p1'] } });
      const other = await tokenFor({ tid: tenantId, sub: 'm-2', role: 'member', projects: { read: ['p1', 'p2'] } });

      const mine = await api.request('POST', '/v1/memory/reports', { token: member, body: { episodesPrefix: 'episodes/' } });
      const done = await waitFor(member, mine.body.id);
      expect(done.result.episodic_count).toBe(0);
      expect((await api.request('GET', `/v1/memory/reports/${mine.body.id}`, { token: other })).status).toBe(404);
      expect((await api.request('GET', `/v1/memory/reports/${mine.body.id}`, { token: admin })).status).toBe(200);
      expect((await api.request('GET', '/v1/memory/reports', { token: other })).body.data).toEqual([]);
      const { admin: stranger } = await api.newTenant('stranger');
      expect((await api.request('GET', `/v1/memory/reports/${mine.body.id}`, { token: stranger })).status).toBe(404);
    });

    it('a report whose last attempt fails says so, without the internal cause', async () => {
      const { tenantId, admin } = await api.newTenant('jobfail');
      const owner = api.db.admin;
      // Recorded without handing it to the queue, so only this test's call runs it.
      const principal = { tenantId, sub: 'admin-1', role: 'admin' as const, projects: { read: [], write: [] }, orgs: { read: [], write: [] } };
      const { report: queued } = await requestReport({ db: api.db.app.db, principal }, {});
      await owner`alter table facts rename column episode_keys to episode_keys_away`;
      try {
        const lastAttempt = { id: 'report-fail-1', name: reportQueue.name, timestamp: Date.now(), attemptsMade: 2, opts: { attempts: 3 } };
        await expect(
          reportHandler({ db: api.db.app.db })({ tenantId, reportId: queued.id }, { job: lastAttempt as never, logger: createLogger('error', {}, () => {}) }),
        ).rejects.toThrow(/episode_keys/);
      } finally {
        await owner`alter table facts rename column episode_keys_away to episode_keys`;
      }
      const failed = (await api.request('GET', `/v1/memory/reports/${queued.id}`, { token: admin })).body;
      expect(failed).toMatchObject({ status: 'failed', result: null });
      expect(failed.error).toMatch(/^The report could not be computed \(internal\)/);
      expect(failed.error).not.toMatch(/episode_keys|column/);
    });

    it.each([
      [{ limit: -1 }, 'limit'],
      [{ scope: { tenantId: 'x' } }, 'scope'],
      [{ colour: 'red' }, 'colour'],
    ])('refuses a request %j', async (body, field) => {
      const { admin } = await api.newTenant('badjob');
      const response = await api.request('POST', '/v1/memory/reports', { token: admin, body });
      expect(response.status).toBe(400);
      expect(JSON.stringify(response.body.error.details)).toContain(field);
    });

    it('a nightly schedule: admins only, kept in Postgres, fired by a BullMQ job scheduler the reconciler restores', needs('redis'), async () => {
      const { tenantId, admin } = await api.newTenant('nightly');
      const queue = api.bullQueues!.get(reportQueue.name)!;
      const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member' });
      expect((await api.request('PUT', '/v1/memory/reports/schedule', { token: member, body: {} })).status).toBe(403);
      expect((await api.request('GET', '/v1/memory/reports/schedule', { token: admin })).status).toBe(404);

      const put = await api.request('PUT', '/v1/memory/reports/schedule', { token: admin, body: { hourUtc: 4, episodesPrefix: 'raw/' } });
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({ hourUtc: 4, cron: '0 4 * * *', params: { episodesPrefix: 'raw/' }, scheduledBy: 'admin-1' });
      const scheduler = await queue.getJobScheduler(nightlySchedulerId(tenantId));
      expect(scheduler?.pattern).toBe('0 4 * * *');

      // Redis loses it; the reconciler puts it back from Postgres.
      await queue.removeJobScheduler(nightlySchedulerId(tenantId));
      const reconcile = reconcileHandler({ db: api.db.app.db, queues: api.queues! });
      const result = (await reconcile({}, { job: {} as never, logger: createLogger('error') })) as { schedulesRestored: number };
      expect(result.schedulesRestored).toBe(1);
      expect((await queue.getJobScheduler(nightlySchedulerId(tenantId)))?.pattern).toBe('0 4 * * *');

      // Two runs, as the scheduler fires them through the worker: two reports.
      await episode(admin, 'raw/r.md', 'r-1', { memoryKind: undefined });
      for (const run of [1, 2]) {
        await queue.add(reportQueue.name, { payload: { tenantId, nightly: true } }, { jobId: `nightly-run-${run}`, timestamp: 1_800_000_000_000 + run });
      }
      let history: { scheduled: boolean; status: string; unmergedCount: number }[] = [];
      for (let i = 0; i < 100 && !(history.length === 2 && history.every((r) => r.status === 'completed')); i++) {
        history = (await api.request('GET', '/v1/memory/reports', { token: admin })).body.data;
        await sleep(50);
      }
      expect(history.map((r) => [r.scheduled, r.status, r.unmergedCount])).toEqual([
        [true, 'completed', 1],
        [true, 'completed', 1],
      ]);
      // The first run delivered again (a retry, a second worker): still the same report.
      const handler = reportHandler({ db: api.db.app.db });
      const redelivered = { id: 'nightly-run-1', name: reportQueue.name, timestamp: 1_800_000_000_001, attemptsMade: 0, opts: { attempts: 3 } };
      expect(await handler({ tenantId, nightly: true }, { job: redelivered as never, logger: createLogger('error') })).toBe('skipped');
      expect((await api.request('GET', '/v1/memory/reports', { token: admin })).body.data).toHaveLength(2);
      // Scheduled reports are the admins' (the member sees none of them).
      expect((await api.request('GET', '/v1/memory/reports', { token: member })).body.data).toEqual([]);

      expect((await api.request('DELETE', '/v1/memory/reports/schedule', { token: admin })).status).toBe(204);
      expect(await queue.getJobScheduler(nightlySchedulerId(tenantId))).toBeUndefined();
      expect((await api.request('DELETE', '/v1/memory/reports/schedule', { token: admin })).status).toBe(404);
    });
  });

  it('a report over 10,000 episodes: lists cut to the page, counts complete (100,000: test/slow/)', async () => {
    await checkStreamedReport(api.db, 10_000);
  });
});
