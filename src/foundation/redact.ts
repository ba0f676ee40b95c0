/**
 * A configured URL as it may be shown — in a response, a startup line, a log or an error
 * message: scheme, host, port and path. Userinfo, query string and fragment are dropped, since
 * that is where credentials sit (`user:key@`, `?api_key=`); an operator or admin needs to see
 * which endpoint is configured, never its secrets (issue 10, defect 9).
 */
export function redactUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    // Not a URL (config refuses such values): show nothing of it rather than all of it.
    return '(not shown)';
  }
  return `${url.protocol}//${url.host}${url.pathname}`;
}
