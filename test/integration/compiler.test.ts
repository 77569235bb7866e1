/**
 * The Compiler over a real nats-server, with the model reached through the openai SDK and answered by
 * `dirigent mock-llm`: validation errors are fed back and the model answers again (bounded), decompose mode, and
 * tasks submitted in words (`prompt`) that are compiled, stored and then run.
 */
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readTaskRecord } from "../../actors/director/records.js";
import { decode, encodeJson, ErrorReply, TaskId, TaskRecord, type TaskEvent } from "../../protocol/index.js";
import { RemoteError } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const COMPILER = "dirigent task compiler";
const RETRY = { regex: "not a valid template" };
const GOOD = `<task type="atomic">
  <description>Write a haiku about {{topic}}.</description>
</task>`;
const SPLIT = `<task type="sequential">
  <steps>
    <task><description>Summarise the first half of {{text}}.</description></task>
    <task><description>Summarise the second half of {{text}}, after: {{previous_result}}</description></task>
  </steps>
</task>`;

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // Retry: an invalid first answer, then a valid one once the errors are fed back.
        {
          match: { system: COMPILER, anyMessage: "REQ-RETRY", lastUser: { regex: "mismatched tag" } },
          reply: "Fixed:\n```xml\n" + GOOD + "\n```",
        },
        { match: { system: COMPILER, anyMessage: "REQ-RETRY" }, reply: "<task><description>Write a haiku.</descriptio></task>" },
        // Never valid.
        { match: { system: COMPILER, anyMessage: "REQ-NEVER" }, reply: "I would rather write prose." },
        { match: { system: COMPILER, anyMessage: "REQ-FILTERED" }, reply: GOOD, finishReason: "content_filter" },
        { match: { system: COMPILER, anyMessage: "REQ-REFUSED" }, refusal: "I can't help with that." },
        // Decompose: an atomic answer is refused, a sequential one accepted.
        { match: { system: COMPILER, anyMessage: "REQ-SPLIT", lastUser: RETRY }, reply: SPLIT },
        { match: { system: COMPILER, anyMessage: "REQ-SPLIT" }, reply: "<task><description>Summarise {{text}}.</description></task>" },
        // A task submitted in words: compiled at once, then run by the Handler.
        { match: { system: COMPILER, anyMessage: "REQ-HAIKU" }, reply: GOOD },
        { match: { system: COMPILER, anyMessage: "REQ-SLOW" }, reply: GOOD, delayMs: 60_000 },
        { match: { system: COMPILER, anyMessage: "REQ-HANDOVER" }, reply: GOOD },
        { match: { lastUser: "haiku about winter" }, reply: "snow settles", delayMs: 1500 },
        { match: { lastUser: "haiku about autumn" }, reply: "leaves let go softly" },
      ],
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const requestsWith = (token: string) => mock.requests.filter((r) => JSON.stringify(r.body.messages).includes(token));
const lastUserOf = (messages: readonly Record<string, unknown>[]) =>
  String([...messages].reverse().find((m) => m["role"] === "user")?.["content"]);

