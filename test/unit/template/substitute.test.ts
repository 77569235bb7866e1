import { describe, expect, it } from "vitest";
import { type Lookup, resolvePath, substitute } from "../../../machines/language/substitute.js";

const bindings: Record<string, unknown> = {
  name: "Ada",
  count: 3,
  ok: false,
  nothing: null,
  gone: undefined,
  user: { name: "Grace", tags: ["a", "b"], address: { city: "Arlington" } },
  results: [{ name: "first" }, { name: "second", score: 0.5 }],
  "dotted.key": "literal key",
};
const lookup: Lookup = (path) => resolvePath(bindings, path);

describe("substitute", () => {
  it("replaces simple, dotted and indexed paths", () => {
    expect(
      substitute("Hi {{name}} from {{user.address.city}}; {{results[1].name}} {{user.tags[0]}} {{user.tags.1}}", lookup, "strict"),
    ).toEqual({
      ok: true,
      text: "Hi Ada from Arlington; second a b",
    });
  });

  it("inserts strings as-is and everything else as JSON", () => {
    const out = substitute("{{count}} {{ok}} {{nothing}} {{user.tags}} {{results[1]}} {{name}}", lookup, "strict");
    expect(out).toEqual({ ok: true, text: '3 false null ["a","b"] {"name":"second","score":0.5} Ada' });
  });

  it("tolerates whitespace inside the braces", () => {
    expect(substitute("{{ name }}", lookup, "strict")).toEqual({ ok: true, text: "Ada" });
  });

  it("reports every missing variable once, in order, in strict mode (C13)", () => {
    const out = substitute("{{a}} {{name}} {{b.c}} {{a}} {{results[5].name}} {{gone}}", lookup, "strict");
    expect(out).toEqual({ ok: false, missing: ["a", "b.c", "results[5].name", "gone"] });
  });

  it("leaves the {{undefined:name}} marker in lenient mode, and keeps it stable on a second pass", () => {
    const once = substitute("x {{missing}} {{name}}", lookup, "lenient");
    expect(once).toEqual({ ok: true, text: "x {{undefined:missing}} Ada" });
    if (once.ok) expect(substitute(once.text, lookup, "strict")).toEqual(once);
  });

  it("leaves inline function calls and non-path braces untouched", () => {
    const text = 'r: {{calculate_metrics(data, method="advanced")}} {{ not a path }} {{}} {{a|b}} {"k": {"v": 1}}';
    expect(substitute(text, lookup, "strict")).toEqual({ ok: true, text });
  });

  it("does not substitute inside inserted values", () => {
    const values: Record<string, unknown> = { a: "{{b}}", b: "secret" };
    expect(substitute("{{a}}", (p) => resolvePath(values, p), "strict")).toEqual({ ok: true, text: "{{b}}" });
  });

  it("returns text without placeholders unchanged", () => {
    expect(substitute("plain { text }", lookup, "strict")).toEqual({ ok: true, text: "plain { text }" });
  });

  it("stringifies values JSON cannot encode", () => {
    const values: Record<string, unknown> = { big: 10n };
    expect(substitute("{{big}}", (p) => resolvePath(values, p), "strict")).toEqual({ ok: true, text: "10" });
  });
});

describe("resolvePath", () => {
  it("finds own properties, array items and a whole-path key", () => {
    expect(resolvePath(bindings, "user.name")).toEqual({ found: true, value: "Grace" });
    expect(resolvePath(bindings, "results[0]")).toEqual({ found: true, value: { name: "first" } });
    expect(resolvePath(bindings, "dotted.key")).toEqual({ found: true, value: "literal key" });
    expect(resolvePath(bindings, " name ")).toEqual({ found: true, value: "Ada" });
    expect(resolvePath(bindings, "nothing")).toEqual({ found: true, value: null });
  });

  it("does not find prototype members, out-of-range items or indexes into non-arrays", () => {
    for (const path of [
      "constructor",
      "user.toString",
      "__proto__",
      "results[2]",
      "user[0]",
      "name[0]",
      "name.length",
      "gone",
      "a b",
      "",
    ]) {
      expect(resolvePath(bindings, path), path).toEqual({ found: false });
    }
  });
});

describe("step results as text", () => {
  const bindings = {
    step_results: [{ content: '["a.py"]', status: "COMPLETE", parsedContent: ["a.py"], notes: { n: 1 } }],
    other: { content: "x", status: "COMPLETE", extra: true },
  };
  const lookup = (p: string) => resolvePath(bindings, p);

  it("inserts a step result as its content, and its fields by path", () => {
    expect(substitute("{{step_results[0]}} / {{step_results[0].parsedContent[0]}} / {{step_results[0].status}}", lookup, "strict")).toEqual(
      {
        ok: true,
        text: '["a.py"] / a.py / COMPLETE',
      },
    );
  });

  it("inserts any other object as JSON, and a list of step results as JSON", () => {
    expect(substitute("{{other}}", lookup, "strict")).toEqual({ ok: true, text: '{"content":"x","status":"COMPLETE","extra":true}' });
    expect(substitute("{{step_results}}", lookup, "strict")).toMatchObject({
      ok: true,
      text: expect.stringContaining('"parsedContent":["a.py"]'),
    });
  });
});
