/**
 * docs/inspector.md does not quote its own benchmark figures (they drift from BENCHMARKS.md, which every
 * `npm run bench` rewrites): it refers to BENCHMARKS.md and states the publisher rate the bench really uses.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const read = (path: string) => readFileSync(join(import.meta.dirname, "../..", path), "utf8");

/** The text of section `## title` of a Markdown file. */
function section(text: string, title: string): string {
  const start = text.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`no section '## ${title}'`);
  const end = text.indexOf("\n## ", start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

describe("docs/inspector.md, Figures", () => {
  const figures = section(read("docs/inspector.md"), "Figures");
  const bench = read("test/bench/inspector.bench.ts");

  it("refers to BENCHMARKS.md instead of quoting lag or memory figures", () => {
    expect(figures).toContain("(../BENCHMARKS.md");
    // The target is a requirement, not a measurement.
    expect(figures).toContain("at most 500 ms");
    expect(figures.replace("at most 500 ms", "")).not.toMatch(/\d\s*(ms|MiB)\b/);
  });

  it("states the publisher rate the bench uses, as BENCHMARKS.md does", () => {
    const rate = /maxPerSec: ([\d_]+)/.exec(bench)?.[1];
    expect(rate).toBeDefined();
    const shown = Number(rate?.replaceAll("_", "")).toLocaleString("en-US");
    expect(figures).toContain(`\`maxPerSec\` ${shown}`);
    expect(section(read("BENCHMARKS.md"), "Results").length).toBeGreaterThan(0);
    expect(read("BENCHMARKS.md")).toContain(`\`maxPerSec\` ${shown}`);
  });
});
