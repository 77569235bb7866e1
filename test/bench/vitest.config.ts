/**
 * `npm run bench`: every `*.bench.ts` under test/bench, one file at a time (a 2-core machine: files running side by
 * side would measure each other), with a global setup that collects the rows and writes BENCHMARKS.md.
 * Dependencies resolve with Node's own conditions, as under `node` in production: Vitest otherwise adds
 * `development`, which loads e.g. XState's development build (several times slower per transition).
 * `BENCH_CPU_PROF=dir` runs the workers under `node --cpu-prof` and writes their profiles to `dir`; `BENCH_NODE_ARGS`
 * adds Node options to the workers (e.g. a V8 flag to compare: `BENCH_NODE_ARGS=--no-allocation-site-pretenuring`).
 */
import { defineConfig } from "vitest/config";

// Resolve `development|production` conditions as production (Vite reads NODE_ENV).
process.env.NODE_ENV = "production";

const profile = process.env.BENCH_CPU_PROF;

export default defineConfig({
  mode: "production",
  test: {
    include: [],
    benchmark: { include: ["test/bench/**/*.bench.ts"] },
    globalSetup: ["test/bench/global-setup.ts"],
    fileParallelism: false,
    pool: "forks",
    execArgv: [
      "--expose-gc",
      ...(profile ? ["--cpu-prof", `--cpu-prof-dir=${profile}`] : []),
      ...(process.env.BENCH_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
    ],
    testTimeout: 600_000,
    hookTimeout: 600_000,
  },
});
