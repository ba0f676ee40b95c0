import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { inject } from 'vitest';
import { createApp } from '../../src/app.ts';
import { mintDevToken } from '../../src/auth/dev-token.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { createLogger } from '../../src/log.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { uniqueTenant } from './factories.ts';

export const TEST_SECRET = 'test-secret-of-at-least-thirty-two-bytes!';

export interface TokenClaims {
  tid: string;
  sub?: string;
  role?: 'admin' | 'member' | 'service';
  projects?: { read?: string[]; write?: string[] };
  orgs?: { read?: string[]; write?: string[] };
}

/** A valid HS256 token for the test server. */
export async function tokenFor(claims: TokenClaims, options: { secret?: string; ttlSeconds?: number } = {}): Promise<string> {
  const { token } = await mintDevToken({
    secret: options.secret ?? TEST_SECRET,
    claims: {
      tid: claims.tid,
      sub: claims.sub ?? 'user-1',
      role: claims.role ?? 'admin',
      projects: { read: claims.projects?.read ?? [], write: claims.projects?.write ?? [] },
      orgs: { read: claims.orgs?.read ?? [], write: claims.orgs?.write ?? [] },
    },
    ttlSeconds: options.ttlSeconds ?? 600,
  });
  return token;
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  token?: string | undefined;
  body?: unknown;
  /** Sent as is (for malformed bodies); wins over `body`. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestApi {
  baseUrl: string;
  db: TestDatabase;
  /** What the app logged (JSON lines), for tests of what is logged. */
  logs: string[];
  /** A fresh tenant and an admin token for it. */
  newTenant(label?: string): Promise<{ tenantId: string; admin: string }>;
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;
  close(): Promise<void>;
}

/**
 * The real app, on a random port of this machine, over this test file's own database and the
 * real Redis: requests go over HTTP exactly as a client's do.
 */
export async function startTestApi(): Promise<TestApi> {
  const db = await createTestDatabase();
  const redis = createRedis(inject('redisUrl'), 'producer');
  const logs: string[] = [];
  const app = createApp({
    logger: createLogger('info', {}, (line) => logs.push(line)),
    db: db.app.db,
    verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
    readiness: { accepting: () => true, checks: { postgres: () => db.app.sql`select 1`, redis: () => redis.ping() } },
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl,
    db,
    logs,
    async newTenant(label = 'tenant') {
      const tenantId = uniqueTenant(label);
      return { tenantId, admin: await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' }) };
    },
    async request(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      if (options.token) headers.authorization = `Bearer ${options.token}`;
      let body: string | undefined = options.rawBody;
      if (body === undefined && options.body !== undefined) body = JSON.stringify(options.body);
      if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
        headers['content-type'] = 'application/json';
      }
      const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: response.status, body: parsed as any, headers: response.headers };
    },
    async close() {
      if ('closeAllConnections' in server) server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await redis.quit();
      await db.drop();
    },
  };
}
