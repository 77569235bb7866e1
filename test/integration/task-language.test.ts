/** The task language over a real nats-server: sequential, reduce, function templates and calls, strict substitution. */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "OUTLINE" }, reply: "outline-of-tides" },
        { match: { lastUser: "FAILSTEP" }, status: 400, reply: "bad request" },
        { match: { lastUser: { regex: "^DOUBLE 3$" } }, status: 400, reply: "bad request" },
        { match: { lastUser: { regex: "^DOUBLE (\\d)$" } }, reply: "doubled:{{lastUser}}" },
        { match: { lastUser: "FOLD" }, reply: "[{{lastUser}}]" },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const SEQUENTIAL = `<task type="sequential">
  <description>Write about {{topic}}</description>
  <context_management><accumulation_format>full_output</accumulation_format></context_management>
  <steps>
    <task><description>OUTLINE {{topic}}</description></task>
    <task>
      <description>DRAFT from {{previous_result}}</description>
    </task>
    <task>
      <description>POLISH {{step_results[0]}} + {{draft}}</description>
      <inputs><input name="draft" from="step_results[1]"/></inputs>
    </task>
  </steps>
</task>`;

function lastUsers(from: number): string[] {
  return mock.requests.slice(from).map((r) => {
    const users = r.body.messages.filter((m) => m["role"] === "user");
    return String(users.at(-1)?.["content"] ?? "");
  });
}

