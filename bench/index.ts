/**
 * `npm run bench`. No benchmarks exist yet: retrieval (keyword/BM25, semantic, hybrid) and
 * write throughput are measured here by the retrieval issue, on the collections in
 * ../shared/data/ir/. Until then this says so instead of printing numbers it did not measure.
 */
process.stdout.write('mnemo bench: no benchmarks yet (they arrive with retrieval; see README "Status")\n');
