/**
 * The data the tests read, all of it inside the repository (test/fixtures/README.md says where
 * each file came from). Tests name the fixture root explicitly: `npm run bench` alone reads the
 * full collections, from MNEMO_IR_DATA or its --ir-data flag.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Collection, loadCollection } from '../../bench/ir.ts';

const FIXTURES = new URL('../fixtures/', import.meta.url);

/** med (whole), or a title-only subset of cranfield / cacm (`cranfield-titles`, `cacm-titles`). */
export const fixtureCollection = (name: 'med' | 'cranfield-titles' | 'cacm-titles'): Collection =>
  loadCollection(name, fileURLToPath(new URL('ir/', FIXTURES)));

/** One of KiwiFS's own case files, re-expressed as JSON (kiwifs-report-cases.json, …). */
export const kiwifsCases = <T>(file: string): T =>
  JSON.parse(readFileSync(new URL(`peer-cases/kiwifs/${file}`, FIXTURES), 'utf8')) as T;
