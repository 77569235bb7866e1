/** Strict and lenient `{{var}}` substitution (docs/design.md, C13) end to end over a real nats-server with the mock model. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [{ match: { lastUser: { regex: "^SHOUT " } }, reply: "LOUD" }],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const XML = `<template name="shout" params="text"><task><description>SHOUT {{text}}</description></task></template>
<task type="sequential">
  <steps>
    <task>
      <description>Greet {{name}} in {{language}}.</description>
      <system>Audience: {{audience.kind}}</system>
    </task>
    <call template="shout"><arg>hi {{name}} from {{place}}</arg></call>
  </steps>
</task>`;

const userTexts = (from: number) =>
  mock.requests.slice(from).map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? ""));
const systemTexts = (from: number) =>
  mock.requests.slice(from).map((r) => String(r.body.messages.find((m) => m["role"] === "system")?.["content"] ?? ""));

describe("substitution modes", () => {
  it("strict (the default) fails with input_validation_failure naming the unbound variables; the model is not asked", async () => {
    await using stack = await startStack({ url: server.url, mock });
    expect(stack.config.substitution).toBe("strict");
    const before = mock.requests.length;
    // A name nothing binds is refused at submission; a path into a submitted value is only known to be missing when it runs.
    await expect(stack.client.run({ xml: XML, inputs: { name: "Ada" }, taskId: newTaskId() })).rejects.toMatchObject({
      code: "INVALID_TEMPLATE",
      message: expect.stringMatching(/^\{\{language\}\} in <description> can never be filled/),
    });
    const inputs = { name: "Ada", language: "French", audience: {}, place: { city: "Paris" } };
    const outcome = await stack.client.run({ xml: XML.replace("{{place}}", "{{place.town}}"), inputs, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "input_validation_failure" });
    expect(outcome.error?.message).toContain("missing required input: 'audience.kind'");
    expect(mock.requests.length).toBe(before);
  });

  it("lenient sends {{undefined:name}} markers to the model and completes", async () => {
    await using stack = await startStack({ url: server.url, mock, config: { substitution: "lenient" } });
    const before = mock.requests.length;
    const outcome = await stack.client.run({ xml: XML, inputs: { name: "Ada" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "LOUD", notes: { steps: 2 } });
    expect(userTexts(before)).toEqual(["Greet Ada in {{undefined:language}}.", "SHOUT hi Ada from {{undefined:place}}"]);
    expect(systemTexts(before)[0]).toContain("Audience: {{undefined:audience.kind}}");
  });

  it("lenient keeps script commands strict: no command runs with a marker as an argument", async () => {
    await using stack = await startStack({ url: server.url, mock, config: { substitution: "lenient", commands: ["echo"] } });
    const xml = `<task type="script"><command>echo {{nope}}</command></task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "input_validation_failure", details: { missing: ["nope"] } });
  });

  it("lenient still fails an <input from> whose variable is unbound", async () => {
    await using stack = await startStack({ url: server.url, mock, config: { substitution: "lenient" } });
    const xml = `<task><description>Use {{data}}</description><inputs><input name="data" from="raw_data"/></inputs></task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "input_validation_failure", details: { missing: ["raw_data"] } });
  });
});
