import { defineConfig } from "vitest/config";

// A test's time limit only catches a hang: no test may fail because the machine is slow (a loaded CI machine, or
// `npm run test:repeat -- --burn`), so the limits are generous and each test waits on the events it needs instead.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
  },
});
