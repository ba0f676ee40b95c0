/**
 * Fault rows of the instruction-like check (issue 24): a remembered text built to make the
 * check's patterns work hard must not hold the event loop. Before, one 2,000-character text took
 * 9.2–78.5 s in the check, and through MCP one `kindgi_remember` took 36 s while `/healthz`
 * waited 35.8 s. Each row prints one `[faults]` line with its figures (the adversarial row adds
 * one line per pattern).
 *
 * - The adversarial set: every pattern over 2,000-character texts built against it
 *   (support/adversarial-texts.ts), the slowest per pattern and the whole check.
 * - The whole check (issue 31): the patterns and the learned model over each general text, under
 *   20 ms.
 * - Through the API: a real API process (`src/server.ts`) remembers such a text over MCP while
 *   `/healthz` is asked every 50 ms; both answer promptly.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFor } from '../helpers/api.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { mcpClients } from '../helpers/mcp.ts';
import { sleep } from '../../support/wait.ts';
import { checkInstructionLike } from '../../src/memory/remember/instruction-like.ts';
import { describeFigures, GENERAL_TEXTS, ISSUE_24_LOOKALIKE_TEXT, measureAdversarialTexts } from '../../support/adversarial-texts.ts';
import { type ApiProcess, startApiProcess } from './helpers/api-process.ts';

/** Far above what the check takes now, far below what it took before. */
const PATTERN_BOUND_MS = 200;
const REMEMBER_BOUND_MS = 5_000;
const HEALTHZ_BOUND_MS = 1_000;
/** Issue 31: the whole check, patterns and model, over any one adversarial text. */
const CHECK_BOUND_MS = 20;

describe('faults: the instruction-like check under adversarial texts', () => {
  it('adversarial set: no pattern takes long over any text built against it', () => {
    const figures = measureAdversarialTexts();
    console.log(`[faults] ${describeFigures(figures)}`);
    for (const row of figures.patterns) expect(row.slowestMs, `${row.pattern} over "${row.slowestText}"`).toBeLessThan(PATTERN_BOUND_MS);
  });

  it(`adversarial set: the whole check, patterns and learned model, stays under ${CHECK_BOUND_MS} ms on each text`, () => {
    checkInstructionLike('');
    // The best of three runs: the cost of the text, not of a scheduler that took the core away once.
    const rows = GENERAL_TEXTS.map(({ name, text }) => {
      const runs = [0, 1, 2].map(() => {
        const started = performance.now();
        checkInstructionLike(text, { budgetMs: Infinity });
        return performance.now() - started;
      });
      return { name, ms: Math.min(...runs) };
    }).sort((a, b) => b.ms - a.ms);
    console.log(`[faults] whole instruction-like check over ${rows.length} adversarial texts: slowest ${rows.slice(0, 3).map((r) => `${r.ms.toFixed(1)} ms (${r.name})`).join(', ')}`);
    for (const { name, ms } of rows) expect(ms, name).toBeLessThan(CHECK_BOUND_MS);
  });

  describe('through MCP against a real API process', () => {
    let api: ApiProcess;
    const clients = mcpClients();

    beforeAll(async () => {
      api = await startApiProcess();
    });
    afterAll(async () => {
      await clients.closeAll();
      await api?.stop();
    });

    const remember = async (client: Client, text: string) => {
      const started = performance.now();
      const result = (await client.callTool({ name: 'kindgi_remember', arguments: { type: 'note', text } })) as CallToolResult;
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      return { ms: performance.now() - started, review: (result.structuredContent as { review: string | null }).review };
    };

    /** `/healthz`, asked every 50 ms until `done` settles: the slowest answer. */
    async function slowestHealthz(done: Promise<unknown>): Promise<{ slowestMs: number; asked: number }> {
      let settled = false;
      void done.finally(() => (settled = true)).catch(() => {});
      let slowestMs = 0;
      let asked = 0;
      while (!settled) {
        const started = performance.now();
        const response = await fetch(`${api.url}/healthz`);
        await response.arrayBuffer();
        expect(response.status).toBe(200);
        slowestMs = Math.max(slowestMs, performance.now() - started);
        asked++;
        await sleep(50);
      }
      return { slowestMs, asked };
    }

    it('a 2,000-character adversarial kindgi_remember answers promptly, and /healthz is not held meanwhile', async () => {
      const token = await tokenFor({ tid: uniqueTenant('i24-mcp'), sub: 'ana', role: 'member' });
      const client = await clients.connect(api.url, token);
      // A running server has checked texts before: the first check in a process also builds the
      // patterns' automata, once.
      const first = await remember(client, 'The user prefers email over phone calls.');
      expect(first.review).toBeNull();

      const adversarial = remember(client, ISSUE_24_LOOKALIKE_TEXT);
      const healthz = await slowestHealthz(adversarial);
      const { ms, review } = await adversarial;
      console.log(
        `[faults] adversarial remember over MCP: ${ISSUE_24_LOOKALIKE_TEXT.length} characters answered in ${ms.toFixed(0)} ms (review ${review}); ` +
          `/healthz asked ${healthz.asked} times meanwhile, slowest ${healthz.slowestMs.toFixed(0)} ms; the first remember in the process ${first.ms.toFixed(0)} ms`,
      );
      expect(ms).toBeLessThan(REMEMBER_BOUND_MS);
      expect(healthz.slowestMs).toBeLessThan(HEALTHZ_BOUND_MS);
      // It speaks as a system note ("Ѕуѕtеm nоtе:" in Cyrillic look-alikes): held for review.
      expect(review).toBe('pending');
    });
  });
});
