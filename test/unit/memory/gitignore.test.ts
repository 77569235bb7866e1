import { describe, expect, it } from "vitest";
import { compileGlob, GlobError, IgnoreFile, IgnoreStack } from "../../../runtime/indexer/gitignore.js";

describe("globs", () => {
  it("matches names at any depth without a slash, and paths from the root with one", () => {
    const ts = compileGlob("*.ts");
    expect(ts("a.ts")).toBe(true);
    expect(ts("src/deep/a.ts")).toBe(true);
    expect(ts("a.tsx")).toBe(false);
    const src = compileGlob("src/**/*.{ts,js}");
    expect(src("src/a.ts")).toBe(true);
    expect(src("src/x/y/a.js")).toBe(true);
    expect(src("lib/src/a.ts")).toBe(false);
    expect(compileGlob("docs/**")("docs/a/b.md")).toBe(true);
    expect(compileGlob("file?.[ch]")("file1.c")).toBe(true);
  });

  it("rejects a bad glob, naming it", () => {
    expect(() => compileGlob("src/[abc")).toThrow(GlobError);
    expect(() => compileGlob("src/[abc")).toThrow("glob 'src/[abc'");
    expect(() => compileGlob("{a,b")).toThrow("glob '{a,b': '{' is never closed");
    expect(() => compileGlob(" ")).toThrow("glob is empty");
  });
});

describe(".gitignore rules", () => {
  const file = new IgnoreFile(
    ["# comment", "", "*.log", "!keep.log", "build/", "/top.txt", "docs/*.tmp", "**/cache", "\\#hash", "trailing   "].join("\n"),
  );

  it("applies patterns, negation, dir-only, anchoring and escapes", () => {
    expect(file.verdict("a.log", false)).toBe(true);
    expect(file.verdict("x/keep.log", false)).toBe(false);
    expect(file.verdict("build", true)).toBe(true);
    expect(file.verdict("build", false)).toBeUndefined();
    expect(file.verdict("top.txt", false)).toBe(true);
    expect(file.verdict("sub/top.txt", false)).toBeUndefined();
    expect(file.verdict("docs/a.tmp", false)).toBe(true);
    expect(file.verdict("docs/x/a.tmp", false)).toBeUndefined();
    expect(file.verdict("a/b/cache", true)).toBe(true);
    expect(file.verdict("#hash", false)).toBe(true);
    expect(file.verdict("trailing", false)).toBe(true);
  });

  it("lets a nested file override its ancestors, relative to its own directory", () => {
    const stack = new IgnoreStack().with("", new IgnoreFile("*.gen.ts\n")).with("pkg", new IgnoreFile("!keep.gen.ts\n/local.txt\n"));
    expect(stack.ignores("pkg/a.gen.ts", false)).toBe(true);
    expect(stack.ignores("pkg/keep.gen.ts", false)).toBe(false);
    expect(stack.ignores("pkg/local.txt", false)).toBe(true);
    expect(stack.ignores("local.txt", false)).toBe(false);
  });
});
