/**
 * What is said of each environment variable, and who reads it: the registry that
 * src/foundation/environment.ts fills, one `setting(…)` per variable.
 */
import { z } from 'zod';

/**
 * Who reads a setting: the API on a PostgreSQL server (`server`: DATABASE_URL set) or on the
 * embedded one (`embedded`), the worker, and the CLI commands that read it themselves.
 */
export type SettingReader = 'server' | 'embedded' | 'worker' | 'mnemo migrate' | 'mnemo restore' | 'mnemo token' | 'mnemo export' | 'mnemo reembed';

/** The sections of docs/operations/configuration.md, in their order there. */
export const settingGroups = ['Storage', 'Jobs', 'Processes', 'Tokens', 'Search by meaning', 'Retention and erasure', 'Rate limits', 'Agents over MCP'] as const;
export type SettingGroup = (typeof settingGroups)[number];

/**
 * What an operator needs to know of one variable, kept beside the schema that reads it:
 * docs/operations/configuration.md is generated from these (`npm run docs:config`,
 * scripts/config-reference.ts) and test/unit/config-reference.test.ts fails when it is stale.
 */
export interface SettingDoc {
  group: SettingGroup;
  readBy: readonly SettingReader[];
  /** What it does, in Markdown. */
  meaning: string;
  /** The value an unset or empty variable takes. It goes through the schema like a given value. */
  default?: string | number;
  /** What unset means where no value stands in for it. */
  unset?: string;
  /**
   * What it accepts, where the schema cannot say it (URL schemes, lengths, formats, refinements
   * beyond a range); otherwise the generator reads the schema's enum or bounds.
   */
  accepts?: string;
}

/** Each variable's schema → its SettingDoc. */
export const settingDocs = z.registry<SettingDoc>();

/** One variable: its schema, with its default put in first when it has one, and its doc. */
export function setting<T extends z.ZodType>(doc: SettingDoc, schema: T) {
  const read = doc.default === undefined ? schema : z.preprocess((value) => (value === undefined || value === '' ? doc.default : value), schema);
  // The registry is keyed by schema object: one shared by two variables would carry the last one's doc.
  if (settingDocs.has(read)) throw new Error('setting(): each variable needs a schema of its own (make shared ones with a function)');
  return read.register(settingDocs, doc);
}
