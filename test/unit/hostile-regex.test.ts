/**
 * The scans that replaced super-linear regular expressions on model output and user input: they give what the old
 * expressions gave (compared on many random short strings), and they finish on 100,000-character inputs crafted
 * against the old expressions, which backtracked quadratically on them (minutes at this size).
 */
import { describe, expect, it } from "vitest";
import { camelParts, words } from "../../actors/memory/rank.js";
import { describe as describeFile } from "../../runtime/indexer/describe.js";
import { identifiersOf } from "../../runtime/indexer/identifiers.js";
import { applyOutputFormat, fitsSchema, unfenced } from "../../actors/evaluator/output-format.js";
import { parseVerdict } from "../../protocol/checkmate.js";
import { fencedBlock, withoutFenceMarks } from "../../protocol/fence.js";
import { jsonOfAnswer } from "../../protocol/goals.js";
import type { TaskResult } from "../../protocol/index.js";
import type { TaskNode } from "../../machines/language/ast.js";

const N = 100_000;

/** The expressions the scans replaced, as references on short strings. */
const OLD = {
  fencedBlock: (text: string) => /```(?:json|JSON)?\s*\n?([\s\S]*?)```/.exec(text)?.[1],
  unfenced: (content: string) => {
    const trimmed = content.trim();
    return (/^```[ \t]*(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n?```$/i.exec(trimmed)?.[1] ?? trimmed).trim();
  },
  withoutFenceMarks: (text: string) => text.replace(/^```(?:json)?\s*|\s*```$/g, ""),
  camelParts: (token: string) =>
    token
      .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
      .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
      .split(" "),
};

/** Random strings over `alphabet`, deterministic. */
function* strings(alphabet: readonly string[], count: number, maxLength: number): Generator<string> {
  let seed = 12_345;
  const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
  for (let i = 0; i < count; i++) {
    const length = next() % (maxLength + 1);
    let text = "";
    for (let j = 0; j < length; j++) text += alphabet[next() % alphabet.length];
    yield text;
  }
}

const FENCE_ALPHABET = ["`", "```", "json", "JSON", "Json", " ", "\t", "\r", "\n", "\r\n", "x", "{", "}", "\u00a0"];

describe("scans equal the expressions they replaced", () => {
  it("fencedBlock", () => {
    for (const text of strings(FENCE_ALPHABET, 5_000, 10)) expect(fencedBlock(text), JSON.stringify(text)).toBe(OLD.fencedBlock(text));
  });

  it("unfenced", () => {
    for (const text of strings(FENCE_ALPHABET, 5_000, 10)) expect(unfenced(text), JSON.stringify(text)).toBe(OLD.unfenced(text));
  });

  it("withoutFenceMarks", () => {
    for (const text of strings(FENCE_ALPHABET, 5_000, 10))
      expect(withoutFenceMarks(text), JSON.stringify(text)).toBe(OLD.withoutFenceMarks(text));
  });

  it("camelParts", () => {
    for (const text of strings(["a", "B", "c", "D", "0", "9", "X", "y"], 5_000, 10))
      expect(camelParts(text), text).toEqual(OLD.camelParts(text));
    expect(camelParts("HTMLParser")).toEqual(["HTML", "Parser"]);
    expect(camelParts("parseXml2Go")).toEqual(["parse", "Xml2", "Go"]);
  });
});

describe("hostile 100,000-character inputs", () => {
  it("a judge's or planner's answer: an opening fence and a long run of whitespace, no closing fence", () => {
    for (const text of ["```" + " ".repeat(N), "```json" + "\n".repeat(N) + "{}", "```" + " \n".repeat(N / 2)]) {
      expect(fencedBlock(text)).toBeUndefined();
      expect(jsonOfAnswer(text)).toBe(text.includes("{") ? "{}" : text.trim());
      expect(parseVerdict(text).ok).toBe(false);
    }
    expect(jsonOfAnswer("```json" + " ".repeat(N) + '{"a":1}```')).toBe('{"a":1}');
  });

  it("an evaluation's answer: long whitespace before the end, or a closing fence after it", () => {
    expect(withoutFenceMarks("a" + " ".repeat(N) + "b")).toBe("a" + " ".repeat(N) + "b");
    expect(withoutFenceMarks("```json" + " ".repeat(N) + '{"success":true}' + " ".repeat(N) + "```")).toBe('{"success":true}');
  });

  it("a task's JSON output: an opening fence and a long run of blanks", () => {
    const content = "```" + " ".repeat(N) + "x";
    expect(unfenced(content)).toBe(content);
    expect(unfenced("```json" + "\t".repeat(N) + "\n[1]\n```")).toBe("[1]");
  });

  it("an output schema of a long run of '[]' not at the end, or at the end with a value nested as deep", () => {
    const result = (content: string) => ({ status: "COMPLETE", content, notes: {} }) as unknown as TaskResult;
    const task = (type: string) => ({ kind: "task", type: "atomic", returns: { type } }) as unknown as TaskNode;
    // An unknown type name accepts every value.
    expect(applyOutputFormat(task(`${"[]".repeat(N / 2)}x`), result("[1]")).status).toBe("COMPLETE");
    const deep = "[".repeat(N / 2) + "]".repeat(N / 2);
    expect(applyOutputFormat(task(`string${"[]".repeat(N / 2)}`), result(deep)).status).toBe("COMPLETE");
    const refused = applyOutputFormat(task("string[]"), result(deep));
    expect(refused.status).toBe("FAILED");
    expect(refused.error?.message).toContain("expected string[]");
    expect(fitsSchema(`number ${"[] ".repeat(N / 3)}`, JSON.parse("[".repeat(N / 3) + "1" + "]".repeat(N / 3)))).toBe(true);
  });

  it("file text crafted against the description's expressions (memory indexing)", () => {
    const texts = [
      "# " + "[".repeat(N),
      "# a" + " ".repeat(N) + "b#",
      "#" + "#".repeat(N) + "x",
      "# T\n\n" + "<".repeat(N),
      "# T\n\n" + "[x](".repeat(N / 4),
      "/" + "/** a".repeat(N / 5),
      "//" + " a".repeat(N / 2),
      "export {" + " a".repeat(N / 2),
      "module.exports = {" + "a,".repeat(N / 2),
      "const f = (" + "(".repeat(N),
      "test('" + "a".repeat(N),
      "x".repeat(N) + ".",
      " ".repeat(N) + "f(" + "a".repeat(N),
      "import {" + "a ".repeat(N / 2),
      "{" + " a".repeat(N / 2) + "} =",
      "'" + "a".repeat(N),
      "function " + "*".repeat(N),
      "x" + " = ".repeat(N / 3),
      "`" + "a".repeat(60) + "`".repeat(N),
    ];
    const started = performance.now();
    for (const text of texts)
      for (const name of ["/r/a.md", "/r/a.js", "/r/a.py", "/r/a.json", "/r/a.go"]) {
        expect(describeFile(name, text).length).toBeLessThanOrEqual(240);
        expect(identifiersOf(name, text).length).toBeLessThanOrEqual(1000);
      }
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it("file text with a long run of capitals (memory indexing)", () => {
    expect(camelParts("A".repeat(N) + "b")).toEqual(["A".repeat(N - 1), "Ab"]);
    expect(words(`x ${"A".repeat(N)}bC`)).toContain("ab");
  });
});
