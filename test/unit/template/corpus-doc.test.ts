/**
 * docs/corpus.md lists every seeds-xml example and whether it executes end to end; the table is generated from
 * test/support/corpus.ts (which test/integration/corpus-run.test.ts runs). Regenerate it after a change with
 * `DIRIGENT_WRITE_CORPUS_DOC=1 npx vitest run test/unit/template/corpus-doc.test.ts`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseTemplate } from "../../../machines/language/parse.js";
import {
  corpusIndex,
  corpusTable,
  corpusText,
  EMPTY,
  NOT_RUN,
  REFUSED,
  RUNS,
  TABLE_BEGIN,
  TABLE_END,
  unclassified,
} from "../../support/corpus.js";

const DOC = join(import.meta.dirname, "../../../docs/corpus.md");

describe("docs/corpus.md", () => {
  it("classifies every template example exactly once", () => {
    expect(unclassified()).toEqual([]);
    const ids = new Set(corpusIndex().map((e) => e.id));
    for (const id of [...RUNS.flatMap((r) => [r.id, ...(r.with ?? [])]), ...Object.keys(NOT_RUN)]) expect(ids.has(id), id).toBe(true);
    for (const run of RUNS) expect(NOT_RUN[run.id], run.id).toBeUndefined();
  });

  it("checks refusals and skeletons only of examples the table says do not run, with the reason it states", () => {
    for (const [id, refusal] of Object.entries(REFUSED)) {
      expect(NOT_RUN[id], id).toBeDefined();
      expect(NOT_RUN[id], id).toContain(`\`${refusal.reason}\``);
    }
    for (const id of EMPTY) expect(NOT_RUN[id], id).toContain("completes with no work");
  });

  it("lists as runnable only examples that parse and have an entry", () => {
    for (const run of RUNS) {
      const parsed = parseTemplate([...(run.with ?? []), run.id].map((id) => corpusText(id)).join("\n"));
      expect(parsed.ok && parsed.document.entry !== undefined, run.id).toBe(true);
    }
  });

  it("holds the generated table", () => {
    const stored = readFileSync(DOC, "utf8");
    const begin = stored.indexOf(TABLE_BEGIN);
    const end = stored.indexOf(TABLE_END);
    expect(begin, "docs/corpus.md lacks the table markers").toBeGreaterThanOrEqual(0);
    expect(end).toBeGreaterThan(begin);
    const table = corpusTable();
    const fresh = `${stored.slice(0, begin + TABLE_BEGIN.length)}\n${table}${stored.slice(end)}`;
    if (process.env["DIRIGENT_WRITE_CORPUS_DOC"] === "1") writeFileSync(DOC, fresh);
    expect(
      stored,
      "docs/corpus.md is stale: regenerate it with DIRIGENT_WRITE_CORPUS_DOC=1 npx vitest run test/unit/template/corpus-doc.test.ts",
    ).toBe(fresh);
  });

  it("states the number of runnable examples", () => {
    const stored = readFileSync(DOC, "utf8");
    expect(stored).toContain(`**${RUNS.length} examples** execute end to end`);
  });
});
