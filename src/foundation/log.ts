/**
 * Structured logs: one JSON object per line on stdout, so any log shipper can read them.
 * Small on purpose; every process creates one logger from its config and passes it down.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

const severity: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function createLogger(
  level: LogLevel,
  base: LogFields = {},
  write: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
): Logger {
  const emit = (at: LogLevel, message: string, fields?: LogFields) => {
    if (severity[at] < severity[level]) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: at, msg: message, ...base, ...fields }, errorReplacer));
  };
  return {
    debug: (message, fields) => emit('debug', message, fields),
    info: (message, fields) => emit('info', message, fields),
    warn: (message, fields) => emit('warn', message, fields),
    error: (message, fields) => emit('error', message, fields),
    child: (fields) => createLogger(level, { ...base, ...fields }, write),
  };
}

/** Errors are logged by their safe fields only (see `safeError`); JSON.stringify would print `{}`. */
function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return safeError(value);
  return value;
}

/** What a log line may say about an error. */
export interface SafeError {
  name: string;
  message: string;
  /** A node or driver code (ECONNREFUSED, CONNECTION_CLOSED) or the SQLSTATE of a PostgreSQL error. */
  code?: string;
  /** For a PostgreSQL error: the constraint, table and column it names (identifiers, never values). */
  constraint?: string;
  table?: string;
  column?: string;
  stack?: string;
  cause?: SafeError | string;
}

const CAUSE_DEPTH = 4;

/**
 * The fields of an error that are safe to log (issue 10, defect 9): name, message, code or
 * SQLSTATE, stack frames, and the same of its cause. Never what an error carries about the
 * statement that failed: drizzle's DrizzleQueryError puts the SQL and its parameters (fact
 * content, an erasure target's id) in its message, and postgres.js hangs `query`, `parameters`
 * and `args` on its errors, with the server's `detail` quoting key values. A stack is rebuilt
 * from its frames under the safe first line, since V8 copies the message into it.
 */
export function safeError(error: unknown, depth = 0): SafeError | string {
  if (!(error instanceof Error)) return `non-error thrown: ${typeof error}`;
  const name = isDrizzleQueryError(error) ? 'DrizzleQueryError' : error.name || 'Error';
  const message = safeMessage(error, name);
  const described: SafeError = { name, message };
  const fields = error as unknown as Record<string, unknown>;
  if (typeof fields.code === 'string' || typeof fields.code === 'number') described.code = String(fields.code);
  if (name === 'PostgresError') {
    if (typeof fields.constraint_name === 'string') described.constraint = fields.constraint_name;
    if (typeof fields.table_name === 'string') described.table = fields.table_name;
    if (typeof fields.column_name === 'string') described.column = fields.column_name;
  }
  if (typeof error.stack === 'string') {
    const frames = error.stack.split('\n').filter((line) => /^\s+at /.test(line));
    described.stack = [`${name}: ${message}`, ...frames].join('\n');
  }
  if (error.cause !== undefined) {
    described.cause = depth + 1 < CAUSE_DEPTH ? safeError(error.cause, depth + 1) : 'cause chain cut here';
  }
  return described;
}

/** One line for an error, safe to store or log (e.g. an outbox row's last error). */
export function safeErrorText(error: unknown): string {
  const parts: string[] = [];
  let current: SafeError | string = safeError(error);
  for (;;) {
    if (typeof current === 'string') {
      parts.push(current);
      break;
    }
    parts.push(`${current.name}${current.code ? ` ${current.code}` : ''}: ${current.message}`);
    if (current.cause === undefined) break;
    current = current.cause;
  }
  return parts.join(' <- ');
}

function isDrizzleQueryError(error: Error): boolean {
  return error.constructor?.name === 'DrizzleQueryError' || (error.message.startsWith('Failed query: ') && 'params' in error);
}

function safeMessage(error: Error, name: string): string {
  // "Failed query: <sql>\nparams: <values>": the values must not be logged, nor the statement
  // (the frames say where it was run); what the server said, from the cause, may.
  if (name === 'DrizzleQueryError') {
    const cause = error.cause;
    return cause instanceof Error ? `Failed query: ${safeMessage(cause, cause.name)}` : 'Failed query';
  }
  // PostgreSQL quotes the offending input after a colon (`invalid input syntax for type uuid: "…"`).
  if (name === 'PostgresError') return error.message.replace(/: ".*$/s, ': (value not logged)');
  return error.message;
}

/**
 * A promise rejected with nobody to handle it would end the process (Node's default), taking the
 * worker's jobs or the API's requests with it. Mnemo's state lives in PostgreSQL and Redis and
 * every job is retried, so a stray rejection from a driver or queue callback during an outage is
 * not worth a crash: it is logged at error level (its safe fields) and the process goes on. The
 * fault suite fails on such a line, so one is still found. Uncaught exceptions still end the
 * process: state in memory may then be broken, and the supervisor restarts it.
 */
export function logUnhandledRejections(logger: Logger): void {
  process.on('unhandledRejection', (reason) => {
    logger.error('unhandled promise rejection', { error: reason instanceof Error ? reason : safeError(reason) });
  });
}
