/**
 * A task's result is stored in the events stream exactly once even when its acknowledged write fails (a clustered
 * stream still electing a leader after the write's patience): the Director sends nothing unstored, hands the
 * delivery back, and stores the result at the redelivery, which finds the task final (actors/director/results.ts).
 * Over a real nats-server, with the write failing once, before or after it landed; and with the events stream
 * deleted under the running Director, which creates it again.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import { readStoredTask } from "../../runtime/inspect/replay.js";
import type { OpenTransport } from "../../runtime/transport.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startTestNatsServer();
  nc = await connect({ servers: server.url });
});

afterAll(async () => {
  await nc?.close();
  await server?.stop();
});

/**
 * A transport whose first result write fails: before it reaches the stream, or after the stream stored it. `settled`
 * resolves once the redelivery has dealt with the result: stored it (a second write), or found it stored.
 */
function failingFirstWrite(landed: boolean) {
  const writes: string[] = [];
  let settle!: (how: "written" | "found") => void;
  const settled = new Promise<"written" | "found">((resolve) => (settle = resolve));
  const wrap = (transport: OpenTransport): OpenTransport => {
    const { publishStored, lastPublished } = transport;
    if (publishStored === undefined || lastPublished === undefined) throw new Error("a NATS transport stores results");
    return {
      ...transport,
      publishStored: async (subject, data, id) => {
        // Events may be stored the same way (actors/director/event-publisher.ts); only the result's write fails here.
        if (!subject.endsWith(".result")) return publishStored(subject, data, id);
        writes.push(id);
        if (writes.length > 1) return publishStored(subject, data, id).then(() => settle("written"));
        if (landed) await publishStored(subject, data, id);
        throw new Error("no answer within 15 s: the stream was electing a leader");
      },
      lastPublished: async (subject) => {
        const last = await lastPublished(subject);
        if (writes.length > 0 && subject.endsWith(".result") && last !== undefined) settle("found");
        return last;
      },
    };
  };
  return { writes, settled, wrap };
}

