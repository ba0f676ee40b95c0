import type { Hook } from '@hono/zod-openapi';
import type { z } from 'zod';
import { AppError } from '../errors.ts';
import type { AppEnv } from './app-env.ts';

export interface IssueDetail {
  path: string;
  message: string;
}

/** Zod issues as the envelope's `details`, each naming its field. */
export function issueDetails(issues: readonly z.core.$ZodIssue[]): IssueDetail[] {
  return issues.flatMap((issue) => {
    const path = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys' && issue.message.startsWith('Unrecognized key')) {
      return issue.keys.map((key) => ({ path: path ? `${path}.${key}` : key, message: 'is not a known field' }));
    }
    return [{ path, message: issue.message }];
  });
}

/**
 * The validation hook of every route: a request that fails its schema answers 400 `bad-input`,
 * the message naming the first field at fault and `details` listing every issue; a route that
 * needs a body and got none says so.
 */
export const validationHook: Hook<unknown, AppEnv, string, unknown> = (result, c) => {
  if (result.success) return;
  // A JSON body with no Content-Type would have been refused (415) before this: here there was
  // no body at all (or an empty one, see emptyJsonBodyIsNoBody), and the route needs one.
  if (result.target === 'json' && c.req.header('content-type') === undefined) {
    throw new AppError('bad-input', 'A JSON body is required (Content-Type: application/json)');
  }
  const details = issueDetails(result.error.issues);
  const first = details[0];
  const message = first ? (first.path ? `${first.path}: ${first.message}` : first.message) : 'Invalid request';
  throw new AppError('bad-input', message, { details });
};
