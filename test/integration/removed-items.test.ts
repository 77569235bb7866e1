/**
 * A queue item removed while its delivery is already on its way to this process's Director (the task cancelled
 * while queued, or a duplicate submission's item) is dropped when it arrives: it never runs, and no model is called.
 */
import { describe, expect, it } from "vitest";
import type { WorkItem, WorkQueue } from "../../actors/bus.js";
import { silentLogger } from "../../actors/deps.js";
import type { CallModel } from "../../actors/model.js";
import { createSubjects, decode, TaskOutcome } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { loadConfig } from "../../runtime/config.js";
import { startSystem } from "../../runtime/system.js";
import { openMemoryTransport } from "../../runtime/transport.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId } from "../support/stack.js";

/** `queue`, with every delivery held before its handler runs until {@link release}; `done` records handled items. */
function holding(queue: WorkQueue) {
  const arrived = new Recorder<string>();
  const done = new Recorder<string>();
  const held: Array<() => void> = [];
  let holding = true;
  const wrapped: WorkQueue = {
    enqueue: (id, data) => queue.enqueue(id, data),
    peek: (id) => queue.peek(id),
    discard: (id, seq) => queue.discard(id, seq),
    get ackWaitMs() {
      return queue.ackWaitMs;
    },
    consume: (handler, options) =>
      queue.consume(async (item: WorkItem) => {
        if (holding) {
          arrived.push(item.id);
          await new Promise<void>((resolve) => held.push(resolve));
        }
        await handler(item);
        done.push(item.id);
      }, options),
  };
  const release = () => {
    holding = false;
    for (const resolve of held.splice(0)) resolve();
  };
  return { queue: wrapped, arrived, done, release };
}

describe("a queue item removed on its way to the Director", () => {
  it("is dropped when it arrives after its task was cancelled while queued", async () => {
    const transport = openMemoryTransport(silentLogger);
    const intake = holding(transport.queue);
    const calls: string[] = [];
    const callModel: CallModel = async (request) => {
      calls.push(JSON.stringify(request.messages));
      return { content: "ran", toolCalls: [], usage: { promptTokens: 1, completionTokens: 1 }, model: request.model, finishReason: "stop" };
    };
    const root = "removed";
    const config = { ...loadConfig({}, {}), prefix: root, model: "stub" };
    const system = await startSystem({ config, transport: { ...transport, queue: intake.queue }, callModel });
    try {
      const subjects = createSubjects(root);
      const results = new Recorder<TaskOutcome>();
      transport.bus.subscribe(subjects.anyTaskResult, (m) => {
        const d = decode(TaskOutcome, m.data);
        if (d.ok) results.push(d.value);
      });
      const client = new DirigentClient(transport.bus, subjects);
      const taskId = newTaskId();
      expect(await client.submit({ xml: "<task><description>must not run</description></task>", taskId })).toEqual({ taskId, status: "accepted" });
      // Delivered to the Director, held before it runs.
      await intake.arrived.count(1, "the delivery");
      expect(await client.cancel(taskId)).toEqual({ taskId, state: "cancelled", cancelled: true });
      intake.release();
      await intake.done.count(1, "the delivery handled");
      expect(calls).toEqual([]);
      expect(await client.get(taskId)).toMatchObject({ taskId, state: "cancelled" });
      await results.count(1, "the cancelled result");
      expect(results.values.map((r) => r.status)).toEqual(["CANCELLED"]);
      // The Director still runs the next task.
      const next = newTaskId();
      expect(await client.run({ xml: "<task><description>runs</description></task>", taskId: next })).toMatchObject({ taskId: next, status: "COMPLETE", content: "ran" });
      expect(calls).toHaveLength(1);
    } finally {
      await system.stop();
      await transport.close();
    }
  });
});