describe("a task's result in the events stream", () => {
  for (const landed of [false, true])
    it(`is stored once, at the redelivery, when its first write failed ${landed ? "after" : "before"} it landed`, async () => {
      const fault = failingFirstWrite(landed);
      await using stack = await startStack({ url: server.url, wrapTransport: fault.wrap });
      const subjects = createSubjects(stack.root);
      const taskId = newTaskId();

      const outcome = await stack.client.run({ taskId, xml: "<task><description>Say done.</description></task>" });
      expect(outcome.status).toBe("COMPLETE");
      // The record has the result at once; the stream has it once the redelivery found it there or stored it.
      const id = `${subjects.taskResult(taskId)}.final`;
      if (landed) {
        expect(await fault.settled).toBe("found");
        expect(fault.writes).toEqual([id]);
      } else {
        expect(await fault.settled).toBe("written");
        expect(fault.writes).toEqual([id, id]);
      }

      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(subjects.eventsStream, { subjects_filter: subjects.taskResult(taskId) });
      expect(info.state.subjects?.[subjects.taskResult(taskId)]).toBe(1);
      const stored = await jsm.streams.getMessage(subjects.eventsStream, { last_by_subj: subjects.taskResult(taskId) });
      if (!stored) throw new Error("no result stored");
      const decoded = decode(TaskOutcome, stored.data);
      expect(decoded.ok && decoded.value.status).toBe("COMPLETE");
      expect((await stack.client.get(taskId)).state).toBe("completed");
    });

  it("on a single server, sends the task's events without acknowledgement and the result right behind them, and the replay keeps the order", async () => {
    // What the Director sends to the events stream (`send`: no acknowledgement asked) and each acknowledgement, in order.
    const log: string[] = [];
    const name = (subject: string, data: Uint8Array) => {
      if (subject.endsWith(".result")) return "result";
      const event = decode(TaskEvent, data);
      return event.ok ? event.value.type : "?";
    };
    await using stack = await startStack({
      url: server.url,
      wrapTransport: (transport) => {
        const { publishStored, orderedWrites } = transport;
        if (publishStored === undefined || orderedWrites === undefined) throw new Error("a NATS transport stores results");
        return {
          ...transport,
          publishStored: (subject, data, id, signal) => {
            log.push(`store ${name(subject, data)}`);
            return publishStored(subject, data, id, signal).then(() => void log.push(`ack ${name(subject, data)}`));
          },
          orderedWrites: {
            ...orderedWrites,
            send: (subject, data, id) => {
              log.push(`send ${name(subject, data)}`);
              orderedWrites.send(subject, data, id);
            },
          },
        };
      },
    });
    expect(stack.transport.orderedWrites?.holds()).toBe(true);
    const subjects = createSubjects(stack.root);
    const taskId = newTaskId();
    const outcome = await stack.client.run({ taskId, xml: "<task><description>Say done.</description></task>" });
    expect(outcome.status).toBe("COMPLETE");
    // The replay: every event once, by seq, then the result.
    const replay = await readStoredTask(nc, subjects, taskId);
    const stored = replay.map((m) => {
      const event = decode(TaskEvent, m.data);
      return event.ok ? { seq: event.value.seq, type: event.value.type } : "result";
    });
    expect(stored.at(-1)).toBe("result");
    const events = stored.slice(0, -1) as { seq: number; type: string }[];
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: events.length }, (_, i) => i + 1));
    expect(events.length).toBeGreaterThanOrEqual(4);
    // Each event was written once before the result, in seq order: sent without acknowledgement, or, the first event
    // after one had waited FENCE_MS (50 ms) unvouched for on a slow machine, stored with one as a fence (never both:
    // no connection was lost). The first goes without: nothing waits to be vouched for then.
    const result = log.indexOf("store result");
    const written = log.slice(0, result).filter((l) => l.startsWith("send ") || l.startsWith("store "));
    expect(written.map((l) => l.slice(l.indexOf(" ") + 1))).toEqual(events.map((e) => e.type));
    expect(written[0]).toBe("send task.queued");
    // The result is stored right behind the last event: nothing of the task is written after it.
    expect(log.slice(result + 1).filter((l) => l.startsWith("send ") || l.startsWith("store "))).toEqual([]);
  });

  it("is stored in an events stream created again when it was deleted under the running Director", async () => {
    await using stack = await startStack({ url: server.url });
    const subjects = createSubjects(stack.root);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(subjects.eventsStream);

    // The task is done once the Director acks its intake item, after the result is stored. (The client sees the
    // result before that: with no stream, the write reaches the client's subscription, and goes unacknowledged.)
    const acked = new Promise<void>((resolve) => {
      const sub = nc.subscribe(`$JS.ACK.${subjects.intakeStream}.>`, {
        callback: (_err, msg) => {
          if (msg.string() !== "+ACK") return;
          sub.unsubscribe();
          resolve();
        },
      });
    });
    await nc.flush();

    // Without the stream made again, the result would be handed back at every redelivery and never stored.
    const taskId = newTaskId();
    const outcome = await stack.client.run({ taskId, xml: "<task><description>Say done.</description></task>" });
    expect(outcome.status).toBe("COMPLETE");
    await acked;
    const info = await jsm.streams.info(subjects.eventsStream, { subjects_filter: subjects.taskResult(taskId) });
    expect(info.config.subjects).toEqual([subjects.anyTaskEvents, subjects.anyTaskResult]);
    expect(info.state.subjects?.[subjects.taskResult(taskId)]).toBe(1);
    // Its intake item was acked: nothing is redelivered.
    const consumer = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
    expect(consumer.num_pending + consumer.num_ack_pending).toBe(0);
  });

  it("counts a lost connection as a loss of what was sent without acknowledgement, and the next task's replay is whole", async () => {
    await using stack = await startStack({ url: server.url });
    const writes = stack.transport.orderedWrites;
    if (writes === undefined) throw new Error("a NATS transport sends events in order");
    const before = writes.losses();
    const back = new Promise<void>((resolve) => stack.transport.bus.onReconnect?.(resolve));
    await server.restart();
    await back;
    expect(writes.losses()).toBeGreaterThan(before);
    const subjects = createSubjects(stack.root);
    const taskId = newTaskId();
    expect((await stack.client.run({ taskId, xml: "<task><description>Say done.</description></task>" })).status).toBe("COMPLETE");
    // Read on a connection of its own: the file's may still be waiting to reconnect.
    const reader = await connect({ servers: server.url });
    const replay = await readStoredTask(reader, subjects, taskId).finally(() => reader.close());
    const seqs = replay.map((m) => {
      const event = decode(TaskEvent, m.data);
      return event.ok ? event.value.seq : "result";
    });
    expect(seqs).toEqual([...Array.from({ length: seqs.length - 1 }, (_, i) => i + 1), "result"]);
  });
});
