import { describe, expect, it } from "vitest";
import { parseTemplate } from "../../../machines/language/parse.js";
import type {
  CallNode,
  CondNode,
  FragmentNode,
  ParseOutcome,
  TaskNode,
  TemplateDocument,
  TemplateError,
  TemplateWarning,
} from "../../../machines/language/ast.js";

function parsed(xml: string): { document: TemplateDocument; warnings: readonly TemplateWarning[] } {
  const outcome = parseTemplate(xml);
  if (!outcome.ok) throw new Error(`expected ok, got ${outcome.error.message} at ${outcome.error.line}:${outcome.error.col}`);
  return outcome;
}

function failure(xml: string): TemplateError {
  const outcome: ParseOutcome = parseTemplate(xml);
  if (outcome.ok) throw new Error("expected INVALID_TEMPLATE, got ok");
  expect(outcome.error.code).toBe("INVALID_TEMPLATE");
  return outcome.error;
}

function entryTask(xml: string): TaskNode {
  const entry = parsed(xml).document.entry;
  if (entry?.kind !== "task") throw new Error(`expected a task entry, got ${entry?.kind}`);
  return entry;
}

function kinds(warnings: readonly TemplateWarning[]): string[] {
  return warnings.map((w) => w.kind);
}

describe("parseTemplate: tasks", () => {
  it("parses a minimal atomic task with type defaulting to atomic (C26)", () => {
    const task = entryTask("<task><description>  Say hi to {{name}}  </description></task>");
    expect(task).toMatchObject({ kind: "task", type: "atomic", description: "Say hi to {{name}}", loc: { line: 1, col: 1 } });
    expect(task.inputs).toEqual([]);
    expect(task.extra).toEqual([]);
  });

  it("keeps inner lines of a description and trims only its ends", () => {
    const task = entryTask("<task>\n  <description>\n    line one\n      line two\n  </description>\n</task>");
    expect(task.description).toBe("line one\n      line two");
  });

  it("keeps markup, CDATA and character references inside prose", () => {
    const task = entryTask(
      "<task><description>Use <b>bold</b> &amp; <![CDATA[a < b]]> &#65;<!-- note --></description>" +
        "<system>x &lt; y &#x42;</system></task>",
    );
    expect(task.description).toBe("Use <b>bold</b> & a < b A");
    expect(task.system).toBe("x < y B");
  });

  it("locates nodes in the user's text after comments, a BOM, an XML declaration and CRLF line ends", () => {
    const { document } = parsed('\ufeff<?xml version="1.0"?><!-- c --><task><description>a</description></task>');
    expect(document.entry?.loc).toEqual({ line: 1, col: 33 });
    const crlf = entryTask('<task>\r\n  <inputs>\r\n    <input name="a" from="b"/>\r\n  </inputs>\r\n</task>');
    expect(crlf.inputs[0]?.loc).toEqual({ line: 3, col: 5 });
  });

  it("reads attributes, prose children, model, criteria and flags", () => {
    const task = entryTask(`<task type="atomic" subtype="director" name="n" ref="r" interactive="true">
      <instructions>Do it</instructions><system>Be brief</system><provider>anthropic</provider>
      <model preferred="m1" fallback="m2, m3"/><criteria><item>a</item><item>b</item></criteria>
      <manual_xml>false</manual_xml><disable_reparsing>TRUE</disable_reparsing></task>`);
    expect(task).toMatchObject({
      subtype: "director",
      name: "n",
      ref: "r",
      instructions: "Do it",
      system: "Be brief",
      provider: "anthropic",
      criteria: ["a", "b"],
      manualXml: false,
      disableReparsing: true,
      attributes: { interactive: "true" },
    });
    expect(task.model).toMatchObject({ kind: "model", name: "m1", fallback: ["m2", "m3"] });
  });

  it("reads inputs: from, literal value, nested task and description, in order", () => {
    const task = entryTask(`<task><inputs>
      <input name="a" from="env.x"/>
      <input name="b">  literal  </input>
      <input name="c"><task><description>load</description></task></input>
      <input name="d"><description>what d is</description></input>
    </inputs><input name="e">direct</input></task>`);
    expect(task.inputs.map((i) => i.name)).toEqual(["a", "b", "c", "d", "e"]);
    expect(task.inputs[0]).toMatchObject({ from: "env.x" });
    expect(task.inputs[1]).toMatchObject({ value: "literal" });
    expect(task.inputs[2]?.value).toBeUndefined();
    expect(task.inputs[2]?.task).toMatchObject({ kind: "task", description: "load" });
    expect(task.inputs[3]).toMatchObject({ description: "what d is" });
  });

  it("reads context management with aliases (C3, legacy booleans) and the C2 / no-context warnings", () => {
    const { document, warnings } = parsed(`<task><context_management>
      <inherit_context>true</inherit_context><accumulate_data>true</accumulate_data>
      <accumulation_format>minimal</accumulation_format><fresh_context>enabled</fresh_context>
    </context_management></task>`);
    const task = document.entry as TaskNode;
    expect(task.contextManagement).toMatchObject({
      inheritContext: "full",
      accumulateData: true,
      accumulationFormat: "notes_only",
      freshContext: "enabled",
    });
    expect(kinds(warnings)).toEqual(["value-alias", "value-alias", "fresh-context-conflict"]);
    expect(warnings[2]).toMatchObject({ line: 1, col: 7 });

    const none = "<inherit_context>none</inherit_context><accumulate_data>false</accumulate_data><fresh_context>disabled</fresh_context>";
    expect(kinds(parsed(`<task><context_management>${none}</context_management></task>`).warnings)).toEqual(["no-context"]);
    const withFiles = `<task><context_management>${none}</context_management><file_paths><path>a.py</path></file_paths></task>`;
    expect(parsed(withFiles).warnings).toEqual([]);
  });

  it("reads file paths for each source and output formats", () => {
    const { document } =
      parsed(`<task><file_paths><path> a.py </path><path/></file_paths><output_format type="json" schema="string[]"/></task>
      <task><file_paths source="command"><command>ls *.py</command></file_paths><output_format/></task>
      <task><file_paths source="context_description"><context_query>about {{x}}</context_query></file_paths></task>`);
    const [a, b, c] = document.nodes as TaskNode[];
    expect(a?.filePaths).toMatchObject({ source: "literal", paths: ["a.py"] });
    expect(a?.outputFormat).toMatchObject({ type: "json", schema: "string[]" });
    expect(b?.filePaths).toMatchObject({ source: "command", command: "ls *.py", paths: [] });
    expect(b?.outputFormat).toEqual({ kind: "output_format", loc: { line: 2, col: 81 }, type: "text" });
    expect(c?.filePaths).toMatchObject({ source: "context_description", contextQuery: "about {{x}}" });
  });

  it("keeps sequential steps in order, including calls and unsupported elements", () => {
    const { document, warnings } = parsed(`<task type="sequential"><steps>
      <task><description>one</description></task>
      <call template="t"><arg>x</arg></call>
      <step>legacy</step>
      <task type="script"><description>three</description></task>
    </steps></task>`);
    const steps = (document.entry as TaskNode).steps ?? [];
    expect(steps.map((s) => s.kind)).toEqual(["task", "call", "element", "task"]);
    expect(steps[2]).toMatchObject({ kind: "element", name: "step", text: "legacy", loc: { line: 4, col: 7 } });
    expect(kinds(warnings)).toEqual(["unsupported-element"]);
  });

  it("reads a director-evaluator loop, wrapper bodies and script execution", () => {
    const task = entryTask(`<task type="director_evaluator_loop"><max_iterations> 4 </max_iterations>
      <director><description>make</description></director>
      <evaluator><call template="judge"/></evaluator>
      <script_execution><command>run {{x}}</command><timeout>2.5</timeout><inputs><input name="i" from="director_result"/></inputs></script_execution>
      <termination_condition><condition>evaluation.success === true</condition></termination_condition></task>`);
    expect(task.maxIterations).toBe(4);
    expect(task.director).toMatchObject({ kind: "task", origin: "director", description: "make" });
    expect(task.evaluator).toMatchObject({ kind: "call", templateName: "judge" });
    expect(task.scriptExecution).toMatchObject({ command: "run {{x}}", timeout: 2.5, inputs: [{ name: "i", from: "director_result" }] });
    expect(task.terminationCondition?.conditions).toEqual(["evaluation.success === true"]);
  });

  it("reads script settings from <execution>, <script> or loose children", () => {
    const task = entryTask(`<task type="script"><command>echo hi</command><execution><timeout>30</timeout>
      <environment inherit="none"><var name="A">1</var></environment></execution></task>`);
    expect(task.execution).toMatchObject({
      kind: "execution",
      command: "echo hi",
      timeout: 30,
      environment: { inherit: "none", variables: [{ name: "A", value: "1" }] },
    });
  });

  it("reads a reduce task", () => {
    const task = entryTask(`<task type="reduce"><initial_value>0</initial_value>
      <inner_task><task><description>each</description></task></inner_task>
      <reduction_task><description>combine</description></reduction_task></task>`);
    expect(task.initialValue).toMatchObject({ value: "0" });
    expect(task.innerTask).toMatchObject({ kind: "task", description: "each" });
    expect(task.innerTask).not.toHaveProperty("origin");
    expect(task.reductionTask).toMatchObject({ kind: "task", origin: "reduction_task", description: "combine" });
  });

  it("keeps unsupported children, duplicate and stray text with warnings", () => {
    const { document, warnings } = parsed(
      '<task type="parallel"><description>a</description><description>b</description><continuation_policy>s</continuation_policy>...</task>',
    );
    const task = document.entry as TaskNode;
    expect(task).toMatchObject({ type: "parallel", description: "a", text: "..." });
    expect(task.extra).toMatchObject([{ kind: "element", name: "continuation_policy", text: "s" }]);
    expect(kinds(warnings).sort()).toEqual(["duplicate-element", "stray-text", "unsupported-element", "unsupported-task-type"]);
  });
});

