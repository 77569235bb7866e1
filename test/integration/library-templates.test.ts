/**
 * Library templates used from submitted documents over a real nats-server with the mock model: `<call template>`
 * (and inline calls) of a function template of the library when the document does not define one, and library
 * templates offered to sessions as tools (`DIRIGENT_TEMPLATE_TOOLS`), run as subtasks through the Evaluator.
 */
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let workspace: string;
let templates: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-library-templates-"));
  templates = join(workspace, "templates");
  await mkdir(templates);
  // A library file with two function templates: `shout` calls its sibling `wrap`, which the caller never defines.
  await writeFile(
    join(templates, "shout.xml"),
    `<template name="wrap" params="text"><task type="atomic"><description>WRAP {{text}}</description></task></template>
<template name="shout" params="word, times">
  <call template="wrap"><arg>{{word}} x{{times}}</arg></call>
</template>`,
  );
  await writeFile(join(templates, "plain.xml"), `<task name="plain" type="atomic"><description>PLAIN</description></task>`);
  await writeFile(
    join(templates, "weather.xml"),
    `<task name="weather" type="atomic">
  <parameters>
    <parameter name="city" type="string">The city to look up.</parameter>
    <parameter name="days" type="integer" default="1"/>
  </parameters>
  <description>LOOKUP weather in {{city}} for {{days}} days</description>
</task>`,
  );
  await writeFile(
    join(templates, "collide.xml"),
    `<template name="list_files" params="path"><task><description>LIST {{path}}</description></task></template>`,
  );
  const call = (args: Record<string, unknown>) => ({ name: "weather", arguments: args });
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "^TOOLUSER" }, turn: 1 }, toolCalls: [call({ city: "Oslo", days: 2 })] },
        { match: { lastUser: { regex: "^TOOLUSER" }, hasToolResult: { regex: "echo:LOOKUP" } }, reply: "forecast done" },
        { match: { lastUser: { regex: "^DEFAULTS" }, turn: 1 }, toolCalls: [call({ city: "Rome" })] },
        { match: { lastUser: { regex: "^DEFAULTS" }, hasToolResult: true }, reply: "got it" },
        { match: { lastUser: { regex: "^SLOPPY" }, turn: 1 }, toolCalls: [call({ town: "Oslo", days: "two" })] },
        { match: { lastUser: { regex: "^SLOPPY" }, hasToolResult: { regex: "invalid arguments" } }, reply: "gave up" },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

const stack = (config: Record<string, unknown> = {}) =>
  startStack({ url: server.url, mock, config: { workspaceRoot: workspace, templates, ...config } });

