import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  applyOutputFormat,
  atomicContext,
  badPath,
  compositeContextBindings,
  pathLines,
  type ContextDeps,
  type MatchQuery,
} from "../../actors/evaluator/context.js";
import { attachContext } from "../../actors/handler/files.js";
import { IndexRanker } from "../../actors/memory/rank.js";
import { fitsSchema, jsonType, unfenced } from "../../actors/evaluator/output-format.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { createToolset, type Toolset } from "../../runtime/tools/toolset.js";
import { ACCUMULATED_BINDING, CONTEXT_BINDING, CONTEXT_OVERRIDE_BINDING } from "../../machines/evaluator/context-defaults.js";
import { extend, rootEnv } from "../../machines/language/env.js";
import type { TaskResult } from "../../protocol/index.js";
import type { TaskNode } from "../../machines/language/ast.js";

function task(xml: string): TaskNode {
  const parsed = parseTemplate(xml);
  if (!parsed.ok || parsed.document.entry?.kind !== "task") throw new Error(parsed.ok ? "no task" : parsed.error.message);
  return parsed.document.entry;
}

const done = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: { usage: 1 } });
const json = (schema?: string) =>
  task(`<task><description>d</description><output_format type="json"${schema ? ` schema="${schema}"` : ""}/></task>`);

describe("output_format (parsedContent at the top level)", () => {
  it("parses JSON content (also in a ```json fence) into top-level parsedContent and keeps content", () => {
    expect(applyOutputFormat(json(), done('{"a": [1, 2]}'))).toEqual({ ...done('{"a": [1, 2]}'), parsedContent: { a: [1, 2] } });
    expect(applyOutputFormat(json("string[]"), done('```json\n["x", "y"]\n```')).parsedContent).toEqual(["x", "y"]);
    expect(applyOutputFormat(json(), done("  42 ")).parsedContent).toBe(42);
    expect(applyOutputFormat(json(), done("true")).parsedContent).toBe(true);
  });

  it("notes a parse error without failing, and leaves non-JSON text alone", () => {
    const bad = applyOutputFormat(json("object"), done("{not json"));
    expect(bad.status).toBe("COMPLETE");
    expect(bad.notes["parseError"]).toEqual(expect.any(String));
    expect(bad).not.toHaveProperty("parsedContent");
    expect(applyOutputFormat(json(), done("just words"))).toEqual(done("just words"));
  });

  it.each([
    ["string[]", "[1, 2]", "number[]"],
    ["object", "[1]", "number[]"],
    ["array", '{"a": 1}', "object"],
    ["number", '"7"', "string"],
    ["boolean", "just words", "string"],
    ["integer", "2.5", "number"],
  ])("fails a %s schema given %s with output_format_failure (actual %s)", (schema, content, actualType) => {
    const result = applyOutputFormat(json(schema), done(content));
    expect(result).toMatchObject({
      status: "FAILED",
      content,
      error: { type: "TASK_FAILURE", reason: "output_format_failure", details: { expectedType: schema, actualType } },
    });
  });

  it("accepts values that fit, and text for a string schema", () => {
    expect(applyOutputFormat(json("object[]"), done('[{"a":1}]')).status).toBe("COMPLETE");
    expect(applyOutputFormat(json("string"), done("42"))).toMatchObject({ status: "COMPLETE", parsedContent: "42" });
    expect(applyOutputFormat(json("DataSet"), done("[1]")).parsedContent).toEqual([1]);
  });

  it('honours returns="object" of a function template and ignores text formats and failed results', () => {
    expect(applyOutputFormat(task("<task><description>d</description></task>"), done("[1]"), { type: "object" })).toMatchObject({
      status: "FAILED",
      error: { reason: "output_format_failure" },
    });
    expect(
      applyOutputFormat(task('<task name="f" returns="array"><description>d</description></task>'), done("[1]")).parsedContent,
    ).toEqual([1]);
    expect(applyOutputFormat(task('<task><description>d</description><output_format type="text"/></task>'), done("[1]"))).toEqual(
      done("[1]"),
    );
    const failed: TaskResult = {
      content: "{}",
      status: "FAILED",
      notes: {},
      error: { type: "TASK_FAILURE", reason: "model_error", message: "x" },
    };
    expect(applyOutputFormat(json("array"), failed)).toBe(failed);
  });

  it("names JSON types and checks nested array schemas", () => {
    expect([jsonType(null), jsonType([]), jsonType([1, "a"]), jsonType([[1]]), jsonType({})]).toEqual([
      "null",
      "array",
      "array",
      "number[][]",
      "object",
    ]);
    expect(fitsSchema("number[][]", [[1], []])).toBe(true);
    expect(fitsSchema("number[][]", [[1], ["x"]])).toBe(false);
    expect(unfenced("```\n{}\n```")).toBe("{}");
  });
});

