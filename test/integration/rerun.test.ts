/**
 * Re-run and fork over a real nats-server and the mock model (through the `openai` SDK): a fork of a three-step
 * sequential task calls the model only for the node it runs from and those after it (counted at the mock model), from
 * step 1 it equals a fresh run, a changed template runs only its changed step, a fork of a fork works, and a running
 * task or an unknown node is refused with a message naming it.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decode, NodeRecord, type TaskEvent, type TaskRecord } from "../../protocol/index.js";
import type { MockScript } from "../../runtime/model/mock-server.js";
import { RemoteError } from "../../runtime/client.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { pollUntil } from "../support/process-group.js";
import { startCli } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";
import { nodeKey } from "../../actors/evaluator/node-records.js";
import { readTaskRecord } from "../../actors/director/records.js";
import { tid } from "../support/ids.js";

const TASK = `<task type="sequential">
  <description>Three steps.</description>
  <steps>
    <task><description>Step one: list the facts.</description></task>
    <task><description>Step two: summarise {{previous_result}}</description></task>
    <task><description>Step three: a title for {{previous_result}}</description></task>
  </steps>
</task>`;

const CHANGED = TASK.replace("Step three: a title for", "Step three: a short title for");

const SCRIPT: MockScript = {
  rules: [
    { match: { lastUser: "Step two: fragile" }, status: 400, error: "a bad request", times: 1 },
    { match: { lastUser: "Step two: slow" }, reply: "late", gate: { name: "slow", count: 1000 }, times: 1 },
    { match: { lastUser: "Step one" }, reply: "facts A and B" },
    { match: { lastUser: "Step two" }, reply: "summary of A and B" },
    { match: { lastUser: "a short title" }, reply: "Short title" },
    { match: { lastUser: "Step three" }, reply: "A title" },
    { match: { lastUser: "Hold" }, reply: "held", gate: { name: "hold", count: 1000 } },
  ],
  default: { reply: "unexpected" },
};

let server: TestNatsServer;
let stack: Stack;

beforeAll(async () => {
  server = await startTestNatsServer();
  stack = await startStack({ url: server.url, script: SCRIPT, config: { reparse: false } });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await server?.stop();
});

/** Runs `run` and answers its outcome with the model requests it made. */
async function counted<T>(run: () => Promise<T>): Promise<{ value: T; calls: number }> {
  const before = stack.mock.requests.length;
  const value = await run();
  return { value, calls: stack.mock.requests.length - before };
}

async function original(): Promise<string> {
  const taskId = newTaskId();
  const { value, calls } = await counted(() => stack.client.run({ xml: TASK, taskId }));
  expect(value.status).toBe("COMPLETE");
  expect(value.content).toBe("A title");
  expect(calls).toBe(3);
  return taskId;
}

async function taskRecord(taskId: string): Promise<TaskRecord> {
  const read = await readTaskRecord(stack.transport.store, tid(taskId));
  if (!read) throw new Error(`no record of ${taskId}`);
  return read.record;
}

