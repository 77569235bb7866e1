/**
 * Library templates used from submitted documents over a real nats-server with the mock model: `<call template>`
 * (and inline calls) of a function template of the library when the document does not define one.
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
  mock = await startMockLlm({ port: 0, script: { rules: [], default: { reply: "echo:{{lastUser}}" } } });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

const stack = () => startStack({ url: server.url, mock, config: { workspaceRoot: workspace, templates } });

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
