/**
 * The side-by-side bench's output: Markdown tables (printed, and appended to bench/RESULTS.md)
 * and an SVG chart of search latency by size, drawn here (no plotting dependency).
 */
import { type Percentiles, table } from './harness.ts';
import { DRAGON, LOCOMO_LIMIT, LOCOMO_RANKERS, type LocomoRanker, type LocomoResult, PLAIN_BM25, RECALL_KS } from './locomo.ts';
import type { BreakdownRow } from './search-scale.ts';
import type { LangGraphRow, Section, SideBySideRun } from './side-by-side-run.ts';

/** The sections measured on the synthetic tenants (the others bring their own data). */
const SYNTHETIC: readonly Section[] = ['keyword', 'semantic', 'both', 'recall', 'writes', 'embed', 'report', 'langgraph'];

const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '—');
const f0 = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(0));
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '—');
const pct = (p: Percentiles) => `${f1(p.p50)} / ${f1(p.p95)} / ${f1(p.p99)}`;

const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '—');

/**
 * Where a search's milliseconds go: per size and mode, the client's wait and each server phase's
 * mean (Server-Timing). HTTP is the client's wait beyond the server's total; "rest" the server's
 * total beyond its phases (routing, body parsing and validation, middleware), not shown for
 * `both`, whose two searches overlap.
 */
export function renderBreakdown(rows: readonly BreakdownRow[]): string[] {
  const phases = [...new Set(rows.flatMap((r) => Object.keys(r.phases)))];
  return [
    '### Where a request spends its time (ms, mean per request)',
    '',
    'The same searches through a second API process started with `MNEMO_SERVER_TIMING=true`: each answer\'s `Server-Timing` header (src/foundation/request-timing.ts). HTTP: what the client waited beyond the server\'s total (both ends\' HTTP handling and the loopback); rest: the server\'s total beyond the phases named (routing, body parsing and validation, middleware). The two searches of `both` run at once, so its phases add up to more than its total. Writes: one client, 200 single writes after 20 untimed, into the write section\'s tenant.',
    '',
    table(
      ['facts', 'mode', 'client p50', 'client mean', 'HTTP', ...phases, 'rest'],
      rows.map((r) => {
        const named = Object.values(r.phases).reduce((a, b) => a + b, 0);
        return [
          r.size === null ? '—' : String(r.size),
          r.mode,
          f2(r.client.p50),
          f2(r.client.mean),
          f2(r.client.mean - r.server),
          ...phases.map((p) => f2(r.phases[p] ?? 0)),
          r.mode === 'both' ? '—' : f2(r.server - named),
        ];
      }),
    ),
  ];
}

/** A table of whatever rows another helper's module returned (objects with scalar fields). */
function genericTable(rows: readonly Record<string, unknown>[]): string {
  if (rows.length === 0) return '(no rows)';
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: unknown) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v ?? ''));
  return table(keys, rows.map((r) => keys.map((k) => cell(r[k]))));
}

