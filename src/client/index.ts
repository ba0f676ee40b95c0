/**
 * The TypeScript client (`import { createClient } from 'mnemo/client'`). Its types come from
 * the same zod schemas the server validates with, so a field the server accepts is a field the
 * client offers. Errors arrive as `MnemoError` with the envelope's `code`.
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { ErrorCode } from '../errors.ts';
import type {
  ContextBodySchema,
  ContextResult,
  Fact,
  FactList,
  ListQuerySchema,
  RetrieveBodySchema,
  RetrieveResult,
  SupersedeBodySchema,
  VerifyBodySchema,
  WriteFactBodySchema,
} from '../memory/schemas.ts';

import type { CoverageReport } from '../kiwifs/coverage.ts';
import type { ReportRequest, ReportStatus, ReportSummary } from '../episodes/schemas.ts';
import type { ErasureStatus, ErasureTarget } from '../lifecycle/erasure.ts';

export type { ContextResult, CoverageReport, ErasureStatus, ErasureTarget, ErrorCode, Fact, FactList, ReportRequest, ReportStatus, RetrieveResult };
/** Report filters: the episodes prefix, the page of each list, and scope keys. */
export type ReportQuery = { episodesPrefix?: string; limit?: number; offset?: number } & Partial<
  Record<'orgId' | 'projectId' | 'userId' | 'participantId' | 'threadId' | 'sessionId', string>
>;
type Page<T> = { data: T[]; hasMore: boolean; nextCursor: string | null };
export type RetrieveInput = z.input<typeof RetrieveBodySchema>;
export type ContextInput = z.input<typeof ContextBodySchema>;
export type WriteFactInput = z.input<typeof WriteFactBodySchema>;
export type SupersedeInput = z.input<typeof SupersedeBodySchema>;
export type VerifyInput = z.input<typeof VerifyBodySchema>;
/** List filters; `types` is an array here (sent comma-separated), numbers are numbers. */
export type ListInput = Omit<z.input<typeof ListQuerySchema>, 'types' | 'limit'> & { types?: string[]; limit?: number };

export class MnemoError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status: number,
    readonly requestId: string | undefined,
    /** The rest of the envelope: `details`, `currentVersion`, … */
    readonly body: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'MnemoError';
  }
}

export interface ClientOptions {
  baseUrl: string;
  /** A bearer JWT, or a function returning one (for tokens that rotate). */
  token: string | (() => string | Promise<string>);
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
}

export interface WriteOptions {
  /** Sent as `Idempotency-Key`. A fresh key is made per call unless you pass one, or `false`. */
  idempotencyKey?: string | false;
  /** `X-Provenance: type:id`, appended to the fact's derivedFrom. */
  provenance?: { type: string; id: string; actor?: string };
}

interface RequestSpec {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
}

function writeHeaders(options: WriteOptions = {}): Record<string, string> {
  const headers: Record<string, string> = {};
  if (options.idempotencyKey !== false) headers['Idempotency-Key'] = options.idempotencyKey ?? randomUUID();
  if (options.provenance) {
    headers['X-Provenance'] = `${options.provenance.type}:${options.provenance.id}`;
    if (options.provenance.actor) headers['X-Actor'] = options.provenance.actor;
  }
  return headers;
}

