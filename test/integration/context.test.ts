/**
 * Context over a real nats-server: `<file_paths>` contents reach the model through the Handler's read_file,
 * `fresh_context` asks Memory, `inherit_context` none vs full, `accumulate_data` carries prior outputs, and
 * `<output_format>` parses JSON or fails with output_format_failure. `memory.match` requests are recorded off the bus.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, type MatchRequest } from "../../protocol/index.js";
import { updateIndex } from "../../runtime/indexer/indexer.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { openNatsTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let dir: string;
let stack: Stack;
/** Every `memory.match` request sent, as it crossed the bus. */
const matchRequests: MatchRequest[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  dir = await mkdtemp(join(tmpdir(), "dirigent-context-it-"));
  await mkdir(join(dir, "docs"));
  await writeFile(join(dir, "docs", "style.md"), "# Style guide\nLITERAL_MARK_7: write short sentences.\n");
  await writeFile(join(dir, "docs", "glacier.md"), "# Glacier survey\nFRESH_MARK_9: the glacier retreated 40 m.\n");
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "STEP_ONE" }, reply: "first-output-3" },
        { match: { lastUser: "STEP_TWO", system: "first-output-3" }, reply: "saw the first output" },
        { match: { lastUser: "STEP_TWO", system: "Outputs of the earlier steps" }, reply: "saw notes only" },
        { match: { lastUser: "GIVE_LIST" }, reply: '```json\n["a", "b"]\n```' },
        { match: { system: "LITERAL_MARK_7" }, reply: "saw the style guide" },
        { match: { system: "FRESH_MARK_9" }, reply: "saw the glacier survey" },
      ],
      default: { reply: "no context" },
    },
  });
  // Memory serves the index present when it starts: index the workspace first, then start the stack on that root.
  const root = randomRoot();
  const writer = await openNatsTransport(server.url, createSubjects(root), { name: "indexer", log: silentLogger });
  try {
    await updateIndex(writer.index, dir);
  } finally {
    await writer.close();
  }
  // Requests go over NATS (no local dispatch), where the tests read what is asked of Memory and the Handler.
  stack = await startStack({ url: server.url, mock, root, config: { workspaceRoot: dir, localDispatch: false } });
  // Memory answers in its queue group; a plain subscription sees every request as well.
  stack.transport.bus.subscribe(createSubjects(root).memoryMatch, (msg) => {
    matchRequests.push(JSON.parse(new TextDecoder().decode(msg.data)) as MatchRequest);
  });
  await stack.transport.bus.flush();
});