export function renderMarkdown(run: SideBySideRun): string {
  const out: string[] = [];
  const m = run.machine;
  // A run of quality or locomo alone made no synthetic tenant: its sizes would describe nothing.
  const synthetic = run.sections.some((s) => SYNTHETIC.includes(s));
  out.push(
    `## ${m.date} — commit ${m.commit}${synthetic ? `, size ${run.sizeLabel}` : ''}`,
    '',
    `Machine: \`${m.uname}\`, ${m.cpus} CPUs, ${m.memoryGiB.toFixed(1)} GiB; load average ${m.loadBefore} at the start, ${m.loadAfter ?? '—'} at the end.`,
    ...(synthetic
      ? [`Main tenant sizes ${run.sizes.join(', ')} facts (plus other tenants: ${run.otherTenantsNote}); ${run.dims}-d synthetic vectors, unique, in ${run.clustersNote}; instant fake embeddings endpoint.`]
      : []),
    `Sections: ${run.sections.join(', ')}. Took ${(run.seconds / 60).toFixed(1)} min.`,
    '',
  );
  if (run.search.length > 0) {
    out.push(
      '### Search latency: API vs raw SQL (ms, p50 / p95 / p99)',
      '',
      `API: \`POST /v1/memory/retrieve\` (limit 10) from a client in another process; raw: keyword a plain \`ts_rank\` OR of the query's terms in the tenant, semantic \`ORDER BY embedding <=> $1 LIMIT 10\` on the HNSW index in the tenant (iterative scan), both the two one after the other. ${run.queriesNote}`,
      '',
      table(
        ['facts', 'mode', 'API', 'raw SQL', 'p50 ratio', 'load'],
        run.search.map((r) => [String(r.size), r.mode, pct(r.api), pct(r.raw), ratio(r.api.p50, r.raw.p50), r.load.toFixed(2)]),
      ),
      '',
    );
  }
  if (run.breakdown.length > 0) out.push(...renderBreakdown(run.breakdown), '');
  if (run.recall.length > 0) {
    out.push(
      '### Filtered recall@10 vs an exact scan',
      '',
      'API: semantic mode with the filter; plain HNSW: the same filter after the index with pgvector defaults (no iterative scan), for reference.',
      '',
      table(
        ['facts', 'case', 'candidates', 'API recall@10', 'API results', 'plain HNSW', 'queries'],
        run.recall.map((r) => [String(r.size), r.label, String(r.candidates), r.api.toFixed(3), r.returned.toFixed(1), r.rawHnsw.toFixed(3), String(r.queries)]),
      ),
      '',
    );
  }
  if (run.langgraph.length > 0) {
    const mnemo = (size: number) => run.search.find((s) => s.size === size && s.mode === 'semantic')?.api.p50;
    out.push(
      '### LangGraph.js PostgresStore on the same data',
      '',
      `\`@langchain/langgraph-checkpoint-postgres\` ${run.langgraphVersion}, HNSW cosine index (its defaults), the same vectors; search = \`store.search(namespace, { query, limit: 10 })\` vs Mnemo's semantic API.`,
      '',
      table(
        ['facts', 'LangGraph search p50 / p95 / p99', 'Mnemo semantic p50', 'Mnemo / LangGraph'],
        run.langgraph.map((r: LangGraphRow) => [String(r.size), pct(r.search), f1(mnemo(r.size) ?? Number.NaN), ratio(mnemo(r.size) ?? Number.NaN, r.search.p50)]),
      ),
      '',
    );
    if (run.langgraphPuts.length > 0) {
      const mnemoWrites = (clients: number) => run.writes.find((w) => w.clients === clients)?.api;
      out.push(
        table(
          ['clients', 'LangGraph puts/s', 'Mnemo writes/s', 'Mnemo / LangGraph'],
          run.langgraphPuts.map((r) => [String(r.clients), f0(r.putsPerSecond), f0(mnemoWrites(r.clients)), ratio(mnemoWrites(r.clients) ?? Number.NaN, r.putsPerSecond)]),
        ),
        '',
      );
    }
  }
  if (run.writes.length > 0) {
    out.push(
      '### Writes (facts/s)',
      '',
      `\`POST /v1/memory/facts\`, ${run.writeSeconds} s per cell; raw: the write's statements as the app role, one transaction per fact (tenant setting, tenant row, clock, fact, revision).`,
      '',
      table(
        ['clients', 'API', 'API + Idempotency-Key', 'raw', 'API / raw', 'idempotent / raw'],
        run.writes.map((w) => [String(w.clients), f0(w.api), f0(w.apiIdempotent), f0(w.raw), ratio(w.api, w.raw), ratio(w.apiIdempotent, w.raw)]),
      ),
      '',
      table(
        ['clients', 'batch', 'API batch route', 'raw multi-row', 'API / raw'],
        run.batch.map((b) => [String(b.clients), String(b.batch), b.api === null ? 'no route' : `${f0(b.api)} (${b.route})`, f0(b.raw), b.api === null ? '—' : ratio(b.api, b.raw)]),
      ),
      '',
    );
  }
  if (run.embed.length > 0) {
    out.push(
      '### Embed pipeline (instant endpoint, one worker process)',
      '',
      table(
        ['phase', 'facts', 'seconds', 'facts/s'],
        run.embed.map((e) => [e.phase, String(e.facts), e.seconds.toFixed(1), f0(e.factsPerSecond)]),
      ),
      '',
    );
  }
  for (const [name, result] of Object.entries(run.modules)) {
    out.push(`### ${name} (its own module)`, '', Array.isArray(result) ? genericTable(result as Record<string, unknown>[]) : '```\n' + String(result) + '\n```', '');
  }
  if (run.quality) out.push('### Retrieval quality (IR collections, real local model)', '', run.quality.trim(), '');
  if (run.locomo) out.push(renderLocomo(run.locomo));
  if (run.notes.length > 0) out.push('Notes:', '', ...run.notes.map((n) => `- ${n}`), '');
  return out.join('\n');
}

