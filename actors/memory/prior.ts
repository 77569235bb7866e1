/**
 * A prior of the Memory ranking: tests, fixtures, mocks and benchmarks rank below the code and documents they
 * exercise, unless the query asks for them ("tests of the parser"). A developer asking where something is done
 * wants the place it is done; the test files that name it in their paths would otherwise crowd it out.
 */

/** Score factor of a secondary file when the query does not ask for one. */
export const SECONDARY_WEIGHT = 0.3;

/** Stems of query words that ask for secondary files. */
export const SECONDARY_QUERY: ReadonlySet<string> = new Set(["test", "spec", "fixtur", "mock", "bench", "benchmark", "e2e"]);

const SECONDARY_DIR = /\/(?:tests?|__tests__|specs?|fixtures?|__fixtures__|__mocks__|mocks?|testdata|bench|benchmarks?|e2e)\//i;
const SECONDARY_NAME = /\.(?:test|spec|bench|e2e)\.[A-Za-z]+$|^test_[^/]*\.py$|_test\.(?:go|py)$/;

/** Whether a path is a test, fixture, mock or benchmark (by a directory of its own or its name). */
export function isSecondary(path: string): boolean {
  const slash = path.lastIndexOf("/");
  return SECONDARY_DIR.test(path.slice(0, slash + 1)) || SECONDARY_NAME.test(path.slice(slash + 1));
}