describe("dirigent rerun", () => {
  it(
    "from step 2 calls the model for steps 2 and 3 only; step 1 is replayed from the original's record",
    { timeout: 120_000 },
    async () => {
      const first = await original();
      const events = new Recorder<TaskEvent>();
      const { value, calls } = await counted(() => stack.client.runFork(first, { from: "0.steps.1" }, (e) => events.push(e)));
      expect(value.status).toBe("COMPLETE");
      expect(value.content).toBe("A title");
      expect(calls).toBe(2);
      const fork = value.taskId;
      expect(fork).not.toBe(first);
      expect((await taskRecord(fork)).forkOf).toEqual({ taskId: first, from: "0.steps.1" });
      await events.until((v) => v.some((e) => e.type === "task.completed"), "the fork's final event");
      expect(events.values.every((e) => e.forkOf?.taskId === first)).toBe(true);
      const finished = events.values.filter((e) => e.type === "node.finished").map((e) => e.data);
      expect(finished.filter((d) => d?.["replayed"] === true).map((d) => d?.["nodePath"])).toEqual(["0.steps.0"]);
      // The fork's own record of the replayed step says where it came from.
      const bytes = await stack.transport.turns?.get(nodeKey(fork, "0.steps.0", 1));
      const step1 = bytes && decode(NodeRecord, bytes);
      expect(step1 && step1.ok && step1.value.replayedFrom).toBe(first);
      expect(step1 && step1.ok && step1.value.output.content).toBe("facts A and B");
    },
  );

  it("from step 1 equals a fresh run", { timeout: 120_000 }, async () => {
    const first = await original();
    const { value, calls } = await counted(() => stack.client.runFork(first, { from: "0.steps.0" }));
    expect(calls).toBe(3);
    expect(value.status).toBe("COMPLETE");
    expect(value.content).toBe("A title");
    expect((await stack.client.nodes(value.taskId)).nodes.map((n) => [n.path, n.replayedFrom])).toEqual(
      (await stack.client.nodes(first)).nodes.map((n) => [n.path, undefined]),
    );
  });

  it("with a template changing only step 3, calls the model once; a fork of that fork works too", { timeout: 120_000 }, async () => {
    const first = await original();
    const changed = await counted(() => stack.client.runFork(first, { xml: CHANGED }));
    expect(changed.calls).toBe(1);
    expect(changed.value.content).toBe("Short title");
    expect((await taskRecord(changed.value.taskId)).forkOf).toEqual({ taskId: first, from: "0.steps.2" });

    const again = await counted(() => stack.client.runFork(changed.value.taskId, { from: "0.steps.1" }));
    expect(again.calls).toBe(2);
    expect(again.value.content).toBe("Short title");
    expect((await taskRecord(again.value.taskId)).forkOf).toEqual({ taskId: changed.value.taskId, from: "0.steps.1" });
  });

  it(
    "dirigent rerun --template FILE from another process: forks, follows the fork, and prints its result",
    { timeout: 120_000 },
    async () => {
      const first = await original();
      const dir = await mkdtemp(join(tmpdir(), "dirigent-rerun-"));
      try {
        await writeFile(join(dir, "changed.xml"), CHANGED);
        const flags = ["--nats", server.url, "--prefix", stack.root];
        const before = stack.mock.requests.length;
        const cli = startCli(["rerun", first, "--template", join(dir, "changed.xml"), "--json", ...flags]);
        expect(await cli.exited).toBe(0);
        expect(stack.mock.requests.length - before).toBe(1);
        const lines = cli
          .stdout()
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        expect(lines.find((l) => "replayed" in l && "forkOf" in l)).toMatchObject({
          status: "accepted",
          forkOf: { taskId: first, from: "0.steps.2" },
          replayed: 2,
        });
        expect(lines.at(-1)).toMatchObject({ status: "COMPLETE", content: "Short title" });
        const unknown = startCli(["rerun", first, "--from", "0.steps.7", ...flags]);
        expect(await unknown.exited).toBe(1);
        expect(unknown.output()).toContain("no record of node '0.steps.7'");
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );

  it("forks a failed task and a cancelled one from the node that did not complete", { timeout: 120_000 }, async () => {
    const failed = await counted(() => stack.client.run({ xml: TASK.replace("Step two:", "Step two: fragile"), taskId: newTaskId() }));
    expect(failed.value.status).toBe("FAILED");
    expect(failed.calls).toBe(2);
    const fixed = await counted(() => stack.client.runFork(failed.value.taskId, { from: "0.steps.1" }));
    expect(fixed.calls).toBe(2);
    expect(fixed.value).toMatchObject({ status: "COMPLETE", content: "A title" });

    const taskId = newTaskId();
    const arrived = stack.mock.requests.length;
    const running = stack.client.run({ xml: TASK.replace("Step two:", "Step two: slow"), taskId });
    await pollUntil(() => (stack.mock.requests.length >= arrived + 2 ? true : undefined), "step 2 held at the model");
    await stack.client.cancel(taskId);
    expect((await running).status).toBe("CANCELLED");
    stack.mock.openGate("slow");
    const resumed = await counted(() => stack.client.runFork(taskId, { from: "0.steps.1" }));
    expect(resumed.calls).toBe(2);
    expect(resumed.value).toMatchObject({ status: "COMPLETE", content: "A title" });
  });

  it("refuses a running task, an unknown node and an unknown task, naming the problem", { timeout: 120_000 }, async () => {
    const first = await original();
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (err: unknown) => (err instanceof RemoteError ? { code: err.code, message: err.message } : { code: "?", message: String(err) }),
      );
    expect(await refusal(stack.client.rerun(first, { from: "0.steps.9" }))).toEqual({
      code: "NOT_FOUND",
      message: expect.stringContaining("'0.steps.9'"),
    });
    expect(await refusal(stack.client.rerun("t-no-such-task", { from: "0.steps.1" }))).toMatchObject({ code: "NOT_FOUND" });

    const running = newTaskId();
    const arrived = stack.mock.requests.length;
    await stack.client.submit({ taskId: running, xml: `<task><description>Hold this.</description></task>` });
    await pollUntil(() => (stack.mock.requests.length > arrived ? true : undefined), "the held model call");
    expect(await refusal(stack.client.rerun(running, { from: "0" }))).toEqual({
      code: "CONFLICT",
      message: expect.stringMatching(new RegExp(`task '${running}' is (queued or )?running`)),
    });
    stack.mock.openGate("hold");
    await stack.client.cancel(running).catch(() => undefined);
  });
});
