/**
 * What an agent remembers through MCP (`kindgi_remember`, DESIGN §7; issue 17): a fact written
 * `unverified`, asserted by the calling principal, kept `keepDays`, in the scope the token and the
 * server name (never the model's arguments). The same type and key from the same principal in
 * that scope supersedes the fact instead of adding another; the same text again is a replay.
 * Text that reads like an instruction is held for a person's review (instruction-like.ts).
 */
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import { isDeepStrictEqual } from 'node:util';
import type { Principal } from '../../auth/permissions.ts';
import { facts } from '../../db/schema.ts';
import { type Caller, inTenantTransaction } from '../../core/caller.ts';
import { BadInput } from '../../core/errors.ts';
import { live, SCOPE_KEYS } from '../facts/conditions.ts';
import { writeFact } from '../facts/insert.ts';
import { factsByIds } from '../facts/read.ts';
import { supersedeFact } from '../facts/revise.ts';
import { checkInstructionLike, type InstructionSignal } from './instruction-like.ts';
import type { RememberSettings } from '../../foundation/remember-settings.ts';
import type { Fact } from '../facts/schemas.ts';
import type { ScopeInput } from '../schemas.ts';

export const REMEMBER_TEXT_MAX = 2000;

export interface RememberInput {
  type: string;
  text: string;
  /** Names the memory, so remembering it again replaces it ("favourite-colour"). */
  key?: string | undefined;
  validUntil?: string | undefined;
}

export interface Remembered {
  fact: Fact;
  outcome: 'created' | 'superseded' | 'replayed';
  /** What the instruction-like check found (with MNEMO_MCP_REVIEW=all a fact is held without any signal). */
  signals: InstructionSignal[];
  /** The check's model score, 0–1 (null when the text was held unread). */
  score: number | null;
}

/** The scope the MCP tools work in for this caller: the token's `mcp.scope`, else the server's setting. */
export function mcpScopeOf(principal: Principal, setting: RememberSettings['scope']): ScopeInput {
  if (principal.mcpScope) {
    const scope = principal.mcpScope;
    return Object.fromEntries(SCOPE_KEYS.flatMap((key) => (scope[key] == null ? [] : [[key, scope[key]]])));
  }
  return setting === 'user' ? { userId: principal.sub } : {};
}

export async function remember(caller: Caller, input: RememberInput, settings: RememberSettings): Promise<Remembered> {
  if (!settings.types.includes(input.type)) {
    throw new BadInput('type', `must be one of the types this server lets agents remember: ${settings.types.join(', ')}`);
  }
  const { principal } = caller;
  const scope = mcpScopeOf(principal, settings.scope);
  const content = input.key === undefined ? { text: input.text } : { text: input.text, key: input.key };
  const threshold = settings.reviewThreshold;
  const { instructionLike, signals, score } = checkInstructionLike(input.text, { threshold });
  const review = instructionLike || settings.review === 'all' ? ('pending' as const) : null;
  const options = { erasureKey: settings.erasureKey, review, reviewReason: { signals, score, threshold } };
  const retention = { keepDays: settings.keepDays };

  return inTenantTransaction(caller, async (tx) => {
    const inTx = { ...caller, tx };
    // Two agents remembering the same key at once must not both create it: the second waits here,
    // then finds the first one's fact.
    const identity = input.key === undefined ? `text:${input.text}` : `key:${input.key}`;
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`mnemo.remember:${principal.tenantId}:${principal.sub}:${input.type}:${identity}`}, 0))`);

    const sameScope = SCOPE_KEYS.map((key) => (scope[key] === undefined ? isNull(facts[key]) : eq(facts[key], scope[key])));
    const [existing] = await tx
      .select({ id: facts.id, content: facts.content, validUntil: facts.validUntil })
      .from(facts)
      .where(
        and(
          eq(facts.tenantId, principal.tenantId),
          eq(facts.type, input.type),
          eq(facts.assertedByKind, principal.role === 'service' ? 'service' : 'user'),
          eq(facts.assertedById, principal.sub),
          ...sameScope,
          live(),
          input.key === undefined
            ? sql`${facts.content} = ${JSON.stringify(content)}::jsonb`
            : sql`${facts.content} ->> 'key' = ${input.key}`,
        ),
      )
      .orderBy(desc(facts.id))
      .limit(1);

    if (!existing) {
      const body = { type: input.type, content, scope, trust: 'unverified' as const, retention, validUntil: input.validUntil };
      return { fact: await writeFact(inTx, body, options), outcome: 'created', signals, score };
    }
    const validUntil = input.validUntil === undefined ? existing.validUntil : new Date(input.validUntil);
    if (isDeepStrictEqual(existing.content, content) && validUntil?.getTime() === existing.validUntil?.getTime()) {
      const fact = (await factsByIds(tx, principal.tenantId, [existing.id])).get(existing.id)!;
      return { fact, outcome: 'replayed', signals, score };
    }
    // Whatever a person verified before, this text is the agent's.
    const fact = await supersedeFact(inTx, existing.id, { content, retention, validUntil: input.validUntil }, { ...options, trust: 'unverified' });
    return { fact, outcome: 'superseded', signals, score };
  });
}