const LOCOMO_ROWS: Record<LocomoRanker, string> = {
  keyword: 'Mnemo keyword',
  semantic: 'Mnemo semantic',
  both: 'Mnemo both',
  bm25: `plain BM25 (k1 ${PLAIN_BM25.k1}, b ${PLAIN_BM25.b})`,
};

const percent = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '—' : (x * 100).toFixed(1));

/** The locomo section: recall@k beside the paper's DRAGON row, per category, latency. */
export function renderLocomo(result: LocomoResult): string {
  const measured = result.questions - result.withoutEvidence;
  const turns = result.conversations.reduce((n, c) => n + c.turns, 0);
  const ks = RECALL_KS.map((k) => `R@${k}`);
  const out = [
    `### LoCoMo recall (${result.split} split: ${result.conversations.map((c) => c.sampleId).join(', ')})`,
    '',
    `${result.conversations.length} conversations, ${turns} turns (one episodic fact each, \`<speaker> said, "<text>"\`, a tenant per conversation), ` +
      `${result.questions} questions through retrieve() (limit ${LOCOMO_LIMIT}). Recall@k: the share of a question's evidence turns among the top k, ` +
      `averaged over the ${measured} questions with evidence (${result.withoutEvidence} without left out; ${result.unknownEvidence} evidence ids naming no turn count as missed).`,
    '',
    table(
      ['retrieval', ...ks, 'p50 / p95 ms'],
      [
        ...LOCOMO_RANKERS.map((r) => [
          LOCOMO_ROWS[r],
          ...result.recall[r].map(percent),
          r === 'bm25' ? '—' : `${result.latency[r].p50.toFixed(1)} / ${result.latency[r].p95.toFixed(1)}`,
        ]),
        ['LoCoMo paper, DRAGON (Table 3, dialog)', ...RECALL_KS.map((k) => percent(DRAGON[k])), '—'],
      ],
    ),
    '',
    ...(result.fusion
      ? [
          'Mode both fused with other semantic weights (keyword 1; the request\'s `weights`):',
          '',
          table(['semantic weight', ...ks], result.fusion.map((v) => [String(v.semantic), ...v.recall.map(percent)])),
          '',
        ]
      : []),
    'Per category (the evaluation code reads 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial):',
    '',
    table(
      ['category: retrieval', 'questions', ...ks],
      result.categories.flatMap((c) => LOCOMO_RANKERS.map((r) => [`${c.category}: ${LOCOMO_ROWS[r]}`, String(c.questions), ...c.recall[r].map(percent)])),
    ),
    '',
    `Plain BM25: computed by the bench over the same turns' \`to_tsvector('english', …)\` lexemes, any-word match, no Mnemo code. ` +
      'Latency: each retrieve() call, one at a time, semantic and both including the query\'s embedding by the local model (USE lite) over HTTP.',
    '',
    ...result.conversations.map(
      (c) =>
        `  ${c.sampleId}: ${c.turns} turns written in ${c.writeSeconds.toFixed(1)} s, embedded in ${c.embedSeconds.toFixed(1)} s; ${c.questions} questions in ${c.askSeconds.toFixed(1)} s`,
    ),
    '',
  ];
  return out.join('\n');
}

