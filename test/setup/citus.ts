/**
 * `npm run test:citus`: starts a private Citus cluster on loopback (a coordinator and two workers,
 * test/citus/helpers/cluster.ts) and hands its nodes to the test files, whose `createTestDatabase()`
 * then makes distributed databases there instead of copying a template. Redis is the machine's
 * (REDIS_URL), as for `npm test`. Needs Citus installed (scripts/install-citus.sh).
 */
import { randomBytes } from 'node:crypto';
import type { TestProject } from 'vitest/node';
import { type CitusNodes, startCitusCluster } from '../citus/helpers/cluster.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Set under test:citus only: where the private Citus cluster's nodes listen. */
    citusNodes: CitusNodes | undefined;
  }
}

export default async function setup(project: TestProject) {
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl) throw new Error('The Citus suite needs Redis: set REDIS_URL (it starts its own PostgreSQL nodes)');
  const started = performance.now();
  const cluster = await startCitusCluster({ workers: 2 });
  console.log(
    `Citus cluster up in ${((performance.now() - started) / 1000).toFixed(1)} s: coordinator :${cluster.coordinator.port}, workers ${cluster.workers.map((w) => `:${w.port}`).join(', ')}`,
  );
  project.provide('postgres', 'server');
  project.provide('adminUrl', cluster.coordinator.adminUrl);
  project.provide('redisUrl', redisUrl);
  project.provide('templateDatabase', '');
  project.provide('runId', `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
  project.provide('citusNodes', cluster.nodes);
  return async () => {
    await cluster.remove();
  };
}
