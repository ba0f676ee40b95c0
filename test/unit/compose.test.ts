/**
 * docker-compose.yml is the production shape docs/operations/production.md describes, and no CI machine here runs
 * Docker: this reads the file and holds it to that shape (DESIGN §1, §8; issue 15).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig, loadMigrateConfig } from '../../src/config.ts';
import { environmentVariables } from '../../src/foundation/environment.ts';
import { projectRoot } from '../../support/processes.ts';

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  restart?: string;
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
  ports?: string[];
  volumes?: string[];
  stop_grace_period?: string;
}

const compose = parse(readFileSync(join(projectRoot, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const { services } = compose;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`docker-compose.yml has no service "${name}"`);
  return found;
};
/** The services that run Mnemo's own image (API, worker, migrate). */
const mnemoServices = Object.entries(services).filter(([, s]) => s.build !== undefined);
/** Everything but the one-shot migration: these must stay up. */
const longRunning = Object.entries(services).filter(([name]) => name !== 'migrate');
const seconds = (duration: string) => {
  const match = /^(\d+)s$/.exec(duration);
  if (!match) throw new Error(`unexpected duration ${duration}`);
  return Number(match[1]);
};

describe('docker-compose.yml', () => {
  it('has PostgreSQL with pgvector, Redis, PgBouncer, the migration, the API, a worker and a load balancer', () => {
    expect(Object.keys(services).sort()).toEqual(['api', 'lb', 'migrate', 'pgbouncer', 'postgres', 'redis', 'worker']);
    expect(service('postgres').image).toMatch(/^pgvector\/pgvector:pg1[5-9]$/);
    expect(service('api').deploy?.replicas).toBeGreaterThanOrEqual(2);
    expect(service('worker').deploy?.replicas).toBe(1);
    for (const [, s] of mnemoServices) expect(s.build).toBe('.');
    expect(mnemoServices.map(([name]) => name).sort()).toEqual(['api', 'migrate', 'worker']);
  });

  it('restarts every long-running service and checks its health; the migration runs once', () => {
    expect(longRunning).toHaveLength(6);
    for (const [name, s] of longRunning) {
      expect(s.restart, name).toBe('unless-stopped');
      expect(s.healthcheck?.test.length, name).toBeGreaterThan(1);
    }
    const migrate = service('migrate');
    expect(migrate.restart).toBe('no');
    expect(migrate.healthcheck).toBeUndefined();
    expect(migrate.command).toEqual(['node', 'bin/mnemo.js', 'migrate']);
  });

  it('starts the API and the worker only after the migration succeeded, behind healthy PgBouncer and Redis', () => {
    for (const name of ['api', 'worker']) {
      expect(service(name).depends_on, name).toEqual({
        migrate: { condition: 'service_completed_successfully' },
        pgbouncer: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
      });
    }
    expect(service('migrate').depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    expect(service('pgbouncer').depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
  });

  it('runs Redis with AOF persistence and noeviction', () => {
    const command = service('redis').command!.join(' ');
    expect(command).toMatch(/^redis-server /);
    expect(command).toContain('--appendonly yes');
    expect(command).toContain('--maxmemory-policy noeviction');
    expect(service('redis').volumes).toContainEqual(expect.stringMatching(/:\/data$/));
  });

  it('puts PgBouncer in transaction mode between the API/worker and PostgreSQL; only migrate connects directly', () => {
    const bouncer = service('pgbouncer').environment!;
    expect(bouncer.POOL_MODE).toBe('transaction');
    expect(bouncer.DB_HOST).toBe('postgres');
    for (const name of ['api', 'worker']) {
      const env = service(name).environment!;
      const url = new URL(env.DATABASE_URL!);
      expect(url.hostname, name).toBe('pgbouncer');
      expect(url.port, name).toBe(bouncer.LISTEN_PORT);
      // PgBouncer logs in to PostgreSQL as the same app role, with the same password.
      expect([decodeURIComponent(url.username), decodeURIComponent(url.password), url.pathname.slice(1)], name).toEqual([
        bouncer.DB_USER,
        bouncer.DB_PASSWORD,
        bouncer.DB_NAME,
      ]);
      expect(env.MNEMO_DB_PREPARED_STATEMENTS, name).toBe('false');
      expect(env.DATABASE_ADMIN_URL, name).toBeUndefined();
    }
    const migrate = service('migrate').environment!;
    const admin = new URL(migrate.DATABASE_ADMIN_URL!);
    expect(admin.hostname).toBe('postgres');
    expect(decodeURIComponent(admin.username)).toBe(service('postgres').environment!.POSTGRES_USER);
    // migrate provisions the role the API and the worker log in as.
    expect(migrate.DATABASE_URL).toBe(service('api').environment!.DATABASE_URL);
  });

  it('sets only variables src/config.ts knows, with values it accepts', () => {
    for (const [name, s] of mnemoServices) {
      const unknown = Object.keys(s.environment ?? {}).filter((variable) => !environmentVariables.includes(variable));
      expect(unknown, name).toEqual([]);
    }
    expect(() => loadConfig(service('api').environment!, 'api')).not.toThrow();
    expect(() => loadConfig(service('worker').environment!, 'worker')).not.toThrow();
    expect(loadMigrateConfig(service('migrate').environment!).appUrl).toBe(service('api').environment!.DATABASE_URL);
  });

  it('gives the API and the worker longer to stop than their own shutdown deadline', () => {
    for (const name of ['api', 'worker']) {
      const { shutdownTimeoutMs } = loadConfig(service(name).environment!, name === 'api' ? 'api' : 'worker');
      expect(seconds(service(name).stop_grace_period!) * 1000, name).toBeGreaterThan(shutdownTimeoutMs);
    }
  });

  it("checks the worker's health on the port its metrics listen on", () => {
    const worker = service('worker');
    const port = worker.environment!.MNEMO_METRICS_PORT;
    expect(port).toMatch(/^\d+$/);
    expect(worker.healthcheck!.test.join(' ')).toContain(`http://127.0.0.1:${port}/healthz`);
  });

  it('publishes only the load balancer, which spreads over the API replicas and keeps /metrics private', () => {
    const published = Object.entries(services).filter(([, s]) => s.ports !== undefined);
    expect(published.map(([name]) => name)).toEqual(['lb']);
    const lb = service('lb');
    expect(lb.ports).toEqual(['3000:3000']);
    const mount = lb.volumes!.find((volume) => volume.endsWith(':/etc/nginx/nginx.conf:ro'))!;
    const file = join(projectRoot, mount.split(':')[0]!);
    expect(existsSync(file)).toBe(true);
    const conf = readFileSync(file, 'utf8');
    expect(conf).toMatch(/upstream mnemo_api \{[^}]*server api:3000 resolve;/);
    expect(conf).toMatch(/location \/ \{[^}]*proxy_pass http:\/\/mnemo_api;/);
    expect(conf).toMatch(/location = \/metrics \{\s*return 404;\s*\}/);
    expect(lb.depends_on).toEqual({ api: { condition: 'service_healthy' } });
  });
});

describe('Dockerfile', () => {
  const lines = readFileSync(join(projectRoot, 'Dockerfile'), 'utf8').split('\n');
  const at = (pattern: RegExp) => lines.findIndex((line) => pattern.test(line));

  it('copies patches/ before npm ci, whose postinstall (patch-package) applies them', () => {
    const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.postinstall).toBe('patch-package');
    expect(at(/^COPY patches\b/)).toBeGreaterThan(-1);
    expect(at(/^COPY patches\b/)).toBeLessThan(at(/^RUN npm ci\b/));
  });
});
