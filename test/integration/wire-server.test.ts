/**
 * The wire server in front of PGlite (src/embedded/wire-server.ts): several connections, each
 * answered with its own results and run as its own login role, as a PostgreSQL server does.
 * Real PGlite, real postgres.js clients over TCP.
 */
import type { PGlite } from '@electric-sql/pglite';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPGlite } from '../../src/embedded/pglite.ts';
import { startWireServer, type WireServer } from '../../src/embedded/wire-server.ts';
import { sleep } from '../../support/wait.ts';

let pglite: PGlite;
let server: WireServer;
const clients: Sql[] = [];

function client(user: string, max = 4): Sql {
  const sql = postgres({ host: '127.0.0.1', port: server.port!, user, database: 'postgres', max, onnotice: () => {}, max_lifetime: 0 });
  clients.push(sql);
  return sql;
}

beforeAll(async () => {
  pglite = await createPGlite();
  await pglite.exec(`
    create table items (id int primary key, tenant text not null, label text not null);
    insert into items select g, case when g % 2 = 0 then 'a' else 'b' end, 'item ' || g from generate_series(1, 600) g;
    create role tenant_reader;
    grant select, update on items to tenant_reader;
    alter table items enable row level security;
    create policy by_tenant on items using (tenant = current_setting('app.tenant', true));
  `);
  server = await startWireServer(pglite);
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((sql) => sql.end({ timeout: 1 })));
  await server?.close();
  await pglite?.close();
});

describe('the wire server in front of PGlite', () => {
  it('answers every connection with its own results while they all query at once', async () => {
    // One backend behind every connection: each turn must go to PGlite whole and its answer to
    // the connection that asked.
    const owner = client('postgres');
    const other = client('postgres');
    const wrong: number[] = [];
    await Promise.all(
      Array.from({ length: 600 }, async (_, i) => {
        const [row] = await (i % 2 ? owner : other)<{ label: string }[]>`select label from items where id = ${i + 1}`;
        if (row?.label !== `item ${i + 1}`) wrong.push(i + 1);
      }),
    );
    expect(wrong).toEqual([]);
  });

  it('runs each connection as its login role, so row-level security applies to it and not to the superuser', async () => {
    const reader = client('tenant_reader');
    const owner = client('postgres');
    const counts = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2
          ? owner<{ n: number; role: string }[]>`select count(*)::int as n, current_user as role from items`
          : reader.begin(async (tx) => {
              await tx`select set_config('app.tenant', 'a', true)`;
              return tx<{ n: number; role: string }[]>`select count(*)::int as n, current_user as role from items`;
            }),
      ),
    );
    counts.forEach(([row], i) => expect(row).toEqual(i % 2 ? { n: 600, role: 'postgres' } : { n: 300, role: 'tenant_reader' }));
    // Without the tenant, the restricted role sees nothing.
    expect(await reader`select count(*)::int as n from items`).toEqual([{ n: 0 }]);
  });

  it('keeps a transaction to its connection: another connection never sees it before it commits', async () => {
    const writer = client('postgres', 1);
    const watcher = client('postgres', 1);
    let changing!: () => void;
    const midway = new Promise<void>((resolve) => (changing = resolve));
    const [, [row]] = await Promise.all([
      writer.begin(async (tx) => {
        await tx`update items set label = 'changing' where id = 1`;
        changing();
        await sleep(50);
        await tx`update items set label = 'changed' where id = 1`;
      }),
      midway.then(() => watcher<{ label: string }[]>`select label from items where id = 1`),
    ]);
    // The watcher's turn waited for the writer's transaction, as a lock would: it read the commit.
    expect(row).toEqual({ label: 'changed' });
  });

  it('refuses a login role or a database it does not have, as a server does', async () => {
    const stranger = client('nobody-here', 1);
    await expect(stranger`select 1`).rejects.toThrow('role "nobody-here" does not exist');
    const elsewhere = postgres({ host: '127.0.0.1', port: server.port!, user: 'postgres', database: 'no_such_database', max: 1 });
    clients.push(elsewhere);
    await expect(elsewhere`select 1`).rejects.toThrow('database "no_such_database" does not exist');
  });

  it('rolls back what a connection left open when it goes away, and the others carry on', async () => {
    const leaving = client('postgres', 1);
    const staying = client('postgres', 1);
    const open = leaving.begin(async (tx) => {
      await tx`update items set label = 'never committed' where id = 2`;
      await sleep(10_000);
    });
    open.catch(() => {});
    await sleep(100);
    const waiting = staying<{ label: string }[]>`select label from items where id = 2`;
    await leaving.end({ timeout: 0 });
    expect(await waiting).toEqual([{ label: 'item 2' }]);
  });

  it("deallocates a closed connection's prepared statements, so the one backend does not keep them", async () => {
    const before = Number((await pglite.query<{ n: number }>('select count(*)::int as n from pg_prepared_statements')).rows[0]!.n);
    const shortLived = client('postgres', 1);
    for (let i = 0; i < 5; i++) await shortLived.unsafe(`select ${i} + $1::int as n`, [i], { prepare: true });
    await shortLived.end();
    await sleep(100);
    const after = Number((await pglite.query<{ n: number }>('select count(*)::int as n from pg_prepared_statements')).rows[0]!.n);
    expect(after).toBe(before);
  });

  it('lets a connection go whose statements failed to prepare, so closing the server does not wait for it forever', async () => {
    // A Parse that fails prepares nothing; cleaning up after the connection must not stop at the missing statement.
    const other = await createPGlite();
    await other.exec(`create table kept (a int, twice int generated always as (a * 2) stored)`);
    const ownServer = await startWireServer(other);
    try {
      const sql = postgres({ host: '127.0.0.1', port: ownServer.port!, user: 'postgres', database: 'postgres', max: 1, onnotice: () => {} });
      await expect(sql`update kept set twice = ${3}`).rejects.toThrow(/can only be updated to DEFAULT/);
      await expect(sql.unsafe('select nope from kept', [], { prepare: true })).rejects.toThrow(/column "nope" does not exist/);
      expect(await sql`select 1 as one`).toEqual([{ one: 1 }]);
      await sql.end();
      const closed = ownServer.close().then(() => 'closed');
      expect(await Promise.race([closed, sleep(5_000).then(() => 'still waiting')])).toBe('closed');
      expect(ownServer.connections()).toBe(0);
    } finally {
      await other.close();
    }
  });
});
