/**
 * Fan-out over a real nats-server: a map of steps, a map over a list, fail_fast and collect, parallel nested inputs,
 * map-reduce, and the per-task bound. The mock model holds answers at a gate until every branch's request is in flight, so a map that ran its branches one at a time would not finish.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
const mockLog = new Recorder<string>();

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "^THREE " } }, gate: { name: "three", count: 3 }, reply: '{"said":"{{lastUser}}"}' },
        { match: { lastUser: { regex: "^LIST " } }, gate: { name: "list", count: 4 }, reply: "summary of {{lastUser}}" },
        { match: { lastUser: { regex: "^INPUT " } }, gate: { name: "inputs", count: 2 }, reply: "value:{{lastUser}}" },
        { match: { lastUser: "BREAK" }, status: 400, reply: "bad request" },
        // Held at a gate that never opens: only cancellation ends these sessions.
        { match: { lastUser: { regex: "^SLOW " } }, gate: { name: "never", count: 100 }, reply: "late" },
        { match: { lastUser: { regex: "^BOUND " } }, gate: { name: "bound", count: 3 }, reply: "never" },
        { match: { lastUser: { regex: "^JSON " } }, reply: '{"word":"{{lastUser}}"}' },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
    log: (line) => mockLog.push(line),
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

function details(outcome: { error?: unknown }): Record<string, unknown> {
  const error = outcome.error as { details?: Record<string, unknown> } | undefined;
  return error?.details ?? {};
}

const progress = (events: Recorder<TaskEvent>, type: string) => events.values.filter((e) => e.type === type);

describe("map over a real nats-server", () => {
  it("runs its steps at once and returns their results in step order, with branch events", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const xml = `<task type="map">
      <steps>
        <task><description>THREE alpha</description></task>
        <task><description>THREE beta</description></task>
        <task><description>THREE {{word}}</description><inputs><input name="word">gamma</input></inputs></task>
      </steps>
    </task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome.status).toBe("COMPLETE");
    expect(JSON.parse(outcome.content)).toEqual(['{"said":"THREE alpha"}', '{"said":"THREE beta"}', '{"said":"THREE gamma"}']);
    const results = outcome.notes["step_results"] as { status: string; parsedContent: unknown }[];
    expect(results.map((r) => [r.status, r.parsedContent])).toEqual([
      ["COMPLETE", { said: "THREE alpha" }],
      ["COMPLETE", { said: "THREE beta" }],
      ["COMPLETE", { said: "THREE gamma" }],
    ]);
    expect(outcome.parsedContent).toEqual([{ said: "THREE alpha" }, { said: "THREE beta" }, { said: "THREE gamma" }]);
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(progress(events, "map.started")[0]?.message).toBe("map started: 3 branches, 3 at once");
    expect(
      progress(events, "branch.started")
        .map((e) => e.message)
        .sort(),
    ).toEqual(["branch 1/3", "branch 2/3", "branch 3/3"]);
    const finished = progress(events, "branch.finished");
    expect(finished.map((e) => e.data?.["finished"])).toEqual([1, 2, 3]);
    expect(finished.every((e) => e.data?.["status"] === "COMPLETE")).toBe(true);
  });

  it("runs its one step once per element of a list input, each branch under its own node path", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const xml = `<task type="map" over="files" as="file" max_parallel="4">
      <inputs><input name="files" from="paths"/></inputs>
      <steps><task><description>LIST {{file}} ({{file_index}})</description></task></steps>
    </task>`;
    const paths = JSON.stringify(["a.md", "b.md", "c.md", "d.md"]);
    const outcome = await stack.client.run({ xml, inputs: { paths }, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome.status).toBe("COMPLETE");
    expect(JSON.parse(outcome.content)).toEqual([
      "summary of LIST a.md (0)",
      "summary of LIST b.md (1)",
      "summary of LIST c.md (2)",
      "summary of LIST d.md (3)",
    ]);
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    const paths_ = progress(events, "branch.started").map((e) => e.data?.["nodePath"]);
    expect([...paths_].sort()).toEqual(["0/map:0", "0/map:1", "0/map:2", "0/map:3"]);
    // The session of each branch runs under the branch's scope.
    const sessions = progress(events, "node.started").map((e) => e.data?.["nodePath"]);
    expect([...sessions].sort()).toEqual(["0/map:0:0.steps.0", "0/map:1:0.steps.0", "0/map:2:0.steps.0", "0/map:3:0.steps.0"]);
  });

  it("fail_fast: the first failed branch cancels the running ones, and the failure names it", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const xml = `<task type="map">
      <steps>
        <task><description>SLOW one</description></task>
        <task><description>BREAK</description></task>
        <task><description>SLOW three</description></task>
      </steps>
    </task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toMatch(/^branch 2\/3 failed: /);
    expect(details(outcome)["failedBranches"]).toEqual([2]);
    expect(details(outcome)["cancelledBranches"]).toEqual([1, 3]);
    await events.until((v) => v.some((e) => e.type === "task.failed"), "the failed event");
    const cancelled = progress(events, "branch.finished").filter((e) => e.data?.["status"] === "CANCELLED");
    expect(cancelled.map((e) => e.message).sort()).toEqual(["branch 1/3 CANCELLED", "branch 3/3 CANCELLED"]);
    // The cancelled branches' sessions stopped in the Handler: their model requests were dropped, not left to run.
    await mockLog.until((v) => v.filter((l) => l.includes("aborted by client at gate")).length >= 2, "both held requests to be dropped");
  });

  it("collect: every branch runs; the failure names each failed one and keeps the others' results", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="map" on_failure="collect">
      <steps>
        <task><description>JSON first</description></task>
        <task><description>BREAK</description></task>
        <task><description>JSON third</description></task>
      </steps>
    </task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toMatch(/^1 of 3 branches failed: branch 2: /);
    const partial = details(outcome)["partialResults"] as { status: string; parsedContent?: unknown }[];
    expect(partial.map((r) => [r.status, r.parsedContent])).toEqual([
      ["COMPLETE", { word: "JSON first" }],
      ["FAILED", undefined],
      ["COMPLETE", { word: "JSON third" }],
    ]);
  });

  it("evaluates a step's nested input tasks at once, then the step", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task>
      <description>combine {{a}} and {{b}}</description>
      <inputs>
        <input name="a"><task><description>INPUT left</description></task></input>
        <input name="b"><task><description>INPUT right</description></task></input>
      </inputs>
    </task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "echo:combine value:INPUT left and value:INPUT right" });
  });

  it("map-reduce: a map over a list feeds a reduce over its results", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="sequential">
      <steps>
        <task type="map" over="words">
          <steps><task><description>JSON {{item}}</description></task></steps>
        </task>
        <task type="reduce" over="previous_result">
          <initial_value>start</initial_value>
          <inner_task><task><description>PICK {{current_input}}</description></task></inner_task>
          <reduction_task><task><description>FOLD {{accumulator}} + {{current_result}}</description></task></reduction_task>
        </task>
      </steps>
    </task>`;
    const outcome = await stack.client.run({ xml, inputs: { words: ["x", "y"] }, taskId: newTaskId() });
    expect(outcome.status).toBe("COMPLETE");
    expect(outcome.content).toBe('echo:FOLD echo:FOLD start + echo:PICK {"word":"JSON x"} + echo:PICK {"word":"JSON y"}');
  });

  it("refuses a map over a value that is not a list, naming it", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="map" over="n"><steps><task><description>x</description></task></steps></task>`;
    const outcome = await stack.client.run({ xml, inputs: { n: 5 }, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      reason: "input_validation_failure",
      message: 'over="n": expected a list (a JSON array), got number',
    });
  });

  it("refuses bad map attributes at submission, with line and column", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="sequential"><steps>\n  <task type="map" on_failure="sometimes"><steps><task><description>x</description></task></steps></task>\n</steps></task>`;
    const refused = await stack.client.run({ xml, taskId: newTaskId() }).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: "INVALID_TEMPLATE" });
    expect(String(refused)).toMatch(/invalid on_failure attribute of <task> 'sometimes': expected fail_fast or collect/);
    const raw = await stack.transport.bus.request(`${stack.root}.tasks.submit`, new TextEncoder().encode(xml), { timeoutMs: 5000 });
    const body = JSON.parse(new TextDecoder().decode(raw)) as { error: { code: string; line: number; col: number } };
    expect(body.error).toMatchObject({ code: "INVALID_TEMPLATE", line: 2, col: 3 });
  });

  it("holds a task to DIRIGENT_TASK_PARALLELISM Handler calls at once, whatever its maps allow", async () => {
    await using stack = await startStack({ url: server.url, mock, config: { taskParallelism: 2 } });
    const taskId = newTaskId();
    const watch = stack.client.watch(taskId);
    await stack.transport.bus.flush();
    const xml = `<task type="map" max_parallel="3">
      <steps>
        <task><description>BOUND a</description></task>
        <task><description>BOUND b</description></task>
        <task><description>BOUND c</description></task>
      </steps>
    </task>`;
    const before = mock.requests.length;
    const arrived = () => mockLog.values.filter((l) => l.includes("at gate 'bound'")).length;
    const seen = arrived();
    await stack.client.submit({ xml, taskId });
    // The gate wants three at once; the task may have two: the third waits in the Evaluator, not at the model.
    await mockLog.until(() => arrived() - seen >= 2, "two calls at the gate");
    await stack.client.cancel(taskId);
    expect((await watch.result).status).toBe("CANCELLED");
    await watch.close();
    expect(mock.requests.slice(before).filter((r) => JSON.stringify(r.body.messages).includes("BOUND"))).toHaveLength(2);
  });
});
