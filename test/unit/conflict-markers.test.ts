/**
 * No merge leaves its conflict markers behind: a `<<<<<<<`, `=======` or `>>>>>>>` line in a tracked text file (a
 * merge once left them in docs/protocol.md, where a reader took both sides for the contract).
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const TEXT = /\.(ts|mjs|js|json|md|conf|yml|yaml|sh|html|css|xml|py)$|(^|\/)run$/;

describe("conflict markers", () => {
  it("are in no tracked text file", () => {
    const tracked = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" })
      .split("\n")
      .filter((path) => TEXT.test(path) && !path.startsWith("test/fixtures/"));
    expect(tracked.length).toBeGreaterThan(100);
    const found = tracked.flatMap((path) =>
      readFileSync(join(root, path), "utf8")
        .split("\n")
        .flatMap((line, i) => (/^(<{7}|>{7})( |$)|^={7}$/.test(line) ? [`${path}:${i + 1}: ${line}`] : [])),
    );
    expect(found).toEqual([]);
  });
});
