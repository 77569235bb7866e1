/**
 * docs/inspector.md does not quote its own benchmark figures (they drift from BENCHMARKS.md, which every
 * `npm run bench` rewrites): it refers to BENCHMARKS.md and states the publisher rate the bench really uses. Its
 * Security section states the page's Content-Security-Policy as sent, and the listening and host flags that exist.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PAGE_CSP } from "../../runtime/inspect/server.js";

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

describe("docs/inspector.md, Security", () => {
  const security = section(read("docs/inspector.md"), "Security").replace(/`/g, "").replace(/\s+/g, " ");
  const cli = read("runtime/cli/inspect.ts");

  it("states the page's Content-Security-Policy as the server sends it", () => {
    expect(security).toContain(PAGE_CSP);
  });

  it("describes every listening and host flag of dirigent inspect, and the refusals", () => {
    for (const flag of ["--host", "--allowed-host", "--stately-host", "--port", "--stately-port"]) {
      expect(cli).toContain(`"${flag} <`);
      expect(security).toContain(flag);
    }
    for (const text of ["421 Misdirected Request", "403", "127.0.0.1:4280", "127.0.0.1:8080", "https://stately.ai"])
      expect(security).toContain(text);
  });
});
