import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';

const base = {
  DATABASE_URL: 'postgres://mnemo_api:pw@db.internal:5432/mnemo',
  REDIS_URL: 'redis://cache.internal:6379',
  MNEMO_JWT_SECRET: 'x'.repeat(32),
};

const failure = (env: Record<string, string>): string => {
  try {
    loadConfig({ ...base, ...env }, 'api');
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('MNEMO_RATE_LIMIT_*', () => {
  it('defaults: requests a minute per caller / per tenant for each class', () => {
    expect(loadConfig(base, 'api').rateLimits).toEqual({
      writes: { perCaller: 1200, perTenant: 6000 },
      searches: { perCaller: 1200, perTenant: 6000 },
      reports: { perCaller: 60, perTenant: 300 },
      reads: { perCaller: 2400, perTenant: 12000 },
    });
  });

  it('reads "<per caller>/<per tenant>" and "off" (any case, spaces around), an empty value as the default', () => {
    const config = loadConfig(
      { ...base, MNEMO_RATE_LIMIT_WRITES: ' 10/50 ', MNEMO_RATE_LIMIT_SEARCHES: 'off', MNEMO_RATE_LIMIT_REPORTS: 'OFF', MNEMO_RATE_LIMIT_READS: '' },
      'api',
    );
    expect(config.rateLimits).toEqual({
      writes: { perCaller: 10, perTenant: 50 },
      searches: undefined,
      reports: undefined,
      reads: { perCaller: 2400, perTenant: 12000 },
    });
    expect(loadConfig({ ...base, MNEMO_RATE_LIMIT_READS: '7/7' }, 'api').rateLimits.reads).toEqual({ perCaller: 7, perTenant: 7 });
  });

  it('stops on a bad value with one line naming the variable', () => {
    const format = 'must be "<per caller>/<per tenant>" requests a minute (e.g. 600/3000) or "off"';
    for (const value of ['600', 'lots', '600/', '/3000', '600/3000/60', '6.5/10', '-1/10', 'on', '1e3/2e3']) {
      expect(failure({ MNEMO_RATE_LIMIT_WRITES: value }), value).toBe(`Invalid configuration: MNEMO_RATE_LIMIT_WRITES ${format}`);
    }
    for (const name of ['MNEMO_RATE_LIMIT_SEARCHES', 'MNEMO_RATE_LIMIT_REPORTS', 'MNEMO_RATE_LIMIT_READS']) {
      expect(failure({ [name]: 'unlimited' })).toBe(`Invalid configuration: ${name} ${format}`);
    }
    expect(failure({ MNEMO_RATE_LIMIT_SEARCHES: '0/100' })).toBe(
      'Invalid configuration: MNEMO_RATE_LIMIT_SEARCHES must allow at least 1 request a minute per caller and per tenant, or be "off"',
    );
    expect(failure({ MNEMO_RATE_LIMIT_READS: '100/0' })).toMatch(/^Invalid configuration: MNEMO_RATE_LIMIT_READS must allow at least 1 request/);
    expect(failure({ MNEMO_RATE_LIMIT_REPORTS: '100/50' })).toBe(
      'Invalid configuration: MNEMO_RATE_LIMIT_REPORTS must not allow one caller more than its whole tenant (<per caller> ≤ <per tenant>)',
    );
  });

  it('are read with jobs in-process too (no REDIS_URL): the limits then hold in the API process', () => {
    const config = loadConfig({ MNEMO_JWT_SECRET: base.MNEMO_JWT_SECRET, DATABASE_URL: base.DATABASE_URL, MNEMO_RATE_LIMIT_WRITES: '5/9' }, 'api');
    expect(config.jobs.kind).toBe('in-process');
    expect(config.rateLimits.writes).toEqual({ perCaller: 5, perTenant: 9 });
  });
});
