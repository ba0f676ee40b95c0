/**
 * `mnemo erase --url URL --token T (--subject kind:id | --conversation ID | --fact UUID) [--no-wait]`
 * and `mnemo erase --resume ERASURE_ID --url URL --token T [--no-wait]`: erases a person's data, a
 * conversation or one fact through the API (DESIGN §10, tenant admins only), and follows the
 * erasure until it has completed or failed. A legal hold stops an erasure: the command names the
 * facts under hold and how to resume once the hold is lifted.
 *
 * Exit codes: 0 completed (or queued, with --no-wait); 1 failed, refused by the API, or the API
 * cannot be reached; 2 a command line that cannot run; 130 stopped following (Ctrl-C; the
 * erasure goes on).
 */
import { createClient, type ErasureStatus, type ErasureTarget, MnemoError, type MnemoClient } from '../client/index.ts';
import { fetchWithRetry, NoAnswer } from '../core/retrying-fetch.ts';
import { API_OPTIONS, apiFlags, asCommand, CommandFailed, exitCodes, noAnswerFrom, parseFlags, UsageError } from './args.ts';
import { pollUntilDone, type ProgressView, progressLine } from './progress.ts';

const NAME = 'mnemo erase';
const POLL_MS = 500;
const REQUEST_TIMEOUT_MS = 30_000;
/** While following, this many failed polls in a row (network, 429, 5xx) before giving up. */
const POLL_FAILURES_MAX = 10;
/** How long an erasure may stay pending before a hint about the worker is printed. */
const NO_WORKER_HINT_MS = 15_000;

const SUBJECT_KINDS = ['participant', 'external'] as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Erasure = Pick<ErasureStatus, 'id' | 'status' | 'factsErased' | 'revisionsErased' | 'embeddingsDeleted' | 'error'>;

/** The API cannot be reached, took too long, or is not the Mnemo API: one line, exit code 1. */
class Unreachable extends CommandFailed {}

// ---------------------------------------------------------------------------------------------
// The command line

/** `kind:id`, split at the first colon. */
export function parseSubject(value: string): { kind: (typeof SUBJECT_KINDS)[number]; id: string } {
  const colon = value.indexOf(':');
  const kind = colon < 0 ? '' : value.slice(0, colon);
  const id = colon < 0 ? '' : value.slice(colon + 1);
  if (!(SUBJECT_KINDS as readonly string[]).includes(kind) || id.trim() === '') {
    throw new UsageError(`--subject must be kind:id with kind participant or external, e.g. participant:end-9 (got "${value}")`);
  }
  return { kind: kind as (typeof SUBJECT_KINDS)[number], id };
}

interface Options {
  baseUrl: string;
  token: string;
  tokenFromFlag: boolean;
  wait: boolean;
  /** What to erase, or the failed erasure to resume. */
  what: { target: ErasureTarget; label: string } | { resume: string };
}