describe("parseTemplate: seed-era slots (C21)", () => {
  it("reads <output_slot> and <input_source> as variable names", () => {
    const { document, warnings } = parsed(
      "<task><description>d</description><output_slot> last_director_output </output_slot><input_source>x</input_source></task>",
    );
    expect(document.entry).toMatchObject({ outputSlot: "last_director_output", inputSource: "x", extra: [] });
    expect(warnings).toEqual([]);
  });
});

describe("parseTemplate: calls, conditionals, templates, fragments", () => {
  it("normalises all three call syntaxes (C7) and reads named and nested args", () => {
    const { document } = parsed(`<call template="a"/><call task="b"><arg name="k">v</arg></call>
      <call><template> c </template><arg><task><description>inner</description></task></arg><arg>{"x": 1}</arg></call>`);
    const calls = document.nodes as CallNode[];
    expect(calls.map((c) => [c.templateName, c.syntax])).toEqual([
      ["a", "template-attribute"],
      ["b", "task-attribute"],
      ["c", "template-element"],
    ]);
    expect(calls[1]?.args).toEqual([{ loc: { line: 1, col: 36 }, name: "k", value: "v" }]);
    expect(calls[2]?.args[0]?.value).toMatchObject({ kind: "task", description: "inner" });
    expect(calls[2]?.args[1]?.value).toBe('{"x": 1}');
    expect(document.entry).toBe(calls[0]);
  });

  it("reads cond cases in order", () => {
    const cond = parsed(`<cond><case test="a == 1"><task/></case><case test="b"><call template="t"/></case></cond>`).document
      .entry as CondNode;
    expect(cond.cases.map((c) => [c.test, c.body[0]?.kind])).toEqual([
      ["a == 1", "task"],
      ["b", "call"],
    ]);
  });

  it("collects <template> and function-style <task> definitions (C8) apart from the entry", () => {
    const { document } =
      parsed(`<template name="t" params=" a , b ,," returns="object"><task><description>{{a}}</description></task></template>
      <task name="f" type="atomic" parameters="x,y"><description>{{x}}</description></task>
      <call template="t"><arg>1</arg><arg>2</arg></call>`);
    expect(document.templates.map((t) => [t.name, t.params, t.form])).toEqual([
      ["t", ["a", "b"], "template"],
      ["f", ["x", "y"], "task"],
    ]);
    expect(document.templates[0]?.returns).toEqual({ type: "object" });
    expect(document.templates[1]?.body).toMatchObject({ kind: "task", name: "f" });
    expect(document.entry).toMatchObject({ kind: "call", templateName: "t" });
    expect(parsed(`<template name="t"><task/></template>`).document.entry).toBeUndefined();
  });

  it("parses fragment documents into typed pieces with no entry", () => {
    const { document, warnings } =
      parsed(`<context_management><inherit_context>subset</inherit_context><fresh_context>enabled</fresh_context></context_management>
      <description>just text</description><input name="q" from="user_query"/><file_paths><path>/a</path></file_paths>`);
    expect(document.entry).toBeUndefined();
    const pieces = (document.nodes as FragmentNode[]).map((n) => n.piece);
    expect(pieces.map((p) => p.kind)).toEqual(["context_management", "text", "input", "file_paths"]);
    expect(pieces[1]).toMatchObject({ element: "description", text: "just text" });
    expect(kinds(warnings)).toEqual(["fresh-context-conflict"]);
  });

  it("keeps unknown top-level elements and library/function definitions", () => {
    const { document, warnings } = parsed(
      `<library><task name="l"/></library><function name="f"><parameters><param name="p" type="T"/></parameters><body><task/></body></function><validation_rules a="1"><bar/></validation_rules>`,
    );
    expect(document.nodes.map((n) => n.kind)).toEqual(["library", "function", "element"]);
    expect(document.nodes[1]).toMatchObject({ name: "f", params: [{ name: "p", type: "T" }], body: [{ kind: "task" }] });
    expect(document.nodes[2]).toMatchObject({ name: "validation_rules", attributes: { a: "1" }, children: [{ name: "bar" }] });
    expect(document.entry).toBeUndefined();
    expect(kinds(warnings)).toEqual(["unsupported-element"]);
  });
});

