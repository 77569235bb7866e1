/**
 * A checkmate task whose intake asked the user a question, answered with `dirigent input`, loses its Director
 * (`kill -9`) while the worker runs: another Director process resumes it and re-runs the walk, which gets the
 * recorded answer instead of publishing the question again. Directors run as separate processes; the Evaluator,
 * Handler and Memory in this one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import type { CliProcess } from "../support/processes.js";
import { claimant, recordTask, startDirectors } from "../support/takeover.js";
import { newTaskId, startStack } from "../support/stack.js";

const ACK_WAIT_MS = 1500;

let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

const verdict = JSON.stringify({ result: "PASS", score: 90, criteria: [], gapSummary: "" });

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        {
          match: { lastUser: { regex: "intake of a checkmate loop[\\s\\S]*THE USER ANSWERED[\\s\\S]*in Python" } },
          reply: "- written in Python",
        },
        { match: { lastUser: { regex: "intake of a checkmate loop" } }, reply: "[NEEDS_CLARIFICATION]\n1. Which language?" },
        // Held until the task has resumed: the kill lands while the worker runs; the survivor's re-run joins its session.
        { match: { lastUser: { regex: "worker in a checkmate loop" } }, reply: "print('hi')", gate: { name: "worker", count: 1000 } },
        { match: { lastUser: { regex: "judge in a checkmate loop" } }, reply: verdict },
      ],
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

describe("a checkmate task's Director killed after the user answered", () => {
  it("is resumed by another Director: the question is not asked again, the task ends with one result", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["evaluator", "handler", "memory"] });
    const env = { DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS), DIRIGENT_LOG_LEVEL: "info" };
    const directors = await startDirectors(server.url, root, env);
    processes.push(...directors);

    const taskId = newTaskId();
    const { events, results } = await recordTask(stack, taskId, (e) => {
      if (e.type === "continuation.input") void stack.client.input(taskId, "in Python");
    });
    await stack.client.submit({ xml: `<task type="judge_loop"><description>CM-CRASH write a script</description></task>`, taskId });

    const owner = await claimant(directors, taskId);
    // Answered, and the worker running: the owner dies.
    await events.until((v) => v.some((e) => e.type === "checkmate.iteration"), "the first iteration");
    expect(events.values.filter((e) => e.type === "continuation.input").map((e) => e.message)).toEqual(["1. Which language?"]);
    owner.child.kill("SIGKILL");
    await owner.exited;

    await events.until((v) => v.some((e) => e.type === "task.resumed"), "the resume", 60_000);
    mock.openGate("worker");
    await results.count(1, "the result", 60_000);
    expect(results.values[0]).toMatchObject({
      taskId,
      status: "COMPLETE",
      content: "print('hi')",
      notes: { clarifications: [{ questions: "1. Which language?", answer: "in Python" }], criteria: "- written in Python" },
    });
    // The re-run walk asked nothing: one question in all, and the task never went back to awaiting_input.
    expect(events.values.filter((e) => e.type === "continuation.input")).toHaveLength(1);
    const resumedAt = events.values.findIndex((e) => e.type === "task.resumed");
    expect(events.values.slice(resumedAt).filter((e) => e.state === "awaiting_input")).toEqual([]);
  });
});
