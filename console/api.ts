/**
 * The console's one way to the API: the public /v1 routes of this origin, with the signed-in
 * user's bearer token. The token is kept in sessionStorage only (gone with the tab), never in
 * localStorage or a URL; a sign-in link carries it in the fragment, which no request sends, and
 * the app moves it into sessionStorage and out of the address bar at once.
 */
const TOKEN_KEY = 'mnemo.console.token';

export interface Claims {
  sub: string;
  tid: string;
  role: 'admin' | 'member' | 'service';
}

export function signIn(token: string): Claims {
  const claims = claimsOf(token);
  sessionStorage.setItem(TOKEN_KEY, token);
  return claims;
}

export function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The claims of the stored token, or null: read to choose what to offer, never trusted (the API decides). */
export function currentClaims(): Claims | null {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) return null;
  try {
    return claimsOf(token);
  } catch {
    return null;
  }
}

function claimsOf(token: string): Claims {
  const part = token.trim().split('.')[1];
  if (!part) throw new Error('This is not a token: a token has three parts separated by dots.');
  const json = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
  const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (ch) => ch.charCodeAt(0)))) as Partial<Claims>;
  if (typeof claims.tid !== 'string' || typeof claims.sub !== 'string' || !['admin', 'member', 'service'].includes(String(claims.role))) {
    throw new Error('This token has no tenant, subject or role.');
  }
  return claims as Claims;
}

/** A token from the address bar's fragment (`#token=…`), moved into sessionStorage. */
export function takeTokenFromFragment(): void {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!match) return;
  try {
    signIn(decodeURIComponent(match[1]!));
  } finally {
    history.replaceState(null, '', `${location.pathname}#/facts`);
  }
}

/** An answer of the API that is not a success: its status, the contract's error code and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: Record<string, unknown>,
  ) {
    super(message);
  }
}

export async function api<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const response = await fetch(path, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    credentials: 'omit',
    cache: 'no-store',
  });
  const text = await response.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = {};
  }
  if (!response.ok) {
    const error = (parsed.error ?? parsed) as Record<string, unknown>;
    const code = typeof error.code === 'string' ? error.code : `http-${response.status}`;
    const message = typeof error.message === 'string' ? error.message : response.statusText;
    throw new ApiError(response.status, code, message, error);
  }
  return parsed as T;
}

/** Query string of the defined, non-empty values. */
export function query(params: Record<string, string | number | boolean | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export interface Fact {
  id: string;
  version: number;
  type: string;
  scope: Record<string, string>;
  content: unknown;
  trust: 'asserted' | 'unverified' | 'verified';
  assertedBy: { kind: string; id: string };
  verifiedBy: { kind: string; id: string } | null;
  verifiedAt: string | null;
  retention: { keepDays: number | null; keepUntil: string | null; legalHold: boolean };
  expiresAt: string | null;
  subjects: { kind: string; id: string }[];
  validFrom: string | null;
  validUntil: string | null;
  observedAt: string | null;
  memoryKind: string | null;
  episodeId: string | null;
  path: string | null;
  derivedFrom: { type: string; id: string }[];
  mergedFrom: { type: string; id: string }[];
  embeddingModel: string | null;
  createdAt: string;
  recordedAt: string;
  invalidatedAt: string | null;
  invalidationReason: string | null;
  review: 'pending' | null;
  reviewReason: ReviewReason | null;
}

/** Why a revision is held: what the instruction-like check found when an agent remembered it. */
export interface ReviewReason {
  signals: string[];
  score: number | null;
  threshold: number;
}
