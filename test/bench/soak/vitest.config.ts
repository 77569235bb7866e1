/**
 * `npm run soak`: the soak of test/bench/soak/soak.ts alone (not part of `npm test` or `npm run bench`), with a time
 * limit far above its configured length. Its child processes run the built CLI (`npm run build` first).
 */
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/bench/soak/soak.ts"],
    pool: "forks",
    testTimeout: 3_600_000,
    hookTimeout: 600_000,
  },
});
