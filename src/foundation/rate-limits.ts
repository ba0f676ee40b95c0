/** Rate limits per route class (MNEMO_RATE_LIMIT_*): the classes, a limit, and the defaults. */
import { z } from 'zod';

/**
 * The route classes that have rate limits of their own (src/http/rate-limit.ts;
 * docs/decisions/0082-rate-limit-classes.md).
 */
export const rateLimitClasses = ['writes', 'searches', 'reports', 'reads'] as const;
export type RateLimitClass = (typeof rateLimitClasses)[number];

/** Requests a minute per caller (tenant + token `sub`) and per tenant (all its callers together). */
export interface RateLimit {
  perCaller: number;
  perTenant: number;
}

/** Each class's limits; undefined: that class is not limited (`off`). */
export type RateLimits = Record<RateLimitClass, RateLimit | undefined>;

/** Far above what one agent or importer asks for; there to keep one caller or tenant from starving the rest. */
export const defaultRateLimits: Record<RateLimitClass, string> = { writes: '1200/6000', searches: '1200/6000', reports: '60/300', reads: '2400/12000' };

const rateLimitFormat = 'must be "<per caller>/<per tenant>" requests a minute (e.g. 600/3000) or "off"';

/** A MNEMO_RATE_LIMIT_* value: `<per caller>/<per tenant>` requests a minute, or `off` (undefined). */
export const rateLimitSchema = z
  .string()
  .trim()
  .regex(/^(off|\d{1,9}\/\d{1,9})$/i, rateLimitFormat)
  .transform((value): RateLimit | undefined => {
    if (value.toLowerCase() === 'off') return undefined;
    const [perCaller, perTenant] = value.split('/').map(Number) as [number, number];
    return { perCaller, perTenant };
  })
  .refine((limit) => limit === undefined || (limit.perCaller >= 1 && limit.perTenant >= 1), 'must allow at least 1 request a minute per caller and per tenant, or be "off"')
  .refine((limit) => limit === undefined || limit.perCaller <= limit.perTenant, 'must not allow one caller more than its whole tenant (<per caller> ≤ <per tenant>)');
