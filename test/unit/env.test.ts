import { describe, expect, it } from "vitest";
import { extend, find, flatten, isPath, resolvePath, rootEnv } from "../../machines/language/env.js";
import { evaluateTest } from "../../machines/language/expression.js";

describe("lexical environment", () => {
  const root = rootEnv({ user: { name: "Ada" }, topic: "sea", results: [{ name: "first" }, { name: "second" }] });

  it("finds names, dotted and indexed paths, walking outward", () => {
    const inner = extend(root, { topic: "sky" });
    expect(find(inner, "topic")).toEqual({ found: true, value: "sky" });
    expect(find(inner, "user.name")).toEqual({ found: true, value: "Ada" });
    expect(find(inner, "results[1].name")).toEqual({ found: true, value: "second" });
    expect(find(inner, "results.0.name")).toEqual({ found: true, value: "first" });
    expect(find(root, "topic")).toEqual({ found: true, value: "sea" });
  });

  it("does not fall through to outer frames once a frame binds the name", () => {
    const inner = extend(root, { user: { id: 7 } });
    expect(find(inner, "user.name")).toEqual({ found: false });
  });

  it("reports missing names, out-of-range indexes and prototype members as not found", () => {
    for (const path of ["nope", "results[5]", "topic[0]", "user.constructor", "user.name.first", "a b"]) {
      expect(find(root, path), path).toEqual({ found: false });
    }
  });

  it("is plain JSON and flattens with inner frames winning", () => {
    const inner = extend(root, { topic: "sky", extra: 1 });
    expect(JSON.parse(JSON.stringify(inner))).toEqual(inner);
    expect(flatten(inner)).toMatchObject({ topic: "sky", extra: 1, user: { name: "Ada" } });
  });

  it("recognises variable paths", () => {
    expect(isPath("results[1].name")).toBe(true);
    expect(isPath('"literal"')).toBe(false);
    expect(isPath("f(a)")).toBe(false);
    expect(resolvePath({ "a.b": 1 }, "a.b")).toEqual({ found: true, value: 1 });
  });
});

describe("test expressions (no eval)", () => {
  const env = rootEnv({ score: "4", kind: "fix", flags: { urgent: true }, list: [1, 2], empty: "" });

  it.each([
    ['score >= 3 && kind == "fix"', true],
    ["score > 4 || flags.urgent", true],
    ["!(score == 4)", false],
    ['kind === "fix" && score === "4"', true],
    ["score === 4", false],
    ["list[1] == 2", true],
    ["flags?.urgent == true", true],
    ["missing == null", true],
    ["missing", false],
    ["empty", false],
    ["'a' < 'b'", true],
    ["kind != 'bug'", true],
  ])("%s → %s", (text, value) => {
    expect(evaluateTest(text, env)).toEqual({ ok: true, value });
  });

  it.each(["score >=", "(score == 4", "score == 4 )", "a ; b", ""])("reports a syntax error in %j instead of throwing", (text) => {
    expect(evaluateTest(text, env).ok).toBe(false);
  });
});
