/**
 * `npm run screenshots`: retakes the inspector screenshots in docs/ from a real task (test/screenshots/screenshots.ts),
 * not part of `npm test`. Its child processes run the built CLI (`npm run build` first).
 */
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/screenshots/screenshots.ts"],
    pool: "forks",
    testTimeout: 600_000,
    hookTimeout: 300_000,
  },
});