describe("parseTemplate: errors", () => {
  it("refuses text that is not XML", () => {
    expect(failure("hello")).toMatchObject({ line: 1, col: 1, message: expect.stringContaining("not XML") });
    expect(failure("\n  hello <task/>")).toMatchObject({ line: 2, col: 3 });
    expect(failure("<task/> trailing words")).toMatchObject({ line: 1, col: 9, message: expect.stringContaining("'trailing words'") });
  });

  it("refuses an element or a task attribute the language does not have, at its place, naming the nearest known one", () => {
    expect(failure("<task>\n  <descripton>Say hi</descripton>\n</task>")).toMatchObject({
      line: 2,
      col: 3,
      message: "unknown element <descripton> inside <task>; did you mean <description>?",
    });
    expect(failure('<task type="sequential"><steps><task><descriptio>a</descriptio></task></steps></task>').message).toBe(
      "unknown element <descriptio> inside <task>; did you mean <description>?",
    );
    expect(failure("<frobnicate/>").message).toBe("unknown element <frobnicate> inside <template>");
    expect(failure('<task>\n <description>a</description></task><task max_turn="3"><description>b</description></task>')).toMatchObject({
      line: 2,
      message: "unknown attribute max_turn of <task>; did you mean max_turns?",
    });
    // Elements of the seed-era language that the runtime ignores still parse, with a warning.
    const { warnings } = parsed("<task><description>a</description><validation_rules><rule/></validation_rules></task>");
    expect(kinds(warnings)).toEqual(["unsupported-element"]);
  });

  it("refuses an empty document", () => {
    expect(failure("").message).toContain("empty template");
    expect(failure("  \n <!-- only a comment -->\n").message).toContain("empty template");
  });

  it("reports a mismatched tag at the closing tag", () => {
    const error = failure("<task>\n  <description>x</descr>\n</task>");
    expect(error).toMatchObject({ line: 2, col: 17 });
    expect(error.message).toContain("'</descr>' closes '<description>'");
  });

  it("reports an unclosed tag at its start tag", () => {
    expect(failure("<task>\n  <description>x</description>")).toMatchObject({
      line: 1,
      col: 1,
      message: expect.stringContaining("unclosed tag '<task>'"),
    });
    expect(failure("<a/>\n</b>").message).toContain("'</b>' has no matching start tag");
    expect(failure("<task><!-- never closed</task>").message).toContain("unexpected end of text");
  });

  it("reports bad attributes", () => {
    expect(failure("<task type=atomic/>")).toMatchObject({ line: 1, col: 7 });
    expect(failure('<task type="a" type="b"/>').message).toContain("repeated");
    expect(failure("<task\n  type='a/>").message).toContain("open quote");
  });

  it("reports an unescaped ampersand with a hint", () => {
    expect(failure("<task><description>a && b</description></task>")).toMatchObject({
      line: 1,
      col: 22,
      message: expect.stringContaining("'&amp;'"),
    });
  });

  it("refuses enum values outside the documented set (C20) at the element", () => {
    const error = failure(
      "<task>\n  <context_management>\n    <inherit_context>optional</inherit_context>\n  </context_management>\n</task>",
    );
    expect(error).toMatchObject({ line: 3, col: 5, element: "inherit_context" });
    expect(error.message).toBe("invalid <inherit_context> value 'optional': expected 'full', 'none' or 'subset'");
    expect(failure("<task><context_management><accumulate_data>yes</accumulate_data></context_management></task>").element).toBe(
      "accumulate_data",
    );
    expect(failure('<task><file_paths source="glob"/></task>').message).toContain("source attribute of <file_paths>");
    expect(failure('<task><output_format type="xml"/></task>').element).toBe("output_format");
  });

  it("refuses non-numeric max_iterations and timeout", () => {
    expect(failure('<task type="director_evaluator_loop">\n <max_iterations>many</max_iterations></task>')).toMatchObject({
      line: 2,
      col: 2,
      element: "max_iterations",
    });
    expect(failure("<task><max_iterations>0</max_iterations></task>").element).toBe("max_iterations");
    expect(failure('<task type="script"><timeout>soon</timeout></task>').element).toBe("timeout");
  });

  it("refuses misplaced and incomplete constructs", () => {
    expect(failure("<call><arg>x</arg></call>").message).toContain("<call> needs a template name");
    expect(failure('<call template="a" task="b"/>').message).toContain("two templates");
    expect(failure("<arg>x</arg>")).toMatchObject({ element: "arg", line: 1, col: 1 });
    expect(failure("<task>\n<arg>x</arg></task>")).toMatchObject({ element: "arg", line: 2, col: 1 });
    expect(failure("<task><steps><template name='t'><task/></template></steps></task>").element).toBe("template");
    expect(failure("<template params='a'><task/></template>").message).toContain("'name'");
    expect(failure("<template name='t'/>").message).toContain("has no body");
    expect(failure("<cond><case><task/></case></cond>").message).toContain("'test'");
    expect(failure("<task><inputs><input from='x'/></inputs></task>").message).toContain("'name'");
  });

  it("refuses DOCTYPE declarations, oversized input and very deep nesting", () => {
    expect(failure('<!DOCTYPE task [<!ENTITY x "y">]><task>&x;</task>').message).toContain("DOCTYPE");
    expect(parseTemplate("<task><description><![CDATA[<!DOCTYPE html>]]></description></task>").ok).toBe(true);
    const big = `<task><description>${"x".repeat(1024 * 1024)}</description></task>`;
    expect(failure(big).message).toContain("too large");
    expect(failure(`${"<a>".repeat(150)}${"</a>".repeat(150)}`).message).toContain("too deeply");
  });
});