describe("file_paths command output", () => {
  it("keeps the output lines that are paths", () => {
    expect(pathLines("a.ts\n\n  b/c.md  \r\n../etc/passwd\nbad\u0000name\n/abs/x")).toEqual(["a.ts", "b/c.md", "/abs/x"]);
    expect([badPath(""), badPath("../x"), badPath("a/../../x"), badPath("a/../b")]).toEqual([
      "empty path",
      expect.any(String),
      expect.any(String),
      undefined,
    ]);
  });
});

describe("atomicContext", () => {
  let dir: string;
  let tools: Toolset;
  const matches: MatchQuery[] = [];
  let ranker: IndexRanker;
  const signal = new AbortController().signal;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dirigent-context-"));
    await mkdir(join(dir, "src"));
    await writeFile(join(dir, "src", "parser.ts"), "export const PARSER_MARK = 1;\n");
    await writeFile(join(dir, "notes.md"), "# Release notes\nNOTES_MARK\n");
    tools = await createToolset({
      workspaceRoot: dir,
      enabled: ["read_file"],
      commands: ["node"],
      readMaxBytes: 4096,
      listMaxEntries: 10,
      scriptTimeoutMs: 5000,
      scriptKillGraceMs: 100,
      scriptOutputMaxBytes: 4096,
      scriptEnv: ["PATH"],
    });
    ranker = await IndexRanker.build([
      { path: join(dir, "src", "parser.ts"), metadata: "language: TypeScript; name: parser.ts; parses xml templates" },
      { path: join(dir, "notes.md"), metadata: "language: Markdown; name: notes.md; Release notes" },
    ]);
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  // Memory's own ranking over a small index, and a Handler's own run_script: the real parts, in-process.
  const deps: ContextDeps = {
    memoryMatch: async (query) => {
      matches.push(query);
      return ranker.match(query.text, query.limit).map((m) => ({ path: m.path }));
    },
    runCommand: async (argv, sig) => {
      const ran = await tools.script({ argv }, sig);
      if ("error" in ran) throw new Error(ran.error);
      return { stdout: ran.outcome.stdout, exitCode: ran.outcome.exitCode };
    },
  };

  it("passes the parent's context down with inherit full, nothing with none, and echoes the settings", async () => {
    const env = rootEnv({ [CONTEXT_BINDING]: { files: ["notes.md"], text: "parent says hi" } });
    const full = await atomicContext(deps, task("<task><description>d</description></task>"), env, "d", signal);
    expect(full).toEqual({
      ok: true,
      value: {
        files: ["notes.md"],
        context: "parent says hi",
        notes: {
          context_management: { inheritContext: "full", accumulateData: false, accumulationFormat: "notes_only", freshContext: "disabled" },
          context_source: "inherited",
          context_files_count: 1,
        },
      },
    });
    const none = await atomicContext(
      deps,
      task("<task><description>d</description><context_management><inherit_context>none</inherit_context></context_management></task>"),
      env,
      "d",
      signal,
    );
    expect(none).toMatchObject({ ok: true, value: { files: [], notes: { context_source: "none", context_files_count: 0 } } });
  });

  it("asks Memory with the prompt and prior outputs for fresh_context, and lets a request's override win", async () => {
    const env = extend(rootEnv({ [CONTEXT_OVERRIDE_BINDING]: { freshContext: "enabled" } }), {
      [ACCUMULATED_BINDING]: ["step 1 notes: {}"],
    });
    matches.length = 0;
    const got = await atomicContext(deps, task("<task><description>d</description></task>"), env, "fix the xml parser", signal);
    expect(matches).toEqual([
      { text: "fix the xml parser", templateType: "atomic", inputs: {}, previousOutputs: ["step 1 notes: {}"], limit: 10 },
    ]);
    expect(got).toMatchObject({
      ok: true,
      value: {
        files: [join(dir, "src", "parser.ts")],
        context: "Outputs of the earlier steps:\n\nstep 1 notes: {}",
        notes: { context_source: "accumulated+fresh_context" },
      },
    });
  });

  it("keeps only the parent's files Memory matches for subset, unless file_paths replace them", async () => {
    const env = rootEnv({ [CONTEXT_BINDING]: { files: ["src/parser.ts", "notes.md"] } });
    const subset = task(
      "<task><description>d</description><context_management><inherit_context>subset</inherit_context></context_management></task>",
    );
    expect(await atomicContext(deps, subset, env, "xml parser", signal)).toMatchObject({ ok: true, value: { files: ["src/parser.ts"] } });
    const replaced = task(
      "<task><description>d</description><context_management><inherit_context>subset</inherit_context></context_management><file_paths><path>notes.md</path></file_paths></task>",
    );
    expect(await atomicContext(deps, replaced, env, "xml parser", signal)).toMatchObject({
      ok: true,
      value: { files: ["notes.md"], notes: { context_source: "file_paths:literal" } },
    });
  });

  it("takes literal paths with {{var}}, noting bad ones without failing", async () => {
    const node = task(
      "<task><description>d</description><file_paths><path>{{dir}}/parser.ts</path><path>../../etc/passwd</path></file_paths></task>",
    );
    const got = await atomicContext(deps, node, rootEnv({ dir: "src" }), "d", signal);
    expect(got).toMatchObject({
      ok: true,
      value: { files: ["src/parser.ts"], notes: { file_paths_error: ["path '../../etc/passwd' leaves the workspace"] } },
    });
    expect(await atomicContext(deps, node, rootEnv(), "d", signal)).toMatchObject({
      ok: false,
      result: { error: { reason: "input_validation_failure" } },
    });
  });

  it("runs a file_paths command without a shell, in the sandbox, and refuses a program the allowlist lacks without running it", async () => {
    const listed = task(
      `<task><description>d</description><file_paths source="command"><command>node -e "console.log('src/parser.ts\\nnotes.md')"</command></file_paths></task>`,
    );
    expect(await atomicContext(deps, listed, rootEnv(), "d", signal)).toMatchObject({
      ok: true,
      value: { files: ["src/parser.ts", "notes.md"], notes: { context_files_count: 2 } },
    });
    const refused = task(
      '<task><description>d</description><file_paths source="command"><command>rm -rf src</command></file_paths></task>',
    );
    expect(await atomicContext(deps, refused, rootEnv(), "d", signal)).toMatchObject({
      ok: true,
      value: {
        files: [],
        notes: {
          file_paths_error: [
            "file_paths command failed: program 'rm' is not allowed for template commands (DIRIGENT_COMMANDS=node; add it there to allow it)",
          ],
        },
      },
    });
    // What the old denylist let through (an interpreter writing a file) writes nowhere but the workspace now.
    const writer = task(
      `<task><description>d</description><file_paths source="command"><command>node -e "require('fs').writeFileSync('/usr/escaped', 'x')"</command></file_paths></task>`,
    );
    expect(await atomicContext(deps, writer, rootEnv(), "d", signal)).toMatchObject({
      ok: true,
      value: { files: [], notes: { file_paths_error: ["file_paths command exited with 1"] } },
    });
    const { runCommand: _none, ...noRoute } = deps;
    expect(await atomicContext(noRoute, listed, rootEnv(), "d", signal)).toMatchObject({
      ok: true,
      value: { notes: { file_paths_error: [expect.stringMatching(/cannot run/)] } },
    });
  });

  it("matches a description or a substituted context_query, and fails when Memory cannot be asked", async () => {
    matches.length = 0;
    const query = task(
      '<task subtype="lookup"><description>d</description><inputs><input name="what"/><input name="long"/><input name="big"/></inputs><file_paths source="context_description"><context_query>{{what}} notes</context_query></file_paths></task>',
    );
    const env = rootEnv({
      what: "release",
      long: "y".repeat(1500),
      big: Array(500).fill("word"),
      other: "not an input",
      [CONTEXT_BINDING]: { files: ["a.md"], text: "parent text" },
    });
    expect(await atomicContext(deps, query, env, "d", signal)).toMatchObject({
      ok: true,
      value: { files: ["a.md", join(dir, "notes.md")] },
    });
    expect(matches).toEqual([
      {
        text: "release notes",
        templateType: "atomic",
        templateSubtype: "lookup",
        inputs: { what: "release", long: "y".repeat(1000) },
        inheritedContext: "parent text\n\nInherited files: a.md",
        limit: 10,
      },
    ]);
    const broken: ContextDeps = { memoryMatch: async () => Promise.reject(new Error("no responders")) };
    const fresh = task('<task subtype="subtask"><description>d</description></task>');
    expect(await atomicContext(broken, fresh, rootEnv(), "d", signal)).toMatchObject({
      ok: false,
      result: { status: "FAILED", error: { reason: "context_retrieval_failure", message: "memory match failed: no responders" } },
    });
  });

  it("lets the Handler attach files through read_file, noting files it cannot read", async () => {
    const attached = await attachContext(tools, ["notes.md", "missing.md", "../outside"], "more context", signal);
    expect(attached.text).toBe('\n\n===\n\n<file path="notes.md">\n# Release notes\nNOTES_MARK\n\n</file>\n\nmore context');
    expect(attached.notes).toEqual({
      context_files: 1,
      context_file_errors: [
        { path: "missing.md", error: "path 'missing.md' does not exist" },
        { path: "../outside", error: "path '../outside' is outside the workspace" },
      ],
    });
    expect(await attachContext(tools, undefined, undefined, signal)).toEqual({ text: "", notes: {} });
  });
});

