/**
 * Retrieval benchmark of the Memory role (issue 20): how often lexical matching finds the right files of a real
 * repository for questions a developer would ask.
 *
 * The corpus is the pino package as installed in node_modules (a dependency of dirigent, MIT licence): its source,
 * documentation, tests and benchmarks, as published, read at bench time, so nothing is vendored. It is indexed by
 * the indexer of `dirigent memory index` (descriptions extracted, no model) and ranked by the ranking of the Memory
 * role. The queries and the files relevant to each, judged by reading the files, are in queries.json; held-out.json
 * and held-out-2.json hold 27 more, written later and never used to choose anything (a check that a change is not
 * fitted to the first 38). Figures are given per file, for the held-out queries and for all queries together.
 *
 * Figures: recall@5 (per query, the share of its relevant files among the first 5 matches; averaged), MRR (the
 * reciprocal rank of the first relevant file among the 20 matches of a reply, 0 when none is there; averaged), and
 * the share of relevant files among the 30 candidates `--llm-match` hands to the model (the most it could find).
 * `--llm-match` itself needs a real model: the offline mock model's answers are unusable, so the role falls back to
 * the lexical ranking, and measuring that would only repeat the lexical figures.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, relative } from "node:path";
import { bench, describe } from "vitest";
import { IndexRanker } from "../../../actors/memory/rank.js";
import { LLM_CANDIDATES } from "../../../actors/memory/llm.js";
import { indexDirectory } from "../../../runtime/indexer/indexer.js";
import { once, record, WHOLE } from "../results.js";

interface Query {
  query: string;
  relevant: string[];
  why?: string;
}

/** The first `n` matches that count: recall@5 looks at 5, MRR at the 20 of a reply. */
const K = 5;
const REPLY = 20;
const TARGET = 0.8;

