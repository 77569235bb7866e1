/**
 * Model faults a hosted API really answers with, end to end with the default retry settings: NATS → Director →
 * Evaluator → Handler → the real `openai` SDK → `dirigent mock-llm` over HTTP. Rate limits with retry-after, a
 * retry-after past the retry budget, a content-filtered answer and a refusal.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { DEFAULTS, type Config } from "../../runtime/config.js";
import type { MockScript } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const TASK = "<task><description>Summarise the notes.</description></task>";

/** The retry settings as shipped: the test stack turns retries off unless told otherwise. */
const RETRY_DEFAULTS = {
  modelMaxRetries: DEFAULTS.modelMaxRetries,
  modelRetryBaseMs: DEFAULTS.modelRetryBaseMs,
  modelRetryMaxMs: DEFAULTS.modelRetryMaxMs,
  modelRetryBudgetMs: DEFAULTS.modelRetryBudgetMs,
} satisfies Partial<Config>;

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

/** Runs TASK on a fresh stack with the default retry settings; returns the outcome, the events and the model's requests. */
async function run(script: MockScript, config: Partial<Config> = {}) {
  await using stack = await startStack({ url: server.url, script, config: { ...RETRY_DEFAULTS, ...config } });
  expect(stack.config).toMatchObject({ modelMaxRetries: 5, modelRetryBudgetMs: 60_000 });
  const events = new Recorder<TaskEvent>();
  const outcome = await stack.client.run({ xml: TASK, taskId: newTaskId() }, (e) => events.push(e));
  await events.until((v) => v.some((e) => e.type.startsWith("task.") && e.state !== "running" && e.state !== "queued"), "the final event");
  return { outcome, events: events.values, requests: stack.mock.requests };
}

const retriesOf = (events: readonly TaskEvent[]) => events.filter((e) => e.type === "model.retry").map((e) => e.data);

describe("rate limits with the default retry settings", () => {
  it("survives three 429s in a row, waiting the server's retry-after each time", async () => {
    const { outcome, events, requests } = await run({
      rules: [{ status: 429, times: 3, error: "Rate limit reached", headers: { "retry-after": "1" } }, { reply: "after the storm" }],
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "after the storm" });
    expect(requests).toHaveLength(4);
    expect(requests.map((r) => r.answeredBy)).toEqual([0, 0, 0, 1]);
    expect(retriesOf(events)).toEqual(
      [1, 2, 3].map((attempt) => expect.objectContaining({ attempt, maxRetries: 5, delayMs: 1000, fromRetryAfter: true, status: 429 })),
    );
    expect(events.find((e) => e.type === "model.retry")?.message).toBe("retry 1/5 in 1000 ms (retry-after): 429 Rate limit reached");
  });

  it("survives five 429s in a row", async () => {
    const { outcome, events, requests } = await run({
      rules: [{ status: 429, times: 5, headers: { "retry-after": "1" } }, { reply: "finally" }],
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "finally" });
    expect(requests).toHaveLength(6);
    expect(retriesOf(events).map((d) => d?.["attempt"])).toEqual([1, 2, 3, 4, 5]);
  });

  it("fails at once, saying why, when the server asks to wait longer than the retry budget", async () => {
    const { outcome, events, requests } = await run({
      rules: [{ status: 429, error: "Rate limit reached", headers: { "retry-after": "120" } }, { reply: "never asked" }],
    });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error" });
    expect(outcome.error?.message).toContain(
      "model request failed: 429 Rate limit reached; not retried: the server asked to wait 120 s (retry-after), more than the model retry budget of 60 s",
    );
    expect(requests).toHaveLength(1);
    expect(retriesOf(events)).toEqual([]);
  });
});

describe("answers the server blocked or the model refused", () => {
  it("fails the task, not COMPLETE, when the content filter stopped the output", async () => {
    const { outcome, requests } = await run({ rules: [{ reply: "Here is how to", finishReason: "content_filter" }] });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "model_error",
      message: expect.stringContaining("blocked by the server's content filter (finish_reason 'content_filter')"),
    });
    expect(requests).toHaveLength(1);
  });

  it("fails the task with the model's refusal, plain and streamed", async () => {
    for (const streamDeltas of [false, true]) {
      const { outcome, requests } = await run({ rules: [{ refusal: "I'm sorry, but I can't help with that." }] }, { streamDeltas });
      expect(outcome.status).toBe("FAILED");
      expect(outcome.error).toMatchObject({
        type: "TASK_FAILURE",
        reason: "model_error",
        message: expect.stringContaining("the model refused: I'm sorry, but I can't help with that."),
      });
      expect(requests.map((r) => r.body.stream ?? false)).toEqual([streamDeltas]);
    }
  });
});