export function createClient(options: ClientOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;

  async function request<T>(spec: RequestSpec): Promise<T> {
    const url = new URL(`${baseUrl}${spec.path}`);
    for (const [key, value] of Object.entries(spec.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const token = typeof options.token === 'function' ? await options.token() : options.token;
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json', ...spec.headers };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    const response = await doFetch(url, {
      method: spec.method,
      headers,
      body: spec.body === undefined ? undefined : JSON.stringify(spec.body),
    });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const envelope = (parsed as { error?: Record<string, unknown> } | undefined)?.error;
      const requestId = (envelope?.requestId as string | undefined) ?? response.headers.get('x-request-id') ?? undefined;
      if (envelope && typeof envelope.code === 'string') {
        const { code, message, ...rest } = envelope;
        throw new MnemoError(code as ErrorCode, String(message), response.status, requestId, rest);
      }
      throw new MnemoError(response.status >= 500 ? 'internal' : 'bad-input', `HTTP ${response.status}`, response.status, requestId, {});
    }
    return parsed as T;
  }

  const factPath = (id: string) => `/v1/memory/facts/${encodeURIComponent(id)}`;

  return {
    memory: {
      /** Find facts by keyword, by meaning, or both (the default). */
      retrieve: (input: RetrieveInput) => request<RetrieveResult>({ method: 'POST', path: '/v1/memory/retrieve', body: input }),
      /** The system text and the `<memory>` message to put in front of a model. */
      context: (input: ContextInput) => request<ContextResult>({ method: 'POST', path: '/v1/memory/context', body: input }),
      /** Which episodes no consolidated fact has merged yet (DESIGN §6). */
      report: (query: ReportQuery = {}) => request<CoverageReport>({ method: 'GET', path: '/v1/memory/report', query }),
      /** The same report as a background job, kept for the history. */
      reports: {
        request: (input: ReportRequest = {}) =>
          request<{ id: string; status: ReportStatus['status'] }>({ method: 'POST', path: '/v1/memory/reports', body: input }),
        get: (id: string) => request<ReportStatus>({ method: 'GET', path: `/v1/memory/reports/${encodeURIComponent(id)}` }),
        list: (page: { limit?: number; cursor?: string } = {}) => request<Page<ReportSummary>>({ method: 'GET', path: '/v1/memory/reports', query: page }),
      },
      /** Erasure of a fact, a person or a conversation (tenant admins, DESIGN §10). */
      erasures: {
        request: (target: ErasureTarget) =>
          request<{ id: string; status: ErasureStatus['status'] }>({
            method: 'POST',
            path: '/v1/memory/erasures',
            body:
              target.kind === 'fact'
                ? { factId: target.id }
                : target.kind === 'conversation'
                  ? { conversationId: target.id }
                  : { subject: { kind: target.kind, id: target.id } },
          }),
        get: (id: string) => request<ErasureStatus>({ method: 'GET', path: `/v1/memory/erasures/${encodeURIComponent(id)}` }),
        list: (page: { limit?: number; cursor?: string } = {}) => request<Page<ErasureStatus>>({ method: 'GET', path: '/v1/memory/erasures', query: page }),
        resume: (id: string) =>
          request<{ id: string; status: ErasureStatus['status'] }>({ method: 'POST', path: `/v1/memory/erasures/${encodeURIComponent(id)}/resume` }),
      },
      facts: {
        write: (input: WriteFactInput, opts?: WriteOptions) =>
          request<Fact>({ method: 'POST', path: '/v1/memory/facts', body: input, headers: writeHeaders(opts) }),
        /**
         * Writes 1 to 1,000 facts all or nothing (`POST /v1/memory/facts:batch`), in order; one
         * Idempotency-Key covers the batch. A refused item refuses the batch: the error's `item`
         * is its index. Split larger sets yourself, a key per batch.
         */
        writeBatch: async (inputs: readonly WriteFactInput[], opts?: WriteOptions) =>
          (await request<{ data: Fact[] }>({ method: 'POST', path: '/v1/memory/facts:batch', body: { facts: inputs }, headers: writeHeaders(opts) }))
            .data,
        read: (id: string, at: { version?: number; asOf?: string | Date } = {}) =>
          request<Fact>({
            method: 'GET',
            path: factPath(id),
            query: { version: at.version, asOf: at.asOf instanceof Date ? at.asOf.toISOString() : at.asOf },
          }),
        list: (filters: ListInput = {}) =>
          request<FactList>({
            method: 'GET',
            path: '/v1/memory/facts',
            query: { ...filters, types: filters.types?.join(',') },
          }),
        supersede: (id: string, input: SupersedeInput, opts?: WriteOptions) =>
          request<Fact>({ method: 'POST', path: `${factPath(id)}/supersede`, body: input, headers: writeHeaders(opts) }),
        verify: (id: string, input: VerifyInput = {}, opts?: WriteOptions) =>
          request<Fact>({ method: 'POST', path: `${factPath(id)}/verify`, body: input, headers: writeHeaders(opts) }),
        delete: (id: string, at: { expectVersion?: number } = {}) =>
          request<Fact>({ method: 'DELETE', path: factPath(id), query: { expectVersion: at.expectVersion } }),
        revisions: (id: string) => request<{ data: Fact[] }>({ method: 'GET', path: `${factPath(id)}/revisions` }),
      },
    },
  };
}

export type MnemoClient = ReturnType<typeof createClient>;