describe("<call> of a library function template", () => {
  it("runs a function template of the library that the document does not define", async () => {
    await using s = await stack();
    const events: TaskEvent[] = [];
    const xml = `<call template="shout"><arg>"hello"</arg><arg name="times">3</arg></call>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:WRAP hello x3" });
    // The library template's nodes are reported under the call that ran them.
    const paths = events.filter((e) => e.type === "node.started").map((e) => e.data?.["nodePath"]);
    expect(paths).toContain("0/call:templates.0.body");
  });

  it("prefers the document's own template of the same name", async () => {
    await using s = await stack();
    const xml = `<template name="shout" params="word"><task><description>MINE {{word}}</description></task></template>
<call template="shout"><arg>"hi"</arg></call>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:MINE hi" });
  });

  it("resolves inline calls of library templates too", async () => {
    await using s = await stack();
    const xml = `<task><description>SAY {{wrap("inline")}}</description></task>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:SAY echo:WRAP inline" });
  });

  it("fails naming a template neither the document nor the library defines", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: `<call template="nowhere"><arg>"x"</arg></call>`, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "input_validation_failure", details: { template: "nowhere" } });
    expect(outcome.error?.message).toContain("unknown template 'nowhere'");
    expect(outcome.error?.message).toContain("neither the document nor the template library");
  });

  it("refuses a library task that is not a function template, pointing at <task ref>", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: `<call template="plain"/>`, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toContain(`not a function template: run it with <task ref="plain"/>`);
  });
});

describe("library templates as tools (DIRIGENT_TEMPLATE_TOOLS)", () => {
  const atomic = (description: string) => `<task type="atomic"><description>${description}</description></task>`;
  type Body = { messages: { role: string; content: string | null }[]; tools?: { function: { name: string; parameters: unknown } }[] };
  const lastBody = (text: string) => mock.requests.findLast((r) => JSON.stringify(r.body).includes(text))?.body as Body | undefined;

  it("offers the template with its parameters' schema, runs a call as a subtask and resumes the session with its result", async () => {
    await using s = await stack({ templateTools: ["weather"] });
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: atomic("TOOLUSER plan a picnic"), taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "forecast done", notes: { subtasks: 1 } });
    const first = mock.requests.find((r) => JSON.stringify(r.body).includes("TOOLUSER plan a picnic"))?.body as Body;
    expect(first.tools?.find((t) => t.function.name === "weather")?.function.parameters).toEqual({
      type: "object",
      properties: { city: { type: "string", description: "The city to look up." }, days: { type: "integer" } },
      required: ["city"],
      additionalProperties: false,
    });
    // The call is a tool.call of source `template`; the task waits for the subtask, which runs that template.
    expect(events.find((e) => e.type === "tool.call")?.data).toMatchObject({ tool: "weather", source: "template" });
    expect(events.map((e) => e.state)).toContain("awaiting_subtask");
    expect(events.find((e) => e.type === "subtask.template")?.data).toMatchObject({ template: "weather", source: "library" });
    // The resumed session still offers the tool, and its answer is the subtask's result.
    const resumed = lastBody("TOOLUSER plan a picnic");
    expect(resumed?.tools?.map((t) => t.function.name)).toContain("weather");
    expect(resumed?.messages.at(-1)).toMatchObject({ role: "tool", content: "echo:LOOKUP weather in Oslo for 2 days" });
  });

  it("applies the template's defaults to parameters the model left out", async () => {
    await using s = await stack({ templateTools: ["weather"] });
    const outcome = await s.client.run({ xml: atomic("DEFAULTS go"), taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "got it" });
    expect(lastBody("DEFAULTS go")?.messages.at(-1)).toMatchObject({ role: "tool", content: "echo:LOOKUP weather in Rome for 1 days" });
  });

  it("answers arguments that do not fit the parameters with an error, and the session goes on", async () => {
    await using s = await stack({ templateTools: ["weather"] });
    const outcome = await s.client.run({ xml: atomic("SLOPPY go"), taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "gave up" });
    const answer = lastBody("SLOPPY go")?.messages.at(-1)?.content ?? "";
    expect(answer).toContain("error: invalid arguments for 'weather'");
    expect(answer).toContain("town: not a parameter of 'weather'");
    expect(answer).toContain("city: required");
    expect(answer).toContain("days: expected integer");
  });

  it("is not offered unless named", async () => {
    await using s = await stack();
    await s.client.run({ xml: atomic("NOTOOLS hello"), taskId: newTaskId() });
    expect(lastBody("NOTOOLS hello")?.tools?.map((t) => t.function.name) ?? []).not.toContain("weather");
  });

  it("fails the task naming a template tool that takes the name of one of the Handler's tools", async () => {
    await using s = await stack({ templateTools: ["list_files"], tools: ["read_file", "list_files"] });
    const outcome = await s.client.run({ xml: atomic("CLASH hello"), taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "input_validation_failure", details: { names: ["list_files"] } });
    expect(outcome.error?.message).toContain("take names this Handler's tools already have: list_files");
  });

  it("stops the start when a name is no function template of the library", async () => {
    await expect(stack({ templateTools: ["weather", "plain", "nowhere"] })).rejects.toThrow(
      /DIRIGENT_TEMPLATE_TOOLS: 'plain' \(.*plain\.xml\) is a atomic task, not a function template.*; 'nowhere' is not a template of the library/,
    );
  });
});
