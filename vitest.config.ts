import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

// A test's time limit only catches a hang: no test may fail because the machine is slow (a loaded CI machine, or
// `npm run test:repeat -- --burn`), so the limits are generous and each test waits on the events it needs instead.
// Test files run at least two at a time: Vitest's default (one fewer than the cores) runs them one at a time on a
// 2-core machine such as CI's, where two at a time take the suite from about 21 to about 11 minutes.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