afterAll(async () => {
  await stack?.stop();
  await mock?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const run = (xml: string, inputs: Record<string, unknown> = {}) => stack.client.run({ xml, inputs, taskId: newTaskId() }, () => undefined);

function systemPrompts(from: number): string[] {
  return mock.requests.slice(from).map((r) => String(r.body.messages.find((m) => m["role"] === "system")?.["content"] ?? ""));
}

describe("context over a real nats-server", () => {
  it("reads literal file_paths through the Handler and puts them in the system prompt, tagged with the path", async () => {
    const before = mock.requests.length;
    const outcome = await run(
      `<task>
  <description>Edit the text for {{who}}.</description>
  <file_paths><path>docs/style.md</path><path>docs/missing.md</path><path>../escape.md</path></file_paths>
</task>`,
      { who: "Ada" },
    );
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "saw the style guide",
      notes: {
        context_source: "file_paths:literal",
        context_files_count: 2,
        file_paths_error: ["path '../escape.md' leaves the workspace"],
        context_files: 1,
        context_file_errors: [{ path: "docs/missing.md", error: "path 'docs/missing.md' does not exist" }],
      },
    });
    expect(systemPrompts(before)[0]).toContain(
      '<file path="docs/style.md">\n# Style guide\nLITERAL_MARK_7: write short sentences.\n\n</file>',
    );
  });

  it("asks Memory for fresh_context with the substituted description, and attaches what it finds", async () => {
    const asked = matchRequests.length;
    const outcome = await run(
      `<task subtype="survey">
  <description>Summarise the {{topic}} survey.</description>
  <inputs><input name="topic">moraine</input></inputs>
  <context_management><inherit_context>none</inherit_context><fresh_context>enabled</fresh_context></context_management>
</task>`,
      { topic: "glacier" },
    );
    expect(matchRequests.slice(asked)).toEqual([
      {
        type: "memory.match",
        templateDescription: "Summarise the glacier survey.",
        templateType: "atomic",
        templateSubtype: "survey",
        inputs: { topic: "glacier" },
      },
    ]);
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "saw the glacier survey",
      notes: { context_source: "fresh_context", context_management: { inheritContext: "none", freshContext: "enabled" } },
    });
    expect(outcome.notes["context_files_count"]).toBeGreaterThanOrEqual(1);
  });

  it("gives a composite's file_paths to steps that inherit (full) and not to those that do not (none)", async () => {
    const before = mock.requests.length;
    const outcome = await run(`<task type="sequential">
  <file_paths><path>docs/style.md</path></file_paths>
  <context_management><accumulate_data>false</accumulate_data></context_management>
  <steps>
    <task><description>Write a line.</description></task>
    <task>
      <description>Write another line.</description>
      <context_management><inherit_context>none</inherit_context></context_management>
    </task>
  </steps>
</task>`);
    const [first, second] = systemPrompts(before);
    expect(first).toContain("LITERAL_MARK_7");
    expect(second).not.toContain("LITERAL_MARK_7");
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "no context", notes: { context_source: "none", context_files_count: 0 } });
  });

  it("tells Memory the context a step inherits", async () => {
    const asked = matchRequests.length;
    const outcome = await run(`<task type="sequential">
  <file_paths><path>docs/style.md</path></file_paths>
  <steps><task>
    <description>Summarise the glacier survey.</description>
    <context_management><fresh_context>enabled</fresh_context></context_management>
  </task></steps>
</task>`);
    expect(outcome).toMatchObject({ status: "COMPLETE", notes: { context_source: "inherited+fresh_context" } });
    expect(matchRequests.slice(asked)).toEqual([
      {
        type: "memory.match",
        templateDescription: "Summarise the glacier survey.",
        templateType: "atomic",
        inputs: {},
        inheritedContext: "Inherited files: docs/style.md",
      },
    ]);
  });

  it("matches file_paths source=description on the block's description, or on the prompt without one", async () => {
    const asked = matchRequests.length;
    const described = await run(
      `<task>
  <description>Summarise what you are given.</description>
  <file_paths source="description"><description>the {{place}} survey</description></file_paths>
</task>`,
      { place: "glacier" },
    );
    expect(described).toMatchObject({
      status: "COMPLETE",
      content: "saw the glacier survey",
      notes: { context_source: "file_paths:description", context_files_count: 1, context_files: 1 },
    });
    const fromPrompt = await run(`<task>
  <description>Write to the style guide.</description>
  <file_paths source="description"/>
</task>`);
    expect(fromPrompt).toMatchObject({
      status: "COMPLETE",
      content: "saw the style guide",
      notes: { context_source: "file_paths:description", context_files_count: 1 },
    });
    expect(matchRequests.slice(asked).map((r) => r.templateDescription)).toEqual(["the glacier survey", "Write to the style guide."]);
  });

  it("matches file_paths source=context_description on the substituted context_query", async () => {
    const asked = matchRequests.length;
    const outcome = await run(
      `<task>
  <description>Summarise what you are given.</description>
  <file_paths source="context_description"><context_query>{{kind}} guide</context_query></file_paths>
</task>`,
      { kind: "style" },
    );
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "saw the style guide",
      notes: { context_source: "file_paths:context_description", context_files_count: 1, context_files: 1 },
    });
    expect(matchRequests.slice(asked).map((r) => r.templateDescription)).toEqual(["style guide"]);
    const empty = await run(
      `<task>
  <description>Summarise what you are given.</description>
  <file_paths source="context_description"><context_query>{{kind}}</context_query></file_paths>
</task>`,
      { kind: " " },
    );
    expect(empty).toMatchObject({
      status: "COMPLETE",
      content: "no context",
      notes: { file_paths_error: ["file_paths source 'context_description' has no query text"], context_files_count: 0 },
    });
  });

  it("carries prior outputs into the next step with accumulate_data (full_output), or their notes only", async () => {
    const steps = `<steps><task><description>STEP_ONE</description></task><task><description>STEP_TWO</description></task></steps>`;
    const full = await run(
      `<task type="sequential"><context_management><accumulation_format>full_output</accumulation_format></context_management>${steps}</task>`,
    );
    expect(full).toMatchObject({ status: "COMPLETE", content: "saw the first output", notes: { context_source: "accumulated" } });
    const notesOnly = await run(`<task type="sequential">${steps}</task>`);
    expect(notesOnly).toMatchObject({ status: "COMPLETE", content: "saw notes only" });
    const none = await run(
      `<task type="sequential"><context_management><accumulate_data>false</accumulate_data></context_management>${steps}</task>`,
    );
    expect(none).toMatchObject({ content: "no context", notes: { context_source: "none" } });
  });

  it("parses JSON output into parsedContent, and fails a schema mismatch with output_format_failure", async () => {
    const list = await run(`<task><description>GIVE_LIST</description><output_format type="json" schema="string[]"/></task>`);
    expect(list).toMatchObject({ status: "COMPLETE", parsedContent: ["a", "b"] });
    const object = await run(`<task><description>GIVE_LIST</description><output_format type="json" schema="object"/></task>`);
    expect(object).toMatchObject({
      status: "FAILED",
      error: { type: "TASK_FAILURE", reason: "output_format_failure", details: { expectedType: "object", actualType: "string[]" } },
    });
  });
});