describe("compiler over a real nats-server", () => {
  it("feeds validation errors back and returns the first valid template", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const reply = await stack.client.compile({ prompt: "REQ-RETRY: a haiku about a topic", inputNames: ["topic"] });
    expect(reply).toMatchObject({
      type: "compiler.result",
      xml: GOOD,
      attempts: 2,
      errors: [expect.stringMatching(/^attempt 1: line 1, col \d+: not well-formed XML: mismatched tag/)],
    });
    expect(reply.usage?.completionTokens).toBeGreaterThan(0);
    const [first, second] = requestsWith("REQ-RETRY").map((r) => r.body.messages as Record<string, unknown>[]);
    expect(first).toHaveLength(2);
    expect(String(first?.[0]?.["content"])).toContain(COMPILER);
    expect(lastUserOf(first ?? [])).toContain("{{topic}}");
    // The second request carries the bad answer and the parser's error, located.
    expect(second).toHaveLength(4);
    expect(second?.[2]).toMatchObject({ role: "assistant", content: "<task><description>Write a haiku.</descriptio></task>" });
    expect(lastUserOf(second ?? [])).toMatch(
      /^That answer is not a valid template:\n- line 1, col \d+: not well-formed XML: mismatched tag/,
    );
  });

  it("gives up after maxAttempts with INVALID_TEMPLATE naming the last errors", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const before = requestsWith("REQ-NEVER").length;
    const error = await stack.client.compile({ prompt: "REQ-NEVER", maxAttempts: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({
      code: "INVALID_TEMPLATE",
      message: expect.stringMatching(/no valid template after 2 attempts: .*not XML/),
    });
    expect(requestsWith("REQ-NEVER").length - before).toBe(2);
  });

  it("fails at once, naming the reason, when the server's content filter blocks the answer or the model refuses", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const filtered = await stack.client.compile({ prompt: "REQ-FILTERED", maxAttempts: 3 }).catch((e: unknown) => e);
    expect(filtered).toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringContaining("blocked by the server's content filter (finish_reason 'content_filter')"),
    });
    expect(requestsWith("REQ-FILTERED")).toHaveLength(1);
    const refused = await stack.client.compile({ prompt: "REQ-REFUSED", maxAttempts: 3 }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "UNAVAILABLE", message: expect.stringContaining("the model refused: I can't help with that.") });
    expect(requestsWith("REQ-REFUSED")).toHaveLength(1);
  });

  it("decomposes a failed node into a sequential sub-tree", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const reply = await stack.client.compile({
      mode: "decompose",
      prompt: "REQ-SPLIT: summarise {{text}}",
      failed: {
        error: "context window exhausted: 130000/102400 tokens",
        xml: "<task><description>Summarise {{text}}.</description></task>",
      },
      inputNames: ["text"],
    });
    expect(reply).toMatchObject({
      xml: SPLIT,
      attempts: 2,
      errors: [expect.stringMatching(/a decomposition must be one <task type="sequential">.*got type 'atomic'/)],
    });
    const [first] = requestsWith("REQ-SPLIT").map((r) => r.body.messages as Record<string, unknown>[]);
    expect(lastUserOf(first ?? [])).toContain("ran out of resources: context window exhausted: 130000/102400 tokens");
  });

  it("refuses a malformed compile request with INVALID_MESSAGE", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const raw = await stack.transport.bus.request(
      stack.system.subjects.compile,
      encodeJson({ type: "compiler.compile", prompt: "x", mode: "decompose" }),
      { timeoutMs: 5000 },
    );
    const reply = decode(ErrorReply, raw);
    expect(reply.ok && reply.value.error).toMatchObject({
      code: "INVALID_MESSAGE",
      message: expect.stringContaining("'failed' is required in decompose mode"),
    });
  });

  it("runs a task submitted with a prompt: stored as is, compiled, announced, then evaluated", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ prompt: "REQ-HAIKU: a haiku about a topic", inputs: { topic: "autumn" }, taskId }, (e) =>
      events.push(e),
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "leaves let go softly" });
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.map((e) => e.type)).toEqual([
      "task.queued",
      "task.running",
      "task.compiled",
      "node.started",
      "model.turn",
      "node.finished",
      "task.completed",
    ]);
    expect(events.values.find((e) => e.type === "task.compiled")).toMatchObject({ state: "running", data: { xml: GOOD, attempts: 1 } });
    const stored = await stack.transport.store.get(taskId);
    const record = stored ? decode(TaskRecord, stored) : undefined;
    expect(record?.ok && record.value).toMatchObject({
      state: "completed",
      prompt: "REQ-HAIKU: a haiku about a topic",
      xml: GOOD,
      inputs: { topic: "autumn" },
    });
    expect(lastUserOf(requestsWith("REQ-HAIKU")[0]?.body.messages ?? [])).toContain("{{topic}}");
  });

  it("a resumed prompt task runs the template its record holds, without compiling again", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const taskId = TaskId.parse(newTaskId());
    const at = new Date().toISOString();
    // The record as a Director that compiled the prompt and then died leaves it.
    const record: TaskRecord = {
      taskId,
      state: "running",
      xml: GOOD,
      prompt: "REQ-RESUMED",
      inputs: { topic: "autumn" },
      submittedAt: at,
      updatedAt: at,
      owner: "director-dead",
      claimedAt: at,
      seq: 3,
    };
    const events = new Recorder<TaskEvent>();
    const watch = stack.client.watch(taskId, (e) => events.push(e));
    await stack.transport.bus.flush();
    expect(await stack.transport.store.create(taskId, encodeJson(record))).toBe("created");
    await stack.transport.queue.enqueue(taskId, encodeJson({ taskId }));
    expect(await watch.result).toMatchObject({ status: "COMPLETE", content: "leaves let go softly" });
    await watch.close();
    expect(requestsWith("REQ-RESUMED")).toHaveLength(0);
    expect(events.values.map((e) => e.type)).toContain("task.resumed");
    expect(events.values.map((e) => e.type)).not.toContain("task.compiled");
  });

  it("a prompt task handed to another Director mid-run resumes from its snapshot without compiling again", async () => {
    // Two Directors on one root; the first hands the task back (drain) while the model works on it.
    await using workers = await startStack({ url: server.url, mock, roles: ["evaluator", "handler"] });
    await using first = await startStack({ url: server.url, mock, root: workers.root, roles: ["director"] });
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    const watch = workers.client.watch(taskId, (e) => events.push(e));
    await workers.transport.bus.flush();
    await workers.client.submit({ prompt: "REQ-HANDOVER: a haiku about a topic", inputs: { topic: "winter" }, taskId });
    await events.until((v) => v.some((e) => e.type === "node.started"), "the compiled template to run");
    // The compiled template is stored with the claim; the snapshot follows with a checkpoint (at the latest when the
    // pending claim falls due): poll for it.
    const deadline = Date.now() + 5000;
    let record = (await readTaskRecord(first.transport.store, taskId))?.record;
    while (!record?.machine && Date.now() < deadline) {
      await delay(20);
      record = (await readTaskRecord(first.transport.store, taskId))?.record;
    }
    // The checkpointed snapshot was taken before the compile: its input still holds the empty template.
    expect(record?.machine).toMatchObject({ snapshot: { context: { xml: "" } } });
    await using second = await startStack({ url: server.url, mock, root: workers.root, roles: ["director"] });
    await first.stop();
    expect(await watch.result).toMatchObject({ status: "COMPLETE", content: "snow settles" });
    await watch.close();
    expect(events.values.filter((e) => e.type === "task.resumed")).toHaveLength(1);
    expect(events.values.filter((e) => e.type === "task.compiled")).toHaveLength(1);
    expect(requestsWith("REQ-HANDOVER")).toHaveLength(1);
    void second;
  });

  it("fails a prompt task with XML_PARSE_ERROR when no answer compiles, after reporting each retry", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ prompt: "REQ-NEVER again", taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({
      status: "FAILED",
      error: {
        type: "XML_PARSE_ERROR",
        message: expect.stringMatching(/could not compile the prompt.*no valid template after 3 attempts/),
      },
    });
    await events.until((v) => v.some((e) => e.type === "task.failed"), "the failed event");
    expect(events.values.filter((e) => e.type === "compile.retry").map((e) => e.data?.["attempt"])).toEqual([1, 2]);
  });

  it("cancels a prompt task while it compiles, aborting the model request", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const watch = stack.client.watch(taskId);
    await stack.transport.bus.flush();
    await stack.client.submit({ prompt: "REQ-SLOW", taskId });
    const deadline = Date.now() + 10_000;
    while (requestsWith("REQ-SLOW").length === 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    expect(await stack.client.cancel(taskId)).toEqual({ taskId, state: "cancelled", cancelled: true });
    expect(await watch.result).toMatchObject({ status: "CANCELLED" });
    await watch.close();
  });

  it("refuses a submission with both xml and prompt with INVALID_MESSAGE", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const raw = await stack.transport.bus.request(stack.system.subjects.submit, encodeJson({ xml: GOOD, prompt: "REQ-HAIKU" }), {
      timeoutMs: 5000,
    });
    const reply = decode(ErrorReply, raw);
    expect(reply.ok && reply.value.error).toMatchObject({
      code: "INVALID_MESSAGE",
      message: expect.stringContaining("exactly one of 'xml', 'template' or 'prompt' is required"),
    });
  });
});
