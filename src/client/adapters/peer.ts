/**
 * The framework an adapter is for, loaded when the adapter is. Adapters are subpath exports of
 * `@mnemo-memory/client` whose frameworks are optional peer dependencies: the client itself
 * installs nothing, and a user who imports `@mnemo-memory/client/langgraph` without LangGraph gets
 * one line saying what to install instead of Node's resolution error from inside the bundle.
 *
 * `load` is the adapter's own `() => import('<package>')`, written out so that bundlers and the
 * type checker see the specifier.
 */
export async function importPeer<T>(adapter: string, packageName: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (isMissingPackage(error, packageName)) {
      throw new Error(`@mnemo-memory/client/${adapter} needs ${packageName}, which is not installed: npm install ${packageName}`);
    }
    throw error;
  }
}

function isMissingPackage(error: unknown, packageName: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && typeof message === 'string' && message.includes(`'${packageName}'`);
}
