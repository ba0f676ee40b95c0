/**
 * What `mnemo migrate` makes of a Citus coordinator (src/db/distribute.ts), and the two walls
 * between tenants there: every tenant statement is routed to its tenant's shard, and the shard's
 * row-level-security policy sees the tenant the coordinator's transaction acts for.
 */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { REFERENCE_TABLES } from '../../src/db/distribute.ts';
import { type TestApi, startTestApi, tokenFor } from '../helpers/api.ts';
import { appLogin } from '../helpers/database.ts';
import { tenantTablesIn } from '../helpers/tenant-tables.ts';

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
});

afterAll(async () => {
  await api?.close();
});

const write = (token: string, text: string) =>
  api.request('POST', '/v1/memory/facts', { token, body: { type: 'citus.note', content: { text } } });

describe('mnemo migrate on a Citus coordinator', () => {
  it('distributes every tenant table by tenant_id, colocated with facts, and makes the global tables reference tables', async () => {
    const rows = await api.db.admin<{ name: string; method: string; column: string | null; colocation: number }[]>`
      select logicalrelid::regclass::text as name, partmethod as method,
             column_to_column_name(logicalrelid, partkey) as column, colocationid as colocation
      from pg_dist_partition order by 1`;
    const byName = new Map(rows.map((row) => [row.name, row]));
    const tables = await tenantTablesIn(api.db.admin);
    expect(tables.length).toBeGreaterThanOrEqual(10);
    const facts = byName.get('facts');
    expect(facts?.method).toBe('h');
    for (const table of tables) {
      expect(byName.get(table), table).toMatchObject({ method: 'h', column: 'tenant_id', colocation: facts!.colocation });
    }
    for (const table of REFERENCE_TABLES) expect(byName.get(table)?.method, table).toBe('n');
  });

  it('places the shards on both workers', async () => {
    const nodes = await api.db.admin<{ port: number; shards: number }[]>`
      select nodeport as port, count(*)::int as shards from citus_shards where table_name = 'facts'::regclass group by 1 order by 1`;
    expect(nodes).toHaveLength(2);
    for (const node of nodes) expect(node.shards).toBeGreaterThan(0);
  });

  it('is idempotent: migrating again changes nothing', async () => {
    const url = new URL(api.db.adminUrl);
    const login = appLogin();
    const appUrl = new URL(api.db.adminUrl);
    appUrl.username = login.user;
    appUrl.password = login.password;
    const messages: string[] = [];
    const again = await migrate({ adminUrl: url.toString(), appUrl: appUrl.toString(), distribution: 'citus', log: (m) => messages.push(m) });
    expect(again.applied).toBe(0);
    expect(again.distribution?.changed).toEqual([]);
    expect(messages.join('\n')).toMatch(/citus: up to date \(\d+ tables distributed by tenant_id, 2 reference tables\)/);
  });
});

describe('tenants on shards', () => {
  it("refuses the app role a statement that would run on every shard (the suite's router-only check can fail)", async () => {
    await expect(api.db.app.sql`select count(*) from facts`).rejects.toThrow(/multi-task|more than one|shard/i);
  });

  it('a shard shows nothing to a transaction with no tenant, even from a worker node as the app role', async () => {
    const { tenantId, admin } = await api.newTenant('citus-rls');
    const written = await write(admin, 'only on its shard');
    expect(written.status, `${JSON.stringify(written.body)} ${api.logs.slice(-3).join('\n')}`).toBe(201);
    const [placement] = await api.db.admin<{ port: number; shard: string }[]>`
      select nodeport as port, shard_name as shard from citus_shards
      where shardid = get_shard_id_for_distribution_column('facts', ${tenantId}::text)`;
    expect(placement).toBeDefined();
    // Connected straight to the worker holding the shard, as the app role: without app.tenant_id
    // the policy fails closed; with another tenant's id the row stays hidden; with its own, seen.
    const worker = postgres(`postgres://${appLogin().user}:${appLogin().password}@127.0.0.1:${placement!.port}/${api.db.name}`, {
      max: 1,
      onnotice: () => {},
    });
    try {
      const count = async (tenant: string | null) => {
        const [row] = await worker.begin(async (tx) => {
          if (tenant) await tx`select set_config('app.tenant_id', ${tenant}, true)`;
          return tx.unsafe(`select count(*)::int as n from ${placement!.shard} where tenant_id = $1`, [tenantId]);
        });
        return (row as unknown as { n: number }).n;
      };
      expect(await count(null)).toBe(0);
      expect(await count('someone-else')).toBe(0);
      expect(await count(tenantId)).toBe(1);
    } finally {
      await worker.end({ timeout: 5 });
    }
  });

  it('a token of one tenant never sees another tenant’s rows, on either worker', async () => {
    // One id holds a quote: on Citus the tenant travels as a literal in SET LOCAL (src/db/client.ts).
    const tenants = await Promise.all(Array.from({ length: 12 }, (_, i) => api.newTenant(i === 0 ? "citus-o'brien" : `citus-iso-${i}`)));
    for (const [i, tenant] of tenants.entries()) {
      for (let n = 0; n < 3; n++) expect((await write(tenant.admin, `tenant ${i} note ${n} about shards`)).status).toBe(201);
    }
    // The tenants landed on both workers, so isolation is checked across nodes and within one.
    const ports = await api.db.admin<{ port: number }[]>`
      select distinct nodeport as port from citus_shards
      where shardid in (select get_shard_id_for_distribution_column('facts', t) from unnest(${tenants.map((t) => t.tenantId)}::text[]) t)`;
    expect(ports.length).toBe(2);
    for (const [i, tenant] of tenants.entries()) {
      const list = await api.request('GET', '/v1/memory/facts?limit=100', { token: tenant.admin });
      expect(list.status).toBe(200);
      expect(list.body.data).toHaveLength(3);
      for (const item of list.body.data) {
        expect(item.scope.tenantId).toBe(tenant.tenantId);
        expect(item.content.text).toMatch(new RegExp(`^tenant ${i} `));
      }
      const search = await api.request('POST', '/v1/memory/retrieve', { token: tenant.admin, body: { query: 'note about shards', mode: 'keyword' } });
      expect(search.status).toBe(200);
      expect(search.body.results.length).toBe(3);
      for (const result of search.body.results) expect(result.fact.scope.tenantId).toBe(tenant.tenantId);
      // Another tenant's fact id answers 404, wherever its shard is.
      const other = tenants[(i + 1) % tenants.length]!;
      const theirs = (await api.request('GET', '/v1/memory/facts?limit=1', { token: other.admin })).body.data[0].id;
      expect((await api.request('GET', `/v1/memory/facts/${theirs}`, { token: tenant.admin })).status).toBe(404);
    }
    // And a token for a tenant that wrote nothing sees nothing at all.
    const stranger = await tokenFor({ tid: 'citus-nobody', role: 'admin' });
    expect((await api.request('GET', '/v1/memory/facts', { token: stranger })).body.data).toEqual([]);
  });
});
