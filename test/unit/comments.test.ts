/**
 * Comments and docs stand alone: they never send the reader to the seed notes, a document outside the repository
 * (`SEED-NOTES`, a bare `§3.4`). Design decisions are explained where they are cited or in docs/design.md, whose
 * entries every `design.md#…` link and every cited decision id (`C17`) must find.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

function files(dir: string, ext: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path, ext) : path.endsWith(ext) ? [path] : [];
  });
}

/** Source files of the layers, and the docs. */
const SOURCES = ["protocol", "machines", "actors", "runtime"].flatMap((dir) => files(join(root, dir), ".ts"));
const DOCS = readdirSync(join(root, "docs"))
  .filter((name) => name.endsWith(".md"))
  .map((name) => join(root, "docs", name));

/** Every line of `paths` that matches `pattern`, as `file:line: text`. */
function hits(paths: string[], pattern: RegExp): string[] {
  return paths.flatMap((path) =>
    readFileSync(path, "utf8")
      .split("\n")
      .flatMap((text, i) => (pattern.test(text) ? [`${relative(root, path)}:${i + 1}: ${text.trim()}`] : [])),
  );
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}_ -]/gu, "")
    .replace(/ /g, "-");
}

const design = readFileSync(join(root, "docs/design.md"), "utf8");
const headings = [...design.matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1] ?? "");
const anchors = new Set(headings.map(slug));

describe("comments and docs stand alone", () => {
  it("no source file or doc cites the seed notes (SEED-NOTES, a bare § section)", () => {
    expect(hits([...SOURCES, ...DOCS], /SEED-NOTES|§\s*\d/)).toEqual([]);
  });

  it("every link to docs/design.md finds its entry", () => {
    const tests = files(join(root, "test"), ".ts");
    const broken = hits([...SOURCES, ...tests, ...DOCS, join(root, "README.md")], /design\.md#/).filter((line) =>
      [...line.matchAll(/design\.md#([\w-]+)/g)].some((m) => !anchors.has(m[1] ?? "")),
    );
    expect(broken).toEqual([]);
  });

  it("every decision id still cited (C1…C26) has its entry in docs/design.md", () => {
    const ids = new Set(headings.flatMap((h) => /^(C\d+):/.exec(h)?.[1] ?? []));
    const tests = files(join(root, "test"), ".ts");
    const unknown = hits([...SOURCES, ...tests, ...DOCS], /\bC\d{1,2}\b/).filter((line) =>
      [...line.matchAll(/\bC(\d{1,2})\b/g)].some((m) => !ids.has(`C${m[1] ?? ""}`)),
    );
    expect(unknown).toEqual([]);
  });
});