const load = (file: string) => JSON.parse(readFileSync(new URL(file, import.meta.url), "utf8")) as { corpus: string; queries: Query[] };
const data = load("./queries.json");
const heldOut = [...load("./held-out.json").queries, ...load("./held-out-2.json").queries];
const groups: { name: string; queries: Query[] }[] = [
  { name: "queries.json", queries: data.queries },
  { name: "held-out.json", queries: load("./held-out.json").queries },
  { name: "held-out-2.json", queries: load("./held-out-2.json").queries },
];
const manifest = createRequire(import.meta.url).resolve(`${data.corpus}/package.json`);
const root = dirname(manifest);
const version = (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;

/** Scores of one query. */
interface Scored {
  query: string;
  recall: number;
  reciprocal: number;
  candidates: number;
  ranks: (number | undefined)[];
  top: string[];
}

async function measure(queries: readonly Query[]): Promise<{ files: number; scored: Scored[]; buildMs: number; matchMs: number }> {
  // The package's own node_modules (a test fixture) is not part of pino's repository.
  const { entries } = await indexDirectory(root, { exclude: ["node_modules"] });
  const paths = new Set(entries.map((e) => relative(root, e.path)));
  const missing = queries.flatMap((q) => q.relevant.filter((r) => !paths.has(r)));
  if (missing.length > 0)
    throw new Error(
      `${data.corpus} ${version} lacks files the queries name (${missing.join(", ")}): update test/bench/retrieval/queries.json`,
    );
  let start = performance.now();
  const ranker = new IndexRanker(entries);
  const buildMs = performance.now() - start;
  start = performance.now();
  const scored = queries.map(({ query, relevant }): Scored => {
    const ranked = ranker.match(query, Math.max(REPLY, LLM_CANDIDATES)).map((m) => relative(root, m.path));
    const ranks = relevant.map((r) => {
      const at = ranked.indexOf(r);
      return at < 0 ? undefined : at + 1;
    });
    const first = Math.min(...ranks.map((r) => (r === undefined || r > REPLY ? Infinity : r)));
    return {
      query,
      recall: ranks.filter((r) => r !== undefined && r <= K).length / relevant.length,
      reciprocal: Number.isFinite(first) ? 1 / first : 0,
      candidates: ranks.filter((r) => r !== undefined && r <= LLM_CANDIDATES).length / relevant.length,
      ranks,
      top: ranked.slice(0, K),
    };
  });
  return { files: entries.length, scored, buildMs, matchMs: (performance.now() - start) / queries.length };
}

const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

describe(`retrieval over ${data.corpus} ${version}`, () => {
  bench(
    `recall@${K} and MRR of lexical matching`,
    once(async () => {
      const all = groups.flatMap((g) => g.queries);
      const { files, scored, buildMs, matchMs } = await measure(all);
      const summary = (part: readonly Scored[]) => ({
        recall: mean(part.map((s) => s.recall)),
        mrr: mean(part.map((s) => s.reciprocal)),
        ceiling: mean(part.map((s) => s.candidates)),
        hits: part.filter((s) => s.recall > 0).length,
      });
      let from = 0;
      for (const group of groups) {
        const part = scored.slice(from, from + group.queries.length);
        from += group.queries.length;
        console.log(`${group.name}:`);
        for (const s of part) {
          const ranks = s.ranks.map((r) => r ?? "-").join(",");
          console.log(`${s.recall === 1 ? "  " : s.recall > 0 ? "~ " : "x "}[${ranks}] ${s.query}\n      ${s.top.join("  ")}`);
        }
        const { recall, mrr, ceiling, hits } = summary(part);
        console.log(
          `${group.name}, ${part.length} queries: recall@${K} ${recall.toFixed(3)}, MRR ${mrr.toFixed(3)}, a relevant file in the first ${K} for ${hits}/${part.length}, ` +
            `relevant files among the ${LLM_CANDIDATES} --llm-match candidates ${ceiling.toFixed(3)}`,
        );
      }
      const original = summary(scored.slice(0, data.queries.length));
      const held = summary(scored.slice(data.queries.length));
      console.log(
        `held-out, ${heldOut.length} queries: recall@${K} ${held.recall.toFixed(3)}, MRR ${held.mrr.toFixed(3)}, a relevant file in the first ${K} for ${held.hits}/${heldOut.length}`,
      );
      const whole = summary(scored);
      console.log(
        `all ${scored.length} queries: recall@${K} ${whole.recall.toFixed(3)}, MRR ${whole.mrr.toFixed(3)}, a relevant file in the first ${K} for ${whole.hits}/${scored.length}, ` +
          `candidates ${whole.ceiling.toFixed(3)}; ranker built in ${buildMs.toFixed(0)} ms, ${matchMs.toFixed(2)} ms per match`,
      );
      const corpus = `${data.corpus} ${version} from node_modules, ${files} files`;
      const row = (order: number, variant: string, value: number, runs: number, extra: object) =>
        record({
          order,
          workload: `4 memory retrieval, ${corpus}`,
          variant,
          unit: "",
          figure: { median: value, min: value, max: value, runs },
          ...extra,
        });
      const n = data.queries.length;
      row(4.5, `lexical recall@${K}, ${n} queries`, original.recall, n, { target: `≥ ${TARGET}`, met: original.recall >= TARGET });
      row(4.51, `lexical recall@${K}, ${heldOut.length} held-out queries`, held.recall, heldOut.length, {
        target: `≥ ${TARGET}`,
        met: held.recall >= TARGET,
      });
      row(4.52, `lexical recall@${K}, all ${scored.length} queries`, whole.recall, scored.length, {});
      row(4.6, `lexical MRR (first relevant among the 20 matches), ${n} queries`, original.mrr, n, {});
      row(4.61, `lexical MRR, ${heldOut.length} held-out queries`, held.mrr, heldOut.length, {});
      row(
        4.7,
        `relevant files among the ${LLM_CANDIDATES} candidates of --llm-match, all ${scored.length} queries`,
        whole.ceiling,
        scored.length,
        {
          note: "(the model chooses among these; --llm-match itself needs a real model and is not measured)",
        },
      );
    }),
    WHOLE,
  );
});