function parse(argv: string[]): Options {
  const values = parseFlags(argv, {
    ...API_OPTIONS,
    // Repeatable, so a second target given as the same flag is counted (and refused), not silently kept.
    subject: { type: 'string', multiple: true },
    conversation: { type: 'string', multiple: true },
    fact: { type: 'string', multiple: true },
    resume: { type: 'string', multiple: true },
    'no-wait': { type: 'boolean', default: false },
  });
  const subjects = values.subject ?? [];
  const conversations = values.conversation ?? [];
  const factIds = values.fact ?? [];
  const resumes = values.resume ?? [];
  const targets = subjects.length + conversations.length + factIds.length;

  if (resumes.length > 1) throw new UsageError('--resume takes one erasure id');
  if (resumes.length === 1 && targets > 0) throw new UsageError('--resume takes no target: it runs the erasure again on what it was asked to erase');
  if (resumes.length === 0 && targets !== 1) {
    throw new UsageError(
      `${targets === 0 ? 'name what to erase' : 'name only one thing to erase'}: one of --subject participant:ID, --subject external:ID, --conversation ID, --fact UUID (or --resume ERASURE_ID)`,
    );
  }

  const common = { ...apiFlags(values, "a tenant admin's bearer token"), wait: !values['no-wait'] };
  const [resume] = resumes;
  if (resume !== undefined) {
    if (!UUID.test(resume)) throw new UsageError(`--resume must be an erasure id (a UUID, as mnemo erase printed it; got "${resume}")`);
    return { ...common, what: { resume } };
  }
  const [subject] = subjects;
  if (subject !== undefined) {
    const parsed = parseSubject(subject);
    return { ...common, what: { target: parsed, label: `${parsed.kind} ${parsed.id}` } };
  }
  const [conversation] = conversations;
  if (conversation !== undefined) {
    if (conversation.trim() === '') throw new UsageError('--conversation must name a conversation (a thread id)');
    return { ...common, what: { target: { kind: 'conversation', id: conversation }, label: `conversation ${conversation}` } };
  }
  const factId = factIds[0]!;
  if (!UUID.test(factId)) throw new UsageError(`--fact must be a fact id (a UUID; got "${factId}")`);
  return { ...common, what: { target: { kind: 'fact', id: factId }, label: `fact ${factId}` } };
}

// ---------------------------------------------------------------------------------------------
// HTTP: the typed client, with a timeout per request and a network failure as one readable line

function clientFor(baseUrl: string, token: string): MnemoClient {
  return createClient({
    baseUrl,
    token,
    // Not retried here: a poll that fails is counted by follow(), and a request is sent once.
    fetch: async (input, init) =>
      fetchWithRetry(input, init ?? {}, { retries: 0, baseDelayMs: 0, timeoutMs: REQUEST_TIMEOUT_MS }).catch((error: unknown) => {
        throw error instanceof NoAnswer ? new Unreachable(noAnswerFrom(baseUrl, error)) : error;
      }),
    // This fetch times out each request: the client's own timeout and retries stay off.
    maxRetries: 0,
    timeoutMs: 0,
  });
}

/** An answer that is not an erasure means the URL is not the Mnemo API. */
function erasureFrom<T>(baseUrl: string, value: T): T {
  if (!isErasure(value)) throw new Unreachable(`${baseUrl} did not answer with an erasure: is it the Mnemo API?`);
  return value;
}

const isErasure = (value: unknown): value is Pick<Erasure, 'id' | 'status'> =>
  value !== null && typeof value === 'object' && typeof (value as Erasure).id === 'string' && typeof (value as Erasure).status === 'string';

const transient = (error: unknown) => error instanceof Unreachable || (error instanceof MnemoError && (error.status === 429 || error.status >= 500));

// ---------------------------------------------------------------------------------------------
// Output

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const counts = (e: Erasure) =>
  `${plural(e.factsErased ?? 0, 'fact')}, ${plural(e.revisionsErased ?? 0, 'revision')}, ${plural(e.embeddingsDeleted ?? 0, 'vector')}`;

/** On a terminal the counts redrawn in place; elsewhere (logs, CI) a line each time they grow. */
export const erasing: ProgressView<Erasure> = {
  line: (erasure) => `erasing… ${counts(erasure)}`,
  logLine: (erasure) => `erasing… ${counts(erasure)}`,
  milestone: (e) => (e.status === 'pending' ? undefined : (e.factsErased ?? 0) + (e.revisionsErased ?? 0) + (e.embeddingsDeleted ?? 0)),
};

function resumeCommand(options: Options, id: string): string {
  return `mnemo erase --resume ${id} --url ${options.baseUrl}${options.tokenFromFlag ? ' --token …' : ''}`;
}

