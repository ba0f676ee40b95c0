/**
 * What `kindgi_remember` writes, and where (src/memory/remember/remember.ts), with the defaults of a
 * deployment that sets none of MNEMO_MCP_*. In the foundation, so the configuration schema reads
 * it without loading the domain.
 */
export interface RememberSettings {
  /** The fact types an agent may remember (MNEMO_MCP_REMEMBER_TYPES). */
  types: readonly string[];
  /** How long a remembered fact is kept, from its last remembering (MNEMO_MCP_REMEMBER_KEEP_DAYS, default 30). */
  keepDays: number;
  /**
   * Where a token without an `mcp.scope` claim remembers (MNEMO_MCP_SCOPE): `user`, the caller's
   * own facts (`{userId: sub}`); `tenant`, tenant-wide (which only an admin may write).
   */
  scope: 'user' | 'tenant';
  /**
   * Which remembered facts wait for a person before retrieval returns them (MNEMO_MCP_REVIEW):
   * those whose text reads like an instruction, or all (the detector's recall on text unlike
   * what it was written against is far from 1: test/fixtures/instruction-like/README.md).
   */
  review: 'instruction-like' | 'all';
  /**
   * The instruction-like check's model score (0–1) at or above which a remembered text is held
   * (MNEMO_MCP_REVIEW_THRESHOLD); 1 leaves holding to the patterns alone. Lower holds more
   * injections and more ordinary text: the measured trade-off is in docs/guide/agents-and-mcp.md.
   */
  reviewThreshold: number;
  /** When erasure is on: remembering about someone being erased answers `erasure-in-progress`. */
  erasureKey?: string | undefined;
}

/** What a deployment that sets none of MNEMO_MCP_* gets. */
export const DEFAULT_REMEMBER_SETTINGS = {
  types: ['note', 'preference', 'fact'],
  keepDays: 30,
  scope: 'user',
  review: 'instruction-like',
  // Chosen from the measurements of docs/decisions/0111-learned-instruction-check.md.
  reviewThreshold: 0.95,
} as const satisfies Omit<RememberSettings, 'erasureKey'>;
