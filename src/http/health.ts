import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { AppEnv } from './app-env.ts';
import { errorBody } from './errors.ts';
import { ErrorSchema, json } from './openapi.ts';

export interface ReadinessProbe {
  /** False once shutdown has begun, so load balancers stop routing here before we close. */
  accepting(): boolean;
  /** One check per dependency; it resolves when the dependency answers. */
  checks: Record<string, () => Promise<unknown>>;
  /**
   * Dependencies this node still serves without (DESIGN §7): when one is down it shows as
   * `degraded` and readiness stays 200. Any other failing check makes the node not ready.
   */
  degradable?: readonly string[];
}

/** A required dependency slower than this counts as down. */
const CHECK_TIMEOUT_MS = 2000;
/**
 * A degradable one gets less: it cannot fail the probe, but waiting on it must not make the probe
 * itself time out at the load balancer (Kubernetes' default probe timeout is 1 s).
 */
const DEGRADABLE_CHECK_TIMEOUT_MS = 500;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

const tags = ['operations'];

const CheckStateSchema = z.enum(['ok', 'degraded', 'down']).openapi({
  description: '`ok`; `degraded`: down, but this node serves without it (Redis, the read replica); `down`: a required dependency (Postgres) does not answer',
});
const ChecksSchema = z.record(z.string(), CheckStateSchema).openapi('ReadinessChecks', {
  description: "Each dependency's state, by name (`postgres`, `redis`, …)",
  example: { postgres: 'ok', redis: 'degraded' },
});

const healthRoute = createRoute({
  method: 'get',
  path: '/healthz',
  operationId: 'getHealth',
  tags,
  summary: 'The process is up (liveness); no token',
  responses: { 200: json(z.object({ status: z.literal('ok') }).openapi('Health'), 'Up') },
});

const readinessRoute = createRoute({
  method: 'get',
  path: '/readyz',
  operationId: 'getReadiness',
  tags,
  summary: 'This node can serve (readiness); no token',
  description: 'Checks each dependency, each within its own timeout, so the probe answers in about 2 s at worst.',
  responses: {
    200: json(z.object({ status: z.literal('ready'), checks: ChecksSchema }).openapi('Readiness'), 'Ready: every required dependency answers'),
    503: json(
      ErrorSchema.extend({ error: ErrorSchema.shape.error.extend({ checks: ChecksSchema.optional() }) }).openapi('NotReady'),
      'unavailable: a required dependency is `down` (named in the message; `checks` has them all), or shutdown has begun (no `checks`)',
    ),
  },
});

/**
 * `GET /healthz`: the process is up. `GET /readyz` (DESIGN §7, revised): 200 while this node can
 * serve — every required dependency (Postgres) answers — with each dependency's state in `checks`
 * (`ok`, or `degraded` for one it serves without, such as Redis or the read replica); 503 in the
 * error envelope when a required one is `down` or shutdown has begun.
 */
export function healthRoutes(probe: ReadinessProbe) {
  const degradable = new Set(probe.degradable ?? []);
  return new OpenAPIHono<AppEnv>()
    .openapi(healthRoute, (c) => c.json({ status: 'ok' as const }, 200))
    .openapi(readinessRoute, async (c) => {
      if (!probe.accepting()) {
        return c.json(errorBody('unavailable', 'Shutting down', c.get('requestId')), 503);
      }
      const names = Object.keys(probe.checks);
      const outcomes = await Promise.allSettled(
        names.map((name) => withTimeout(probe.checks[name]!(), degradable.has(name) ? DEGRADABLE_CHECK_TIMEOUT_MS : CHECK_TIMEOUT_MS)),
      );
      const checks = Object.fromEntries(
        names.map((name, i) => [name, outcomes[i]!.status === 'fulfilled' ? 'ok' : degradable.has(name) ? 'degraded' : 'down'] as const),
      );
      const down = names.filter((name) => checks[name] === 'down');
      if (down.length > 0) {
        // Which dependency is down helps an operator; why it is down stays in our logs.
        return c.json(errorBody('unavailable', `Not ready: ${down.join(', ')} unreachable`, c.get('requestId'), { checks }), 503);
      }
      return c.json({ status: 'ready' as const, checks }, 200);
    });
}