function describeFailure(options: Options, erasure: Erasure): string {
  const code = erasure.error?.code ?? 'unknown';
  const lines = [`${NAME}: erasure ${erasure.id} failed: ${code}`];
  if (code === 'legal-hold') {
    const ids = erasure.error?.factIds ?? [];
    lines[0] += `: ${ids.length === 1 ? '1 fact is' : `${ids.length} facts are`} under legal hold`;
    for (const id of ids) lines.push(`  ${id}`);
    lines.push('An admin lifts a hold by superseding the fact with retention {"legalHold": false}; then resume:');
  } else if (code === 'internal') {
    lines[0] += ' (the worker gave up on it; its log has the cause)';
    lines.push('Once the cause is fixed, resume:');
  } else {
    lines.push('Resume:');
  }
  if (erasure.factsErased + erasure.revisionsErased + erasure.embeddingsDeleted > 0) lines.splice(1, 0, `  erased before it stopped: ${counts(erasure)}`);
  lines.push(`  ${resumeCommand(options, erasure.id)}`);
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------
// The command

export async function erase(argv: string[]): Promise<void> {
  return asCommand(NAME, () => run(parse(argv)));
}

async function run(options: Options): Promise<void> {
  const { erasures } = clientFor(options.baseUrl, options.token).memory;
  const get = async (id: string) => erasureFrom(options.baseUrl, await erasures.get(id));
  let id: string;
  if ('resume' in options.what) {
    id = options.what.resume;
    const current = await get(id);
    if (current.status === 'failed') {
      try {
        erasureFrom(options.baseUrl, await erasures.resume(id));
        process.stderr.write(`${NAME}: erasure ${id} resumed\n`);
      } catch (error) {
        // Someone else resumed it meanwhile: follow it all the same.
        if (!(error instanceof MnemoError && error.code === 'bad-input')) throw error;
      }
    } else if (current.status === 'completed') {
      process.stdout.write(`erasure ${id} had already completed: erased ${counts(current)}\n`);
      return;
    } else {
      process.stderr.write(`${NAME}: erasure ${id} is ${current.status} (not failed): following it\n`);
    }
  } else {
    const started = erasureFrom(options.baseUrl, await erasures.request(options.what.target));
    id = started.id;
    if (options.wait) process.stderr.write(`${NAME}: erasure ${id} of ${options.what.label} queued\n`);
  }
  if (!options.wait) {
    process.stdout.write(`${id}\n`);
    return;
  }
  await follow(options, get, id);
}

/** Polls the erasure until it has completed (exit 0) or failed (exit 1). */
async function follow(options: Options, get: (id: string) => Promise<Erasure>, id: string): Promise<void> {
  const bar = progressLine(erasing);
  const since = Date.now();
  let hinted = false;
  let failures = 0;
  await pollUntilDone(
    POLL_MS,
    async () => {
      let erasure: Erasure;
      try {
        erasure = await get(id);
        failures = 0;
      } catch (error) {
        // A blip (a restart, a proxy) while following is not the erasure failing.
        if (!transient(error) || ++failures >= POLL_FAILURES_MAX) {
          bar.end();
          if (error instanceof Error) error.message += ` (while following erasure ${id}; it goes on without this command)`;
          throw error;
        }
        return false;
      }
      if (erasure.status === 'completed') {
        bar.end();
        process.stdout.write(`erasure ${id} completed: erased ${counts(erasure)}\n`);
        return true;
      }
      if (erasure.status === 'failed') {
        bar.end();
        process.stderr.write(describeFailure(options, erasure));
        process.exitCode = exitCodes.failed;
        return true;
      }
      bar.draw(erasure);
      if (!hinted && erasure.status === 'pending' && Date.now() - since > NO_WORKER_HINT_MS) {
        hinted = true;
        bar.note(`${NAME}: erasure ${id} is still pending: is a worker (mnemo worker) running?`);
      }
      return false;
    },
    () => {
      bar.end();
      process.stderr.write(`${NAME}: stopped following; erasure ${id} goes on (mnemo erase --resume ${id} … follows it again)\n`);
    },
  );
}
