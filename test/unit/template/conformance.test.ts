/**
 * Conformance against the XML-era template corpus in ../shared/seeds-xml beside the repository
 * (test inputs only, read at test time; never copied into the product). `DIRIGENT_SEEDS_XML` points elsewhere.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseTemplate } from "../../../machines/language/parse.js";
import { CORPUS_DIR } from "../../support/corpus.js";
import type {
  CallNode,
  CondNode,
  FragmentNode,
  FunctionNode,
  LibraryNode,
  TaskNode,
  TemplateDocument,
  TemplateWarningKind,
} from "../../../machines/language/ast.js";

const CORPUS = CORPUS_DIR;

interface IndexEntry {
  id: string;
  file: string;
  category: string;
  era: string;
  wellformed: boolean;
  wf_error: string;
  root: string;
}

const DOCUMENTED_WARNINGS: readonly TemplateWarningKind[] = [
  "fresh-context-conflict",
  "no-context",
  "value-alias",
  "unsupported-element",
  "unsupported-task-type",
  "duplicate-element",
  "stray-text",
];

if (!existsSync(join(CORPUS, "index.json"))) {
  throw new Error(`the seeds-xml corpus is missing at '${CORPUS}': put shared/ beside the repository or set DIRIGENT_SEEDS_XML`);
}
const index = JSON.parse(readFileSync(join(CORPUS, "index.json"), "utf8")) as IndexEntry[];
const xmlEra = (category: string) => index.filter((e) => e.category === category && e.era === "xml-era");
const text = (file: string) => readFileSync(join(CORPUS, file), "utf8");

function doc(id: string): TemplateDocument {
  const outcome = parseTemplate(text(`templates/${id}.xml`));
  if (!outcome.ok) throw new Error(`${id}: ${outcome.error.message} at ${outcome.error.line}:${outcome.error.col}`);
  return outcome.document;
}

function entryTask(id: string): TaskNode {
  const entry = doc(id).entry;
  if (entry?.kind !== "task") throw new Error(`${id}: expected a task entry`);
  return entry;
}

describe("seeds-xml conformance: templates", () => {
  const wellformed = xmlEra("template").filter((e) => e.wellformed);
  const broken = xmlEra("template").filter((e) => !e.wellformed);

  it("has the expected corpus size", () => {
    expect(wellformed).toHaveLength(112);
    expect(broken.map((e) => e.id).sort()).toEqual(["4c9ea69cd436", "7bbac7b2b8d8", "f00380213f0a"]);
  });

  it.each(wellformed.map((e) => [e.id, e] as const))("parses %s", (_id, entry) => {
    const outcome = parseTemplate(text(entry.file));
    if (!outcome.ok) expect.fail(`${entry.file}: ${outcome.error.message} at ${outcome.error.line}:${outcome.error.col}`);
    for (const warning of outcome.warnings) {
      expect(DOCUMENTED_WARNINGS).toContain(warning.kind);
      expect(warning.line).toBeGreaterThanOrEqual(1);
      expect(warning.col).toBeGreaterThanOrEqual(1);
    }
    const count = outcome.document.templates.length + outcome.document.nodes.length;
    expect(count).toBeGreaterThan(0);
  });

  // Positions read off the files (1-based columns).
  const expectedErrors: Record<string, { line: number; col: number; says: string; at: string }> = {
    // `<task_instructions>…</description>`: the closing tag does not match.
    "7bbac7b2b8d8": { line: 2, col: 56, says: "'</description>' closes '<task_instructions>'", at: "</description>" },
    // `… === 0 && iteration >= 2` inside <condition>: a bare ampersand.
    "4c9ea69cd436": { line: 28, col: 88, says: "unescaped '&'", at: "&&" },
    // The snippet stops after the start tag.
    f00380213f0a: { line: 1, col: 1, says: "unclosed tag '<template>'", at: "<template" },
  };

  it.each(Object.entries(expectedErrors))("refuses malformed %s at the real problem", (id, expected) => {
    const source = text(`templates/${id}.xml`);
    const outcome = parseTemplate(source);
    if (outcome.ok) expect.fail(`${id} parsed`);
    expect(outcome.error).toMatchObject({ code: "INVALID_TEMPLATE", line: expected.line, col: expected.col });
    expect(outcome.error.message).toContain(expected.says);
    const line = source.split("\n")[expected.line - 1] ?? "";
    expect(line.slice(expected.col - 1).startsWith(expected.at)).toBe(true);
  });
});

describe("seeds-xml conformance: grammar examples", () => {
  const grammar = xmlEra("grammar").filter((e) => e.wellformed);

  it("has the expected examples", () => {
    expect(grammar).toHaveLength(8);
  });

  // Placeholders such as `full|none|subset` are not values: unknown enum values are refused, at the first one.
  it.each(grammar.map((e) => [e.id, e] as const))("refuses placeholder values in %s, naming the element", (_id, entry) => {
    const source = text(entry.file);
    const outcome = parseTemplate(source);
    if (outcome.ok) expect.fail(`${entry.file} parsed`);
    const lines = source.split("\n");
    const line = lines.findIndex((l) => l.includes("<inherit_context>")) + 1;
    expect(outcome.error).toMatchObject({
      element: "inherit_context",
      line,
      col: (lines[line - 1] ?? "").indexOf("<inherit_context>") + 1,
    });
    expect(outcome.error.message).toMatch(/<inherit_context> value '(full|none)\|/);
  });

  it.each(grammar.map((e) => [e.id, e] as const))("parses %s once each placeholder takes its first alternative", (_id, entry) => {
    const concrete = text(entry.file).replace(/>\s*([a-z_]+)(\|[a-z_]+)+\s*</g, ">$1<");
    const outcome = parseTemplate(concrete);
    expect(outcome.ok).toBe(true);
  });
});

describe("seeds-xml conformance: AST content", () => {
  it("keeps a sequential's steps in order", () => {
    const task = entryTask("8cc320cbc775");
    expect(task.type).toBe("sequential");
    expect(task.steps?.map((s) => (s.kind === "task" ? s.description : s.kind))).toEqual([
      "Load initial data",
      "Apply configuration from {{config_profile}}",
    ]);
    expect(task.steps?.[0]).toMatchObject({ inputs: [{ name: "data", from: "raw_data" }] });

    const mixed = entryTask("a5d762e91af7").steps ?? [];
    expect(mixed.map((s) => s.kind)).toEqual(["task", "call", "call"]);
    expect((mixed[1] as CallNode).args.map((a) => a.value)).toEqual([
      "loaded_data",
      '{"required": ["name", "email"], "format": {"email": "email"}}',
    ]);
  });

  it("reads director-evaluator loops", () => {
    const loop = doc("49548d5ca76a").nodes[2] as TaskNode;
    expect(loop).toMatchObject({ type: "director_evaluator_loop", maxIterations: 3 });
    expect(loop.scriptExecution).toMatchObject({ command: 'python3 -c "{{script_input}}"', timeout: 5 });
    expect(loop.evaluator).toMatchObject({ kind: "task", origin: "evaluator" });
    expect((loop.evaluator as TaskNode).inputs.map((i) => i.from)).toEqual([
      "director_result",
      "script_output",
      "script_errors",
      "script_exit_code",
    ]);
    expect(loop.terminationCondition?.conditions).toEqual(["evaluation.success === true || iteration >= 3"]);
    expect(entryTask("3df504a17226").maxIterations).toBe(5);
  });

  it("normalises calls of both attribute syntaxes (the element syntax is tested inline)", () => {
    expect(doc("50e5244492ee").entry).toMatchObject({ kind: "call", templateName: "validate_input", syntax: "template-attribute" });
    const byTask = doc("261e10e19a86").entry as CallNode;
    expect(byTask).toMatchObject({ templateName: "validate_input", syntax: "task-attribute" });
    expect(byTask.args.map((a) => a.value)).toEqual(["user_input", "validation_schema"]);
  });

  it("reads template parameter lists in both syntaxes (C8)", () => {
    expect(doc("92d2026bdd13").templates[0]).toMatchObject({ name: "validate_input", params: ["data", "rules"], form: "template" });
    expect(doc("93122e8ca4d7").templates[0]?.params).toEqual(["dataset", "config"]);
    expect(doc("8fafe594bcb5").templates[0]).toMatchObject({ params: ["filepath"], returns: { type: "object" } });
    expect(doc("a75962761949").templates[0]).toMatchObject({ name: "validate_input", params: ["data", "rules"], form: "task" });
    expect(doc("b6bbd53a0e36").templates[0]).toMatchObject({ name: "extract_metrics", params: ["log_data"], returns: { type: "object" } });
    const both = doc("6ef53bedc098");
    expect(both.templates.map((t) => t.name)).toEqual(["analyze_data"]);
    expect(both.entry).toMatchObject({ kind: "call", templateName: "analyze_data" });
  });

  it("reads reduce, cond, library, function and script constructs", () => {
    const reduce = entryTask("cef58ebebd47");
    expect(reduce.inputs.map((i) => i.value)).toEqual(["Value 1", "Value 2", "Value 3"]);
    expect(reduce.initialValue).toEqual({ kind: "initial_value", loc: { line: 3, col: 5 } });
    expect((reduce.innerTask as TaskNode).inputs[1]?.task).toMatchObject({ description: "Load metadata for processing" });

    const cond = doc("53130303210e").entry as CondNode;
    expect(cond.cases.map((c) => c.test)).toEqual(["output.valid == true", "output.errors > 0"]);
    expect(cond.cases[1]?.body[0]).toMatchObject({ subtype: "error_handler", description: "Handle error" });

    const library = doc("7ff9a6a21b40");
    expect((library.nodes[0] as LibraryNode).entries[0]).toMatchObject({ name: "load_csv" });
    expect((library.entry as TaskNode).steps?.[0]).toMatchObject({ ref: "load_csv" });

    expect(doc("7201be24ed20").nodes[0] as FunctionNode).toMatchObject({
      name: "analyze_peaks",
      params: [{ name: "dataset" }, { name: "threshold" }],
    });
    expect(entryTask("d8dbc8ca2332").execution).toMatchObject({
      command: "{{script_path}}",
      timeout: 300,
      environment: { inherit: "none" },
    });
    expect(entryTask("47d1cdc5340b")).toMatchObject({
      instructions: "Analyze the given code for readability issues.",
      model: { name: "claude-3-sonnet" },
      criteria: "validate, log",
      manualXml: false,
    });
  });

  it("reads fragments and file path sources", () => {
    const cm = doc("ee1ebcd13ee2");
    expect(cm.entry).toBeUndefined();
    expect((cm.nodes[0] as FragmentNode).piece).toMatchObject({ kind: "context_management", accumulationFormat: "notes_only" });
    expect((doc("16888fb9681b").nodes[0] as FragmentNode).piece).toMatchObject({ paths: ["./src/main.py", "/absolute/path/file.txt"] });
    expect((doc("6282f5fe0d3f").nodes[0] as FragmentNode).piece).toMatchObject({
      kind: "text",
      text: 'Analysis results: {{calculate_metrics(data, method="advanced")}}',
    });
    const sources = doc("ffc4c9ca5655").nodes.map((n) => (n as TaskNode).filePaths?.source);
    expect(sources).toEqual(["literal", "command", "description", "context_description"]);
  });
});
