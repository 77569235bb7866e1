/**
 * Bounded work per message, end to end: a task whose description is ~900 KB of one repeated character (BPE of one
 * such "word" is quadratic: gpt-tokenizer alone spent minutes on it and nats-server dropped the Handler as a slow
 * consumer) fails with a clear reason without calling the model, and a normal task on the same stack then
 * completes. Real nats-server, the real `openai` SDK against the mock model over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
beforeAll(async () => {
  server = await startTestNatsServer();
});
afterAll(async () => server?.stop());

describe("hostile input", () => {
  it("fails a task with a 900 KB description of one character on the context limit, then runs a normal task", async () => {
    await using stack = await startStack({ url: server.url, script: { rules: [{ reply: "done" }] }, config: { reparse: false } });
    const huge = `<task><description>${"a".repeat(900_000)}</description></task>`;
    const failed = await stack.client.run({ xml: huge, taskId: newTaskId() });
    expect(failed.status).toBe("FAILED");
    expect(failed.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "context", metrics: { limit: 102_400 } });
    expect(failed.error?.message).toMatch(/^context limit of 102400 tokens reached \(\d+ to send\)$/);
    expect(stack.mock.requests).toHaveLength(0);

    const normal = await stack.client.run({ xml: "<task><description>Say done.</description></task>", taskId: newTaskId() });
    expect(normal).toMatchObject({ status: "COMPLETE", content: "done" });
    expect(stack.mock.requests).toHaveLength(1);
  });
});