describe("compositeContextBindings", () => {
  const parent = rootEnv({ [CONTEXT_BINDING]: { files: ["a.md"], text: "t" }, [ACCUMULATED_BINDING]: ["step 1 notes: {}"] });

  it("hands children nothing but its own literal paths with inherit none (reduce, loop by default)", () => {
    const reduce = task(
      '<task type="reduce"><file_paths><path>b.md</path><path>{{x}}</path></file_paths><inner_task><description>i</description></inner_task></task>',
    );
    expect(compositeContextBindings(reduce, parent)).toEqual({ [ACCUMULATED_BINDING]: [], [CONTEXT_BINDING]: { files: ["b.md"] } });
  });

  it("adds its literal paths to what it inherits (sequential by default), and binds nothing for atomic tasks", () => {
    const sequential = task(
      '<task type="sequential"><file_paths><path>b.md</path></file_paths><steps><task><description>s</description></task></steps></task>',
    );
    expect(compositeContextBindings(sequential, parent)).toEqual({
      [ACCUMULATED_BINDING]: [],
      [CONTEXT_BINDING]: { files: ["a.md", "b.md"], text: "t" },
    });
    expect(compositeContextBindings(task('<task type="sequential"><steps/></task>'), rootEnv())).toEqual({});
    expect(compositeContextBindings(task("<task><description>d</description></task>"), parent)).toEqual({});
  });
});
