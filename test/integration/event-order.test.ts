/**
 * The order of a task's events: a composite node reports `node.started` before anything its children report, and a
 * `step.started` comes before the node.started of that step (a sequential, a reduce, and composites nested in each other).
 */
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
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "ok" }] } });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const SEQUENTIAL = `<task type="sequential"><steps>
  <task><description>one</description></task>
  <task><description>two</description></task>
  <task><description>three</description></task>
</steps></task>`;

const REDUCE = `<task type="reduce">
  <initial_value><task><description>start</description></task></initial_value>
  <inputs><input name="a">1</input><input name="b"><task><description>two</description></task></input></inputs>
  <inner_task><description>inner {{current_input}}</description></inner_task>
  <reduction_task><description>fold {{accumulator}} {{current_result}}</description></reduction_task>
</task>`;

const NESTED = `<task type="sequential"><steps>
  <task type="sequential"><steps>
    <task type="sequential"><steps><task><description>deep</description></task></steps></task>
    <task><description>inner</description></task>
  </steps></task>
  <task type="reduce">
    <inputs><input name="a">1</input></inputs>
    <inner_task><description>inner {{current_input}}</description></inner_task>
    <reduction_task><description>fold {{current_result}}</description></reduction_task>
  </task>
</steps></task>`;

const pathOf = (e: TaskEvent): string | undefined => (typeof e.data?.["nodePath"] === "string" ? e.data["nodePath"] : undefined);

/**
 * What breaks the order: an event of a node or of a node inside it (other than the `step.started` that announces the
 * node) before the node's node.started, and a node.started before the step.started that announces it.
 */
function disorder(events: readonly TaskEvent[]): string[] {
  const found: string[] = [];
  const line = (e: TaskEvent) => `${e.type} ${pathOf(e) ?? ""}`;
  events.forEach((e, i) => {
    const path = pathOf(e);
    if (e.type !== "node.started" || path === undefined) return;
    // A node that runs again (a reduce's inner task for each input) is checked from its previous run's end.
    const from = events.slice(0, i).findLastIndex((b) => b.type === "node.finished" && pathOf(b) === path) + 1;
    const before = events.slice(from, i);
    for (const b of before) {
      const p = pathOf(b);
      const announces = b.type === "step.started" && p === path;
      if (!announces && p !== undefined && (p === path || p.startsWith(`${path}.`))) found.push(`${line(b)} before ${line(e)}`);
    }
    const announced = events.slice(from).findIndex((a) => a.type === "step.started" && pathOf(a) === path);
    if (announced > i - from) found.push(`${line(e)} before its step.started`);
  });
  return found;
}

describe("the order of a task's events", () => {
  it.each([
    ["a sequential", SEQUENTIAL, 4],
    ["a reduce", REDUCE, 6],
    ["composites nested in each other", NESTED, 7],
  ])("%s reports node.started before its children's events", async (_, xml, started) => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome.status).toBe("COMPLETE");
    await events.until((v) => v.some((e) => e.type === "task.completed"), "task.completed");
    const lines = events.values.map((e) => `${e.type} ${pathOf(e) ?? ""}`);
    expect(events.values[0]?.type, lines.join("\n")).toBe("task.queued");
    expect(lines.filter((l) => l.startsWith("node.started ")).length, lines.join("\n")).toBeGreaterThanOrEqual(started);
    expect(disorder(events.values), lines.join("\n")).toEqual([]);
    // The entry node is the first to report.
    expect(lines.find((l) => /^(node|step)\.started /.test(l))).toBe("node.started 0");
  });
});
