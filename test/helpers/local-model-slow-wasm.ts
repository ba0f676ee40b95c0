/**
 * A child process: the built-in embeddings server (src/embeddings/local-server.ts) started in a
 * fresh process where compiling WebAssembly takes `WASM_DELAY_MS` longer, as on a busy machine, so
 * the model's weights are read before its WebAssembly backend is ready. Embeds one sentence and
 * prints one JSON line (`{"dims"}` or `{"error"}`); exits 0 either way.
 *
 * Usage: node --import tsx local-model-slow-wasm.ts (WASM_DELAY_MS in the environment)
 */
const delayMs = Number(process.env.WASM_DELAY_MS ?? 1000);
// The global as a plain object: this project's TypeScript libraries do not declare it.
const wasm = (globalThis as unknown as { WebAssembly: Record<'compile' | 'instantiate', (...args: unknown[]) => Promise<unknown>> }).WebAssembly;
for (const name of ['compile', 'instantiate'] as const) {
  const original = wasm[name];
  wasm[name] = async (...args: unknown[]) => {
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    return original.apply(wasm, args);
  };
}

// Imported only now: the backend starts compiling as the model loads, after the patch.
const { startLocalEmbeddingsServer } = await import('../../src/embeddings/local-server.ts');
try {
  const server = await startLocalEmbeddingsServer({ port: 0 });
  const response = await fetch(`${server.url}/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: server.model, input: ['the standup moved to 9:30'] }),
  });
  const body = (await response.json()) as { data: { embedding: number[] }[] };
  console.log(JSON.stringify({ dims: body.data[0]!.embedding.length }));
  await server.close();
} catch (error) {
  console.log(JSON.stringify({ error: error instanceof Error ? error.message : String(error) }));
}
