/**
 * The tenant's keyword statistics (BM25's corpus), kept by drizzle/0008_keyword_statistics.sql:
 * every statement that changes facts appends its net change; writers fold the changes now and
 * then, and a statement removing content folds them at once. keyword.ts reads folded plus
 * pending statistics; these helpers fold on demand and read the statistics whole.
 *
 * What they reveal, inside one tenant only: how many of the tenant's live facts hold a lexeme,
 * how many there are and how long they are, counting facts the reader may not see. Never their
 * content, ids or scopes (docs/decisions/0044-keyword-term-statistics.md).
 */
import { sql } from 'drizzle-orm';
import type { Tx } from '../../db/client.ts';

export interface KeywordStatistics {
  documents: number;
  tokens: number;
  /** lexeme → documents holding it (lexemes held by none are absent). */
  terms: Map<string, number>;
}

/** Folds the tenant's pending changes, waiting for a fold running elsewhere to finish. */
export async function foldKeywordStatistics(tx: Tx, tenantId: string): Promise<void> {
  await tx.execute(sql`select mnemo_keyword_fold(${tenantId}, true)`);
}

/**
 * The tenant's statistics as a search in this transaction's snapshot uses them: folded plus pending.
 * Each table is filtered by the tenant besides row-level security: on Citus that is what routes
 * the statement to the tenant's shard (issue 16).
 */
export async function keywordStatistics(tx: Tx, tenantId: string): Promise<KeywordStatistics> {
  const [corpus] = (await tx.execute(sql`
    select coalesce(sum(documents), 0)::float8 as documents, coalesce(sum(tokens), 0)::float8 as tokens from (
      select documents, tokens from keyword_corpus_stats where tenant_id = ${tenantId}
      union all
      select documents, tokens from keyword_stat_changes where tenant_id = ${tenantId}
    ) s
  `)) as unknown as { documents: number; tokens: number }[];
  const rows = (await tx.execute(sql`
    select lexeme, sum(documents)::float8 as documents from (
      select lexeme, documents from keyword_term_stats where tenant_id = ${tenantId}
      union all
      select l.lexeme, l.n from keyword_stat_changes c, unnest(c.lexemes, c.counts) as l(lexeme, n) where c.tenant_id = ${tenantId}
    ) s
    group by lexeme
    having sum(documents) <> 0
  `)) as unknown as { lexeme: string; documents: number }[];
  return { documents: corpus!.documents, tokens: corpus!.tokens, terms: new Map(rows.map((r) => [r.lexeme, r.documents])) };
}
