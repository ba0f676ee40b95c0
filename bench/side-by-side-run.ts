/**
 * What one run of the side-by-side bench measured: the record bench/side-by-side.ts fills and
 * bench/results.ts renders (a module of its own, so neither imports the other).
 */
import type { Percentiles } from './harness.ts';
import type { LocomoResult } from './locomo.ts';
import type { BreakdownRow, RecallRow, SearchRow } from './search-scale.ts';
import type { BatchRow, EmbedRow, WriteRow } from './write-side.ts';

export const SECTIONS = ['keyword', 'semantic', 'both', 'recall', 'writes', 'embed', 'report', 'langgraph', 'quality', 'locomo'] as const;
export type Section = (typeof SECTIONS)[number];

export interface LangGraphRow {
  size: number;
  search: Percentiles;
}

export interface SideBySideRun {
  sizeLabel: string;
  sizes: number[];
  sections: Section[];
  dims: number;
  machine: { date: string; commit: string; uname: string; cpus: number; memoryGiB: number; loadBefore: string; loadAfter?: string };
  otherTenantsNote: string;
  clustersNote: string;
  queriesNote: string;
  search: (SearchRow & { load: number })[];
  /** Where the searches' milliseconds went (Server-Timing), per size and mode. */
  breakdown: BreakdownRow[];
  recall: RecallRow[];
  writes: WriteRow[];
  batch: BatchRow[];
  writeSeconds: number;
  embed: EmbedRow[];
  langgraph: LangGraphRow[];
  langgraphPuts: { clients: number; putsPerSecond: number }[];
  langgraphVersion: string;
  modules: Record<string, unknown>;
  quality?: string;
  /** The LoCoMo section (bench/locomo.ts). */
  locomo?: LocomoResult;
  notes: string[];
  seconds: number;
}
