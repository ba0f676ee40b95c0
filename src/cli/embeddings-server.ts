/**
 * `mnemo embeddings-server [--port 11435] [--host 127.0.0.1] [--alias NAME]…`: the local
 * embedding model (src/embeddings/local-server.ts) behind an OpenAI-compatible API, until SIGTERM
 * or SIGINT. It answers to use-lite-512 and to each --alias (the same model, for trying a model
 * switch); any other model name gets OpenAI's 404 model_not_found.
 */
import { LOCAL_DEFAULT_PORT, type LocalEmbeddingsServer, startLocalEmbeddingsServer } from '../embeddings/local-server.ts';
import { parseFlags, UsageError } from './args.ts';

export async function embeddingsServer(argv: string[]): Promise<void> {
  const values = parseFlags(argv, {
    port: { type: 'string', default: String(LOCAL_DEFAULT_PORT) },
    host: { type: 'string', default: '127.0.0.1' },
    alias: { type: 'string', multiple: true, default: [] },
  });
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port) || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError('embeddings-server: --port must be a port number (0 to 65535)');
  }
  const host = values.host.trim();
  if (!host) throw new UsageError('embeddings-server: --host must not be empty');
  const aliases = values.alias.map((alias) => alias.trim());
  if (aliases.some((alias) => alias === '')) throw new UsageError('embeddings-server: --alias must not be empty');

  // Listen for the signals before the model loads (a few seconds), so a stop meanwhile is clean too.
  let signalled = false;
  let wake: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const onSignal = () => {
    signalled = true;
    wake();
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  let server: LocalEmbeddingsServer;
  try {
    server = await startLocalEmbeddingsServer({
      port,
      host,
      aliases,
      // The startup line is printed below in full; errors of single requests go to stderr.
      log: (line) => {
        if (!line.startsWith('Embeddings server: ')) process.stderr.write(`${line}\n`);
      },
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new Error(`embeddings-server: ${host}:${port} is already in use (--port chooses another)`);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new Error(`embeddings-server: cannot listen on ${host} (--host)`);
    if (code === 'EACCES') throw new Error(`embeddings-server: not allowed to listen on ${host}:${port} (--port above 1023 needs no privileges)`);
    throw error;
  }

  if (!signalled) {
    process.stdout.write(
      `Embeddings server: ${server.model} at ${server.url} ` +
        `(set KINDGI_MEMORY_EMBEDDINGS=openai-compat, KINDGI_MEMORY_EMBEDDINGS_URL=${server.url}, KINDGI_MEMORY_EMBEDDINGS_MODEL=${server.model})\n`,
    );
    await stopped;
  }
  await server.close();
  process.stderr.write('Embeddings server stopped\n');
  // The model's WebAssembly backend may keep the event loop alive; the server is closed, so leave.
  process.exit(0);
}
