import { OpenAPIHono } from '@hono/zod-openapi';
import { HTTPException } from 'hono/http-exception';
import type { Logger } from './log.ts';
import type { AppEnv } from './http/context.ts';
import { ApiError, errorBody, respondWithError } from './http/errors.ts';
import { healthRoutes, type ReadinessProbe } from './http/health.ts';
import { requestId, requestLog } from './http/middleware.ts';

export interface AppDependencies {
  logger: Logger;
  readiness: ReadinessProbe;
}

/** Builds the HTTP app: middleware and routes, nothing that listens or touches process state. */
export function createApp({ logger, readiness }: AppDependencies) {
  const app = new OpenAPIHono<AppEnv>();

  app.use('*', requestId());
  app.use('*', requestLog(logger));

  app.route('/', healthRoutes(readiness));

  app.notFound((c) => c.json(errorBody('not-found', `No route for ${c.req.method} ${c.req.path}`, c.get('requestId')), 404));

  app.onError((error, c) => {
    if (error instanceof ApiError) return respondWithError(c, error);
    if (error instanceof HTTPException && error.status < 500) {
      // Hono's own 4xx (e.g. a malformed body) keeps its status under our envelope.
      const code = error.status === 413 ? 'payload-too-large' : error.status === 401 ? 'unauthenticated' : 'bad-input';
      return respondWithError(c, new ApiError(code, error.message || 'Bad request'));
    }
    logger.error('unhandled error', { requestId: c.get('requestId'), method: c.req.method, path: c.req.path, error });
    return respondWithError(c, new ApiError('internal', 'Internal error'));
  });

  return app;
}

export type App = ReturnType<typeof createApp>;
