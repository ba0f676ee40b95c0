import type { Hook } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { z } from 'zod';
import { AppError } from '../foundation/app-error.ts';
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

type Failure = Extract<Parameters<Hook<unknown, AppEnv, string, undefined>>[0], { success: false }>;

/** Why a request failed its schema: 400 `bad-input`, naming the first field at fault and listing every issue in `details`. */
function refusal(result: Failure, c: Context<AppEnv>): AppError {
  // A JSON body with no Content-Type would have been refused (415) before this: here there was
  // no body at all (or an empty one, see emptyJsonBodyIsNoBody), and the route needs one.
  if (result.target === 'json' && c.req.header('content-type') === undefined) {
    return new AppError('bad-input', 'A JSON body is required (Content-Type: application/json)');
  }
  const details = issueDetails(result.error.issues);
  const first = details[0];
  const message = first ? (first.path ? `${first.path}: ${first.message}` : first.message) : 'Invalid request';
  return new AppError('bad-input', message, { details });
}

/**
 * The validation hook of every route: a request that fails its schema answers 400 `bad-input`,
 * the message naming the first field at fault and `details` listing every issue; a route that
 * needs a body and got none says so.
 */
export const validationHook: Hook<unknown, AppEnv, string, unknown> = (result, c) => {
  if (!result.success) throw refusal(result, c);
};

/**
 * The validation hook of a route whose body is a list of items (the batch write's `facts`): as
 * every route's, and when the first field at fault is inside an item (`facts.3.type`), `item` is
 * that item's index, as in every other refusal of the batch that is about one item.
 */
export function itemsValidationHook<T, P extends string>(list: string): Hook<T, AppEnv, P, undefined> {
  const inItem = new RegExp(`^${list}\\.(\\d+)(\\.|$)`);
  return (result, c) => {
    if (result.success) return;
    const error = refusal(result, c);
    const path = (error.extra.details as IssueDetail[] | undefined)?.[0]?.path;
    const index = path === undefined ? undefined : inItem.exec(path)?.[1];
    throw index === undefined ? error : new AppError(error.code, error.message, { item: Number(index), ...error.extra });
  };
}
