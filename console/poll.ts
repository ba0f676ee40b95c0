/** Polls `read` every `everyMs` until `done` holds of its answer; `onEach` sees every answer. Returns a stop function. */
export function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, onEach: (value: T) => void, onError: (error: unknown) => void, everyMs = 500): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    try {
      const value = await read();
      if (stopped) return;
      onEach(value);
      if (!done(value)) timer = setTimeout(tick, everyMs);
    } catch (error) {
      if (!stopped) onError(error);
    }
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
