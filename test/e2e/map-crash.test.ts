/**
 * A Director dies mid-map (`kill -9`): the task moves to another Director process, and the map repeats no finished
 * branch: the branches that had finished are replayed from the Handler's records, the ones still running are joined,
 * and every model request was made once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import type { CliProcess } from "../support/processes.js";
import { claimant, recordTask, startDirectors } from "../support/takeover.js";
import { newTaskId, startStack } from "../support/stack.js";

const ACK_WAIT_MS = 1500;
/** The slow branches are still running when the Director dies, and finish before the task resumes. */
let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      // The slow branches are held at a gate until the task has resumed on the other Director.
      rules: [{ match: { lastUser: { regex: "^SLOW " } }, reply: "slow:{{lastUser}}", gate: { name: "slow", count: 1000 } }],
      default: { reply: "fast:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

const MAP = `<task type="map" over="items" max_parallel="4">
  <steps><task><description>{{item}}</description></task></steps>
</task>`;
const ITEMS = ["FAST one", "SLOW two", "FAST three", "SLOW four"];

describe("a Director killed mid-map", () => {
  it("moves the task to another Director, which repeats no finished branch", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["evaluator", "handler", "memory"] });
    const env = { DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS), DIRIGENT_LOG_LEVEL: "info" };
    const directors = await startDirectors(server.url, root, env);
    processes.push(...directors);

    const taskId = newTaskId();
    const { events, results } = await recordTask(stack, taskId);
    await stack.client.submit({ xml: MAP, inputs: { items: ITEMS }, taskId });

    const owner = await claimant(directors, taskId);
    // Two branches finished, two still at the model: the Director dies.
    await events.until((v) => v.filter((e) => e.type === "branch.finished").length >= 2, "two finished branches");
    expect(
      events.values
        .filter((e) => e.type === "branch.finished")
        .map((e) => e.data?.["nodePath"])
        .sort(),
    ).toEqual(["0/map:0", "0/map:2"]);
    owner.child.kill("SIGKILL");
    await owner.exited;

    await events.until((v) => v.some((e) => e.type === "task.resumed"), "the resume", 60_000);
    mock.openGate("slow");
    await results.count(1, "the result", 60_000);
    const outcome = results.values[0];
    expect(outcome).toMatchObject({ taskId, status: "COMPLETE" });
    expect(JSON.parse(outcome?.content ?? "")).toEqual(["fast:FAST one", "slow:SLOW two", "fast:FAST three", "slow:SLOW four"]);
    // Every branch reached the model once: the finished ones were replayed, the running ones joined.
    const prompts = mock.requests.map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"]));
    expect(prompts.sort()).toEqual([...ITEMS].sort());
    const resumedAt = events.values.findIndex((e) => e.type === "task.resumed");
    const replayed = events.values.slice(resumedAt).filter((e) => e.type === "model.replayed");
    expect(replayed.length).toBeGreaterThanOrEqual(2);
  });
});
