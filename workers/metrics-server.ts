import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { registry } from '../src/foundation/metrics.ts';

export interface MetricsServer {
  port: number;
  /** Makes /healthz answer 503, so a supervisor sees the worker going before it is gone. */
  stopping(): void;
  close(): Promise<void>;
}

/**
 * The worker's own HTTP port (MNEMO_METRICS_PORT): `GET /metrics` in Prometheus's text format and
 * `GET /healthz` for a container healthcheck. A worker has no API port, and it should not need
 * Hono for two answers. Like the API's /metrics, for the internal network only.
 */
export async function startMetricsServer(port: number): Promise<MetricsServer> {
  let healthy = true;
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { Allow: 'GET, HEAD' }).end();
    } else if (path === '/metrics') {
      registry.metrics().then(
        (text) => response.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        () => response.writeHead(500).end(),
      );
    } else if (path === '/healthz') {
      response.writeHead(healthy ? 200 : 503, { 'Content-Type': 'application/json' }).end(JSON.stringify({ status: healthy ? 'ok' : 'stopping' }));
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    stopping: () => {
      healthy = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