describe("task language over a real nats-server", () => {
  it("runs a 3-step sequential task, passing data between steps, and reports step n/N", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const before = mock.requests.length;
    const outcome = await stack.client.run({ xml: SEQUENTIAL, inputs: { topic: "tides" }, taskId: newTaskId() }, (e) => events.push(e));
    expect(lastUsers(before)).toEqual([
      "OUTLINE tides",
      "DRAFT from outline-of-tides",
      "POLISH outline-of-tides + echo:DRAFT from outline-of-tides",
    ]);
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "echo:POLISH outline-of-tides + echo:DRAFT from outline-of-tides",
      notes: { steps: 3 },
    });
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.filter((e) => e.type === "step.started").map((e) => e.message)).toEqual(["step 1/3", "step 2/3", "step 3/3"]);
  });

  it("fails at a failing middle step with failedStep, totalSteps and partial results", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="sequential">
  <context_management><accumulation_format>full_output</accumulation_format></context_management>
  <steps>
    <task><description>OUTLINE first</description></task>
    <task><description>FAILSTEP second</description></task>
    <task><description>never third</description></task>
  </steps>
</task>`;
    const before = mock.requests.length;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      details: { failedStep: 1, totalSteps: 3, partialResults: [{ step: 0, output: "outline-of-tides" }] },
    });
    expect(outcome.error?.message).toContain("step 2/3 failed");
    expect(lastUsers(before).some((u) => u.includes("never third"))).toBe(false);
  });

  it("reduces 3 inputs in order through inner and reduction tasks", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const xml = `<task type="reduce">
  <initial_value>start</initial_value>
  <inputs>
    <input name="a">1</input>
    <input name="b">2</input>
    <input name="c" from="third"/>
  </inputs>
  <inner_task><description>DOUBLE {{current_input}}</description></inner_task>
  <reduction_task><description>FOLD {{accumulator}} with {{current_result}} of {{original_input}}</description></reduction_task>
</task>`;
    const outcome = await stack.client.run({ xml, inputs: { third: "4" }, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome.status).toBe("COMPLETE");
    expect(outcome.content).toBe(
      "[FOLD [FOLD [FOLD start with doubled:DOUBLE 1 of 1] with doubled:DOUBLE 2 of 2] with doubled:DOUBLE 4 of 4]",
    );
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.filter((e) => e.type === "step.started").map((e) => e.message)).toEqual(["input 1/3", "input 2/3", "input 3/3"]);
  });

  it("fails a reduce at an input with failedInputIndex, processedInputs, currentAccumulator and partial results", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="reduce">
  <inputs><input name="a">1</input><input name="b">3</input><input name="c">2</input></inputs>
  <inner_task><description>DOUBLE {{current_input}}</description></inner_task>
  <reduction_task><description>FOLD {{accumulator}}+{{current_result}}</description></reduction_task>
</task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      details: {
        failedInputIndex: 1,
        totalInputs: 3,
        processedInputs: 1,
        currentAccumulator: "[FOLD +doubled:DOUBLE 1]",
        partialResults: [{ index: 0, result: "doubled:DOUBLE 1" }],
      },
    });
  });

  it("calls a function template with positional, named and literal arguments; the body sees only its parameters", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<template name="greet" params="person, tone">
  <task><description>GREET {{person}} in a {{tone}} tone</description></task>
</template>
<call template="greet">
  <arg>user</arg>
  <arg name="tone">"warm"</arg>
</call>`;
    const outcome = await stack.client.run({ xml, inputs: { user: "Ada" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:GREET Ada in a warm tone" });

    const leaky = `<template name="leak" params="person"><task><description>HELLO {{person}} from {{user}}</description></task></template>
<call template="leak"><arg>user</arg></call>`;
    // The caller's `user` can never reach the body: the submission is refused.
    await expect(stack.client.run({ xml: leaky, inputs: { user: "Ada" }, taskId: newTaskId() })).rejects.toMatchObject({
      code: "INVALID_TEMPLATE",
      message: expect.stringContaining(
        "{{user}} in <description> can never be filled: the body of template 'leak' sees only its parameters (person)",
      ),
    });
  });

  it("binds names such as __proto__ and constructor as its own, never as something inherited", async () => {
    await using stack = await startStack({ url: server.url, mock });
    // A required parameter named after an Object.prototype member, not passed: missing, not bound to Object.
    const unpassed = `<template name="f" params="constructor"><task><description>SAY {{constructor}}</description></task></template><call template="f"/>`;
    const missing = await stack.client.run({ xml: unpassed, taskId: newTaskId() });
    expect(missing).toMatchObject({ status: "FAILED", error: { reason: "input_validation_failure" } });
    expect(missing.error?.message).toContain("'constructor'");
    // Passed, such names are ordinary parameters and inputs, `__proto__` included.
    const passed = `<template name="g" params="__proto__, toString"><task><description>SAY {{__proto__}} {{toString}} {{hasOwnProperty}}</description>
  <inputs><input name="hasOwnProperty">own</input></inputs></task></template><call template="g"><arg>"p"</arg><arg>"t"</arg></call>`;
    expect(await stack.client.run({ xml: passed, taskId: newTaskId() })).toMatchObject({ status: "COMPLETE", content: "echo:SAY p t own" });
  });

  it("runs a call as a step of a sequential task", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<template name="shout" params="text"><task><description>SHOUT {{text}}</description></task></template>
<task type="sequential">
  <steps>
    <task><description>OUTLINE x</description></task>
    <call template="shout"><arg>previous_result</arg></call>
  </steps>
</task>`;
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:SHOUT outline-of-tides" });
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    const shown = events.values.filter((e) => e.type === "step.started" || e.type === "call.started").map((e) => e.message);
    expect(shown).toEqual(["step 1/2", "step 2/2", "call shout"]);
  });

  it("fails strict substitution in a step with input_validation_failure naming the variable", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="sequential">
  <steps>
    <task><description>OUTLINE ok</description></task>
    <task><description>Use {{step_results[5].content}}</description></task>
  </steps>
</task>`;
    // `step_results` is bound in a step (so the submission is accepted); it has no sixth entry when the step runs.
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "input_validation_failure",
      details: { failedStep: 1, totalSteps: 2 },
    });
    expect(outcome.error?.message).toContain("'step_results[5].content'");
  });

  it("runs the first <cond> case whose test is true", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const xml = `<cond>
  <case test="severity >= 3 &amp;&amp; kind == 'bug'"><task><description>URGENT {{kind}}</description></task></case>
  <case test="true"><task><description>LATER {{kind}}</description></task></case>
</cond>`;
    const urgent = await stack.client.run({ xml, inputs: { severity: "4", kind: "bug" }, taskId: newTaskId() }, (e) => events.push(e));
    expect(urgent).toMatchObject({ status: "COMPLETE", content: "echo:URGENT bug", notes: { matchedCase: 0 } });
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.find((e) => e.type === "cond.matched")?.message).toContain("case 1/2");
    const later = await stack.client.run({ xml, inputs: { severity: "1", kind: "bug" }, taskId: newTaskId() });
    expect(later).toMatchObject({ status: "COMPLETE", content: "echo:LATER bug", notes: { matchedCase: 1 } });
  });

  it("calls a function-style <task name parameters>, and binds a step input from a nested task", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task name="summarise" parameters="text"><description>SUMMARISE {{text}}</description></task>
<task type="sequential">
  <steps>
    <task>
      <description>TITLE for {{body}}</description>
      <inputs><input name="body"><task><description>OUTLINE nested</description></task></input></inputs>
    </task>
    <call task="summarise"><arg>step_results[0]</arg></call>
  </steps>
</task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:SUMMARISE echo:TITLE for outline-of-tides" });
  });

  it('runs inline calls {{f(a, "lit", 3, k=v)}} in prompt text, and stops recursion at the depth limit', async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<template name="label" params="who, tag, n, sep"><task><description>LABEL {{who}}{{sep}}{{tag}}{{sep}}{{n}}</description></task></template>
<task><description>REPORT {{label(user, "a, b", 3, sep=":")}} done</description></task>`;
    const outcome = await stack.client.run({ xml, inputs: { user: "Ada" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:REPORT echo:LABEL Ada:a, b:3 done" });

    const loop = `<template name="again" params="x"><task><description>AGAIN {{again(x)}}</description></task></template>
<task><description>START {{again("go")}}</description></task>`;
    const halted = await stack.client.run({ xml: loop, taskId: newTaskId() });
    expect(halted.status).toBe("FAILED");
    expect(halted.error?.message).toContain("nested deeper than 5");
  });

  it.each([
    ["sequential.xml", {}, ["step 1/3", "step 2/3", "step 3/3"]],
    ["reduce.xml", {}, ["input 1/3", "input 2/3", "input 3/3"]],
    ["call.xml", {}, ["step 1/2", "step 2/2"]],
    ["cond.xml", { severity: "4", kind: "bug", summary: "login broken" }, []],
    ["map.xml", {}, []],
    ["map-reduce.xml", {}, ["step 1/2", "step 2/2", "input 1/3", "input 2/3", "input 3/3"]],
  ])("runs examples/%s end to end against the mock model", async (file, inputs, steps) => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = await readFile(join(import.meta.dirname, "../../examples", file), "utf8");
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ xml, inputs, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome.status, JSON.stringify(outcome.error)).toBe("COMPLETE");
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.filter((e) => e.type === "step.started").map((e) => e.message)).toEqual(steps);
  });

  it("cancels a sequential task in its second step: the nested model request is aborted and no later step runs", async () => {
    const log = new Recorder<string>();
    const slow = await startMockLlm({
      port: 0,
      script: { rules: [{ match: { lastUser: "SLOW" }, reply: "too late", delayMs: 60_000 }], default: { reply: "fast" } },
      log: (line) => log.push(line),
    });
    await using stack = await startStack({ url: server.url, mock: slow });
    const taskId = newTaskId();
    const watch = stack.client.watch(taskId);
    await stack.transport.bus.flush();
    const xml = `<task type="sequential"><steps>
  <task><description>FAST one</description></task>
  <task><description>SLOW two</description></task>
  <task><description>FAST three</description></task>
</steps></task>`;
    await stack.client.submit({ xml, taskId });
    await log.until((v) => v.some((l) => l.includes("delaying")), "the second step's model request to arrive");
    expect(await stack.client.cancel(taskId)).toMatchObject({ cancelled: true });
    expect((await watch.result).status).toBe("CANCELLED");
    await log.until((v) => v.some((l) => l.includes("aborted by client")), "the model request to be aborted");
    expect(slow.requests.map((r) => JSON.stringify(r.body.messages)).some((m) => m.includes("FAST three"))).toBe(false);
    await watch.close();
    await slow.close();
  });

  it("checks typed parameters: converts a numeric text argument, refuses a mismatch, applies defaults", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = (arg: string) => `<task name="repeat">
  <parameters><parameter name="n" type="integer"/><parameter name="word" default="ho"/></parameters>
  <description>REPEAT {{word}} {{n}} times</description>
</task>
<call task="repeat"><arg>${arg}</arg></call>`;
    expect(await stack.client.run({ xml: xml("count"), inputs: { count: "3" }, taskId: newTaskId() })).toMatchObject({
      status: "COMPLETE",
      content: "echo:REPEAT ho 3 times",
    });
    const wrong = await stack.client.run({ xml: xml('"many"'), taskId: newTaskId() });
    expect(wrong.error).toMatchObject({
      reason: "input_validation_failure",
      message: "argument 'n' of template 'repeat' is not of type integer",
    });
  });
});
