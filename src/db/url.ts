/** The same server as `url`, another database and optionally another login. */
export function withDatabase(url: string, database: string, as?: { user: string; password: string }): string {
  const next = new URL(url);
  next.pathname = `/${database}`;
  if (as) {
    next.username = encodeURIComponent(as.user);
    next.password = encodeURIComponent(as.password);
  }
  return next.toString();
}
