import { Hono } from 'hono';
import type { AppEnv } from './context.ts';
import { errorBody } from './errors.ts';

export interface ReadinessProbe {
  /** False once shutdown has begun, so load balancers stop routing here before we close. */
  accepting(): boolean;
  checks: Record<string, () => Promise<unknown>>;
}

const CHECK_TIMEOUT_MS = 2000;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** `GET /healthz`: the process is up. `GET /readyz`: it can serve (Postgres and Redis answer). */
export function healthRoutes(probe: ReadinessProbe) {
  return new Hono<AppEnv>()
    .get('/healthz', (c) => c.json({ status: 'ok' }))
    .get('/readyz', async (c) => {
      if (!probe.accepting()) {
        return c.json(errorBody('unavailable', 'Shutting down', c.get('requestId')), 503);
      }
      const names = Object.keys(probe.checks);
      const outcomes = await Promise.allSettled(names.map((name) => withTimeout(probe.checks[name]!(), CHECK_TIMEOUT_MS)));
      const checks = Object.fromEntries(names.map((name, i) => [name, outcomes[i]!.status === 'fulfilled' ? 'ok' : 'down']));
      const down = names.filter((name) => checks[name] !== 'ok');
      if (down.length > 0) {
        // Which dependency is down helps an operator; why it is down stays in our logs.
        return c.json(errorBody('unavailable', `Not ready: ${down.join(', ')} unreachable`, c.get('requestId'), { checks }), 503);
      }
      return c.json({ status: 'ready', checks });
    });
}
