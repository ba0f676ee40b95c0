/**
 * Who sees what: the read and write rules for a fact's scope, as pure functions
 * (`canRead`, `canWrite`) and as a drizzle SQL condition (`visibleTo`) for listing queries.
 *
 * The tenant is not checked here: by the time these run, the caller's tenant has been fixed
 * (row-level security on `app.tenant_id`, see src/db/client.ts), so every scope is implicitly
 * inside the caller's tenant.
 *
 * The two forms must agree. The pure functions are the reference; `visibleTo` restates the
 * read rule row by row so the database can apply it without loading rows first.
 */
import { and, eq, inArray, isNotNull, isNull, or, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';

export interface Principal {
  /** Claim `tid`. */
  tenantId: string;
  /** Claim `sub`. */
  sub: string;
  role: 'admin' | 'member' | 'service';
  projects: { read: string[]; write: string[] };
  orgs: { read: string[]; write: string[] };
  /** Claim `mcp.scope`: where the MCP tools remember and recall; absent, the server's setting decides. */
  mcpScope?: Scope | undefined;
}

/** A fact's scope keys. `null` and `undefined` both mean "absent". */
export interface Scope {
  orgId?: string | null;
  projectId?: string | null;
  userId?: string | null;
  participantId?: string | null;
  threadId?: string | null;
  sessionId?: string | null;
}

export type ScopeKind = 'tenant' | 'org' | 'project' | 'project-conversation' | 'user' | 'invalid';

/** The scope columns of a table such as `facts`, so `visibleTo(p, facts)` works. */
export type ScopeColumns = Record<
  'orgId' | 'projectId' | 'userId' | 'participantId' | 'threadId' | 'sessionId',
  AnyPgColumn
>;

// `!= null` on purpose: null and undefined are the same "absent" key. An empty string is a
// present key (ids are validated non-empty upstream, and the database would see '' as non-null).
const has = (value: string | null | undefined): value is string => value != null;

/**
 * Classifies a scope. The order matters: a user id wins over everything (a user's private
 * fact may also carry project/conversation keys), then a project, and only then are bare
 * conversation keys (participant/thread/session without a project or user to own them)
 * rejected as invalid, before falling back to org and tenant.
 */
export function scopeKind(scope: Scope): ScopeKind {
  const conversation = has(scope.participantId) || has(scope.threadId) || has(scope.sessionId);
  if (has(scope.userId)) return 'user';
  if (has(scope.projectId)) return conversation ? 'project-conversation' : 'project';
  if (conversation) return 'invalid';
  if (has(scope.orgId)) return 'org';
  return 'tenant';
}

type Access = 'read' | 'write';

/**
 * Per scope kind, what a principal other than an admin needs to read facts there and to write
 * (create, revise, delete) them. Write permission implies read.
 */
const grantsFor: Record<Exclude<ScopeKind, 'invalid'>, Record<Access, (principal: Principal, scope: Scope) => boolean>> = {
  tenant: {
    read: () => true,
    // Tenant-wide facts are seen by everyone, so only an admin may change them.
    write: () => false,
  },
  org: {
    read: (principal, scope) => principal.orgs.read.includes(scope.orgId!) || principal.orgs.write.includes(scope.orgId!),
    write: (principal, scope) => principal.orgs.write.includes(scope.orgId!),
  },
  project: {
    read: (principal, scope) => principal.projects.read.includes(scope.projectId!) || principal.projects.write.includes(scope.projectId!),
    write: (principal, scope) => principal.projects.write.includes(scope.projectId!),
  },
  'project-conversation': {
    // Conversations are more private than the project's shared facts: a read grant is not enough.
    read: (principal, scope) => principal.projects.write.includes(scope.projectId!),
    write: (principal, scope) => principal.projects.write.includes(scope.projectId!),
  },
  user: {
    read: (principal, scope) => principal.sub === scope.userId,
    write: (principal, scope) => principal.sub === scope.userId,
  },
};

function allowed(access: Access, principal: Principal, scope: Scope): boolean {
  const kind = scopeKind(scope);
  // Invalid scopes are refused for everyone, admin included: callers answer 400 before this.
  if (kind === 'invalid') return false;
  if (principal.role === 'admin') return true;
  return grantsFor[kind][access](principal, scope);
}

/** True when the principal may read facts in this scope. */
export function canRead(principal: Principal, scope: Scope): boolean {
  return allowed('read', principal, scope);
}

/** True when the principal may write (create, revise, delete) facts in this scope. */
export function canWrite(principal: Principal, scope: Scope): boolean {
  return allowed('write', principal, scope);
}

/**
 * `column in (ids)` with ids bound as parameters. An empty list is answered with `false`
 * here rather than relying on drizzle's own behaviour for `inArray(col, [])`, because
 * `in ()` is a syntax error in PostgreSQL and older drizzle versions emitted it.
 */
function memberOf(column: AnyPgColumn, ids: readonly string[]): SQL {
  const unique = [...new Set(ids)];
  return unique.length === 0 ? sql`false` : inArray(column, unique);
}

// `and`/`or` are typed `SQL | undefined` (for empty input); ours are never empty, and the
// fallbacks are the identities of each operator, so they are also correct if one ever is.
const all = (...conditions: SQL[]): SQL => and(...conditions) ?? sql`true`;
const any = (...conditions: SQL[]): SQL => or(...conditions) ?? sql`false`;

/**
 * The read rule (`canRead`) as a WHERE condition over a table's scope columns, for example
 * `db.select().from(facts).where(visibleTo(principal, facts))`. Every id is a bound parameter.
 *
 * For an admin this is `true`: invalid scopes are refused on write (400), so none should be
 * stored, and an admin sees everything in the tenant.
 */
export function visibleTo(principal: Principal, columns: ScopeColumns): SQL {
  if (principal.role === 'admin') return sql`true`;

  const c = columns;
  const noConversation = all(isNull(c.participantId), isNull(c.threadId), isNull(c.sessionId));
  const conversation = any(isNotNull(c.participantId), isNotNull(c.threadId), isNotNull(c.sessionId));
  const readableOrgs = [...principal.orgs.read, ...principal.orgs.write];
  const readableProjects = [...principal.projects.read, ...principal.projects.write];

  // One branch per scope kind, mirroring scopeKind(). An invalid scope (conversation keys
  // with neither project nor user) matches no branch: tenant/org need no conversation keys,
  // project/project-conversation need a project (`in` never matches NULL), user needs a user.
  return any(
    // tenant: no key at all.
    all(isNull(c.userId), isNull(c.projectId), noConversation, isNull(c.orgId)),
    // org: org only.
    all(isNull(c.userId), isNull(c.projectId), noConversation, memberOf(c.orgId, readableOrgs)),
    // project: project (maybe with org), no conversation keys.
    all(isNull(c.userId), noConversation, memberOf(c.projectId, readableProjects)),
    // project-conversation: needs a write grant on the project.
    all(isNull(c.userId), conversation, memberOf(c.projectId, principal.projects.write)),
    // user: only its owner (`=` never matches NULL, so this also requires a user id).
    eq(c.userId, principal.sub),
  );
}