/** Search p50 by size, API and raw per mode (and LangGraph's search), log-scaled axes when sizes span decades. */
export function renderSvg(run: SideBySideRun): string {
  const W = 760;
  const H = 440;
  const pad = { left: 70, right: 210, top: 40, bottom: 60 };
  const sizes = [...new Set(run.search.map((r) => r.size))].sort((a, b) => a - b);
  const series: { name: string; color: string; dash?: string; points: [number, number][] }[] = [];
  const colors: Record<string, string> = { keyword: '#1f77b4', semantic: '#2ca02c', both: '#d62728' };
  for (const mode of ['keyword', 'semantic', 'both'] as const) {
    const rows = run.search.filter((r) => r.mode === mode).sort((a, b) => a.size - b.size);
    if (rows.length === 0) continue;
    series.push({ name: `${mode} API`, color: colors[mode]!, points: rows.map((r) => [r.size, r.api.p50]) });
    series.push({ name: `${mode} raw SQL`, color: colors[mode]!, dash: '6 4', points: rows.map((r) => [r.size, r.raw.p50]) });
  }
  if (run.langgraph.length > 0) series.push({ name: 'LangGraph search', color: '#9467bd', dash: '2 3', points: run.langgraph.map((r) => [r.size, r.search.p50]) });
  const all = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => v > 0);
  const yMin = Math.max(0.1, Math.min(...all) / 1.5);
  const yMax = Math.max(...all) * 1.5;
  const xMin = sizes[0] ?? 1;
  const xMax = sizes[sizes.length - 1] ?? 10;
  const lx = (x: number) => Math.log10(x);
  const px = (x: number) => pad.left + (xMax === xMin ? 0.5 : (lx(x) - lx(xMin)) / (lx(xMax) - lx(xMin))) * (W - pad.left - pad.right);
  const py = (y: number) => H - pad.bottom - ((lx(y) - lx(yMin)) / (lx(yMax) - lx(yMin))) * (H - pad.top - pad.bottom);
  const el: string[] = [];
  el.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  el.push(`<text x="${W / 2 - 100}" y="22" font-size="15" font-family="sans-serif">Search p50 by tenant size (ms, log scales)</text>`);
  for (let e = Math.floor(lx(yMin)); e <= Math.ceil(lx(yMax)); e++) {
    for (const m of [1, 2, 5]) {
      const y = m * 10 ** e;
      if (y < yMin || y > yMax) continue;
      el.push(`<line x1="${pad.left}" x2="${W - pad.right}" y1="${py(y).toFixed(1)}" y2="${py(y).toFixed(1)}" stroke="#ddd"/>`);
      el.push(`<text x="${pad.left - 8}" y="${(py(y) + 4).toFixed(1)}" font-size="11" text-anchor="end" font-family="sans-serif">${y}</text>`);
    }
  }
  for (const size of sizes) {
    el.push(`<line x1="${px(size).toFixed(1)}" x2="${px(size).toFixed(1)}" y1="${pad.top}" y2="${H - pad.bottom}" stroke="#eee"/>`);
    el.push(`<text x="${px(size).toFixed(1)}" y="${H - pad.bottom + 18}" font-size="11" text-anchor="middle" font-family="sans-serif">${size.toLocaleString('en')}</text>`);
  }
  el.push(`<text x="${(pad.left + W - pad.right) / 2}" y="${H - 18}" font-size="12" text-anchor="middle" font-family="sans-serif">facts in the tenant</text>`);
  el.push(`<line x1="${pad.left}" x2="${pad.left}" y1="${pad.top}" y2="${H - pad.bottom}" stroke="#333"/>`);
  el.push(`<line x1="${pad.left}" x2="${W - pad.right}" y1="${H - pad.bottom}" y2="${H - pad.bottom}" stroke="#333"/>`);
  series.forEach((s, i) => {
    const d = s.points.map(([x, y], k) => `${k === 0 ? 'M' : 'L'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    el.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`);
    for (const [x, y] of s.points) el.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = pad.top + 10 + i * 20;
    el.push(`<line x1="${W - pad.right + 15}" x2="${W - pad.right + 45}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`);
    el.push(`<text x="${W - pad.right + 52}" y="${ly + 4}" font-size="12" font-family="sans-serif">${s.name}</text>`);
  });
  el.push(`<text x="${pad.left}" y="${H - 4}" font-size="10" fill="#666" font-family="sans-serif">${run.machine.date}, commit ${run.machine.commit}, ${run.machine.cpus} CPUs, load ${run.machine.loadBefore}</text>`);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">\n${el.join('\n')}\n</svg>\n`;
}
