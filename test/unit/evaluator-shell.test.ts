import { describe, expect, it } from "vitest";
import { expandText, parseInlineCall } from "../../actors/evaluator/inline.js";
import { checkParam, entryPath, nodeAt, summarize } from "../../actors/evaluator/nodes.js";
import { argumentValue } from "../../actors/evaluator/walk.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { rootEnv } from "../../machines/language/env.js";
import type { TaskResult } from "../../protocol/index.js";

function parse(xml: string) {
  const parsed = parseTemplate(xml);
  if (!parsed.ok) throw new Error(parsed.error.message);
  return parsed.document;
}

describe("node paths", () => {
  const doc = parse(`<template name="f" params="x"><task><description>F {{x}}</description></task></template>
<task type="reduce">
  <initial_value><task><description>init</description></task></initial_value>
  <inputs><input name="a"><task><description>nested</description></task></input></inputs>
  <inner_task><description>inner</description></inner_task>
  <reduction_task><description>reduce</description></reduction_task>
</task>`);

  it("resolves the entry, fields, list indexes and template bodies to typed nodes", () => {
    expect(entryPath(doc)).toBe("0");
    expect(nodeAt(doc, "0")).toMatchObject({ kind: "task", type: "reduce" });
    expect(nodeAt(doc, "0.innerTask")).toMatchObject({ kind: "task", description: "inner" });
    expect(nodeAt(doc, "0.initialValue.task")).toMatchObject({ description: "init" });
    expect(nodeAt(doc, "0.inputs.0.task")).toMatchObject({ description: "nested" });
    expect(nodeAt(doc, "templates.0.body")).toMatchObject({ description: "F {{x}}" });
  });

  it("answers undefined for paths that do not lead to an executable node", () => {
    for (const path of ["1", "0.steps.0", "0.inputs.0", "0.loc", "templates.3.body", "x", "0.inputs.constructor"])
      expect(nodeAt(doc, path), path).toBeUndefined();
  });

  it("summarises a node as plain data", () => {
    const node = nodeAt(doc, "0");
    expect(node && summarize(node)).toEqual({
      kind: "task",
      type: "reduce",
      loc: { line: 2, col: 1 },
      inputTasks: true,
      initialValue: "",
      initialTask: true,
    });
  });

  it("marks a task with a nested task among its inputs (bound by an actor), not one whose inputs are variables or literals", () => {
    const plain = parse(
      `<task><inputs><input name="a" from="x"/><input name="b">literal</input></inputs><description>d</description></task>`,
    );
    const fromWins = parse(
      `<task><inputs><input name="a" from="x"><task><description>n</description></task></input></inputs><description>d</description></task>`,
    );
    const nested = parse(
      `<task><inputs><input name="a">lit</input><input name="b"><task><description>n</description></task></input></inputs><description>d</description></task>`,
    );
    const summary = (doc: ReturnType<typeof parse>) => summarize(nodeAt(doc, "0") ?? expect.fail("no entry"));
    expect(summary(plain).inputTasks).toBeUndefined();
    expect(summary(fromWins).inputTasks).toBeUndefined();
    expect(summary(nested).inputTasks).toBe(true);
  });
});

describe("arguments", () => {
  const env = rootEnv({ user: "Ada", list: [1, 2] });

  it.each([
    ["user", "Ada"],
    ["list[1]", 2],
    ["stranger", "stranger"],
    ['"user"', "user"],
    ["'a, b'", "a, b"],
    ["3", 3],
    ["-2.5", -2.5],
    ["true", true],
    ["none", null],
    ["hi {{user}}", "hi Ada"],
  ])("%s → %j (variable first, literal second)", (text, value) => {
    expect(argumentValue(text, env)).toEqual({ value });
  });

  it("reports a missing variable inside a substituted argument", () => {
    expect(argumentValue("hi {{nobody}}", env)).toEqual({ missing: ["nobody"] });
  });

  it("parses inline calls with quoted commas and named arguments", () => {
    expect(parseInlineCall(`f(a, "b, c", 3, k=v, s = 'x=y')`)).toEqual({
      template: "f",
      args: [{ text: "a" }, { text: '"b, c"' }, { text: "3" }, { name: "k", text: "v" }, { name: "s", text: "'x=y'" }],
    });
    expect(parseInlineCall("f()")).toEqual({ template: "f", args: [] });
    expect(parseInlineCall("x == y")).toBeUndefined();
    expect(parseInlineCall('f("open)')).toBeUndefined();
  });

  it.each([
    ["integer", "3", { ok: true, value: 3 }],
    ["integer", "3.5", { ok: false }],
    ["number", "3.5", { ok: true, value: 3.5 }],
    ["boolean", "false", { ok: true, value: false }],
    ["array", "[1,2]", { ok: true, value: [1, 2] }],
    ["object", "[1,2]", { ok: false }],
    ["string", 4, { ok: false }],
    ["DataSet", 4, { ok: true, value: 4 }],
    [undefined, "x", { ok: true, value: "x" }],
  ])("checks type %s of %j", (type, value, expected) => {
    expect(checkParam(type, value)).toEqual(expected);
  });
});

describe("expandText", () => {
  const env = rootEnv({ name: "Ada", data: { n: 1 } });
  const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });

  it("substitutes variables and inline calls in one pass, never re-scanning what it inserted", async () => {
    const calls: string[] = [];
    const out = await expandText(
      "{{name}} {{data}} {{f(name)}} {{ not a path }}",
      rootEnv({ ...env.bindings, name: "{{g()}}" }),
      async (c) => {
        calls.push(c.template);
        return ok("{{name}}");
      },
    );
    expect(out).toEqual({ ok: true, text: '{{g()}} {"n":1} {{name}} {{ not a path }}' });
    expect(calls).toEqual(["f"]);
  });

  it("collects every missing variable, and fails with a failing call's result", async () => {
    expect(await expandText("{{a}} {{b}} {{a}}", env, async () => ok(""))).toEqual({ ok: false, missing: ["a", "b"] });
    const failed: TaskResult = { content: "", status: "FAILED", notes: {} };
    expect(await expandText("{{f()}}", env, async () => failed)).toEqual({ ok: false, result: failed });
  });
});
