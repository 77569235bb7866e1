import { describe, expect, it } from "vitest";
import { readTemplateCall, templateToolCollisions, templateToolDefinition } from "../../actors/handler/template-tools.js";
import { templateToolsOf } from "../../actors/library/template-tools.js";
import { templatesOfFile } from "../../actors/library/entries.js";
import { createLibrary } from "../../actors/library/library.js";
import type { TemplateTool } from "../../protocol/index.js";

const library = createLibrary([
  ...templatesOfFile(
    "lib/tools.xml",
    `<template name="greet" params="who"><task><description>Greet {{who}}</description></task></template>
<task name="count" type="atomic">
  <parameters><parameter name="items" type="array">What to count.</parameter><parameter name="min" type="number" required="false"/><parameter name="note" type="DataSet" default="x"/></parameters>
  <description>Count {{items}}</description>
</task>`,
  ).templates,
  ...templatesOfFile("lib/plain.xml", `<task name="plain"><description>PLAIN</description></task>`).templates,
]);

const call = (name: string, args: unknown) => ({
  id: "c1",
  type: "function" as const,
  function: { name, arguments: JSON.stringify(args) },
});

describe("templateToolsOf", () => {
  it("describes function templates by their declared parameters", () => {
    const tools = templateToolsOf(library, ["greet", "count", "greet"]);
    expect(tools.map((t) => t.name)).toEqual(["greet", "count"]);
    expect(tools[0]?.params).toEqual([{ name: "who", required: true }]);
    expect(tools[0]?.description).toContain("The template's task: Greet {{who}}");
    expect(tools[1]?.params).toEqual([
      { name: "items", type: "array", required: true, description: "What to count." },
      { name: "min", type: "number", required: false },
      { name: "note", type: "DataSet", required: false },
    ]);
  });

  it("names every name that is no function template", () => {
    expect(() => templateToolsOf(library, ["plain", "nowhere"])).toThrow(
      /'plain' \(lib\/plain\.xml\) is a atomic task, not a function template.*'nowhere' is not a template of the library/,
    );
  });
});

describe("a template tool in the Handler", () => {
  const [, count] = templateToolsOf(library, ["greet", "count"]) as [TemplateTool, TemplateTool];

  it("has a JSON Schema built from the parameters (unknown types accept anything)", () => {
    expect(templateToolDefinition(count).function.parameters).toEqual({
      type: "object",
      properties: { items: { type: "array", description: "What to count." }, min: { type: "number" }, note: {} },
      required: ["items"],
      additionalProperties: false,
    });
  });

  it("reads a valid call as a subtask_request naming the template", () => {
    expect(readTemplateCall(call("count", { items: [1, 2], note: { any: true } }), [count])).toEqual({
      continuation: {
        toolCallId: "c1",
        kind: "subtask",
        note: "subtask_request",
        request: {
          type: "atomic",
          description: "library template 'count' called as a tool",
          inputs: { items: [1, 2], note: { any: true } },
          template_hints: ["count"],
        },
      },
    });
    expect(readTemplateCall(call("other", {}), [count])).toBeUndefined();
  });

  it("answers arguments that do not fit with every problem", () => {
    expect(readTemplateCall(call("count", { items: "a", min: "1", extra: 1 }), [count])).toEqual({
      problem: "error: invalid arguments for 'count': extra: not a parameter of 'count'; items: expected array; min: expected number",
    });
    expect(readTemplateCall(call("count", [1]), [count])).toEqual({
      problem: "error: invalid arguments for 'count': (arguments): expected an object",
    });
    expect(readTemplateCall({ ...call("count", {}), function: { name: "count", arguments: "{" } }, [count])).toMatchObject({
      problem: expect.stringMatching(/^error: the arguments of 'count' are not valid JSON/),
    });
    expect(readTemplateCall(call("count", {}), [count])).toEqual({ problem: "error: invalid arguments for 'count': items: required" });
  });

  it("finds names other tools of the session already have", () => {
    expect(templateToolCollisions([count, count], ["read_file"])).toEqual(["count"]);
    expect(templateToolCollisions([{ ...count, name: "read_file" }], ["read_file", "run_subtask"])).toEqual(["read_file"]);
  });
});
