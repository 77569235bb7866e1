/**
 * `DirigentClient.run` reports the submission's answer before any event of the task, even when the task's first
 * events overtake the answer (a busy machine: the Director queues and runs the task before its reply goes out), so
 * callers (the CLI, `dirigent mcp`, `dirigent a2a`) never see an event of a task they have not been told about.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createSubjects, encode, SubmitReply, TaskEvent, TaskOutcome, type TaskId } from "../../protocol/index.js";
import { DirigentClient, RemoteError } from "../../runtime/client.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";

const subjects = createSubjects("order");
let bus: MemoryBus | undefined;

afterEach(async () => {
  await bus?.close();
});

const event = (taskId: TaskId, seq: number, type: string): TaskEvent => ({
  taskId,
  seq,
  type,
  state: "running",
  at: new Date().toISOString(),
});

/**
 * A runtime that publishes the task's first events, and its result, before it answers the submission; `late`: its
 * final event after the result (as an event stored again after a lost connection comes, docs/deploy.md).
 */
function eagerRuntime(refuse = false, late = false) {
  bus = new MemoryBus({ onError: () => undefined });
  const b = bus;
  b.subscribe(subjects.submit, (msg) => {
    const { taskId } = JSON.parse(new TextDecoder().decode(msg.data)) as { taskId: TaskId };
    b.publish(subjects.taskEvents(taskId), encode(TaskEvent, event(taskId, 1, "task.queued")));
    b.publish(subjects.taskEvents(taskId), encode(TaskEvent, event(taskId, 2, "task.running")));
    if (refuse) {
      msg.respond(new TextEncoder().encode(JSON.stringify({ error: { code: "INVALID_TEMPLATE", message: "no" } })));
      return;
    }
    msg.respond(encode(SubmitReply, { taskId, status: "accepted" }));
    const completed = () =>
      b.publish(subjects.taskEvents(taskId), encode(TaskEvent, { ...event(taskId, 3, "task.completed"), state: "completed" }));
    if (!late) completed();
    b.publish(subjects.taskResult(taskId), encode(TaskOutcome, { taskId, status: "COMPLETE", content: "done", notes: {} }));
    if (late) setImmediate(completed);
  });
  return new DirigentClient(b, subjects);
}

describe("DirigentClient.run", () => {
  it("reports the submission before the events that came before its answer, then every event in order", async () => {
    const client = eagerRuntime();
    const seen: string[] = [];
    const outcome = await client.run({ xml: "<task/>", taskId: "t-order" }, (e) => seen.push(`${e.seq} ${e.type}`), {
      onSubmitted: (reply) => seen.push(`submitted ${reply.status}`),
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "done" });
    expect(seen).toEqual(["submitted accepted", "1 task.queued", "2 task.running", "3 task.completed"]);
  });

  it("reports the task's final event before it returns, should it come just after the result", async () => {
    const client = eagerRuntime(false, true);
    const seen: string[] = [];
    const outcome = await client.run({ xml: "<task/>", taskId: "t-late" }, (e) => seen.push(`${e.seq} ${e.type}`));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "done" });
    expect(seen).toEqual(["1 task.queued", "2 task.running", "3 task.completed"]);
  });

  it("reports no event of a refused submission", async () => {
    const client = eagerRuntime(true);
    const seen: string[] = [];
    const run = client.run({ xml: "<task/>", taskId: "t-refused" }, (e) => seen.push(e.type), {
      onSubmitted: () => seen.push("submitted"),
    });
    await expect(run).rejects.toBeInstanceOf(RemoteError);
    expect(seen).toEqual([]);
  });
});
