/** Reading tasks back from the events stream (`<ROOT>_EVENTS`) for `dirigent inspect`: one task, or the latest of all. */
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Subjects } from "../protocol/index.js";
import type { ReplayedMessage, TaskReplay } from "./inspect-server.js";
import { readTaskEvents } from "./nats-store.js";

/** The newest `max` messages of the events stream (events and results of all tasks), in order; none without a stream. */
export async function readRecentTaskMessages(nc: NatsConnection, subjects: Subjects, max: number): Promise<ReplayedMessage[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(subjects.eventsStream).catch(() => undefined);
  if (!info || info.state.messages === 0) return [];
  const last = info.state.last_seq;
  const start = Math.max(info.state.first_seq, last - max + 1);
  const consumer = await jetstream(nc).consumers.get(subjects.eventsStream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start });
  try {
    const out: ReplayedMessage[] = [];
    const batch = await consumer.fetch({ max_messages: last - start + 1, expires: 5000 });
    for await (const m of batch) {
      out.push({ subject: m.subject, data: m.data });
      if (m.seq >= last || m.info.pending === 0) break;
    }
    return out;
  } finally {
    await consumer.delete().catch(() => undefined);
  }
}

/** {@link TaskReplay} over a NATS connection with JetStream. */
export function natsTaskReplay(nc: NatsConnection, subjects: Subjects): TaskReplay {
  return {
    task: async (taskId) => (await readTaskEvents(nc, subjects, taskId)).map((m) => ({ subject: m.subject, data: m.data })),
    recent: (max) => readRecentTaskMessages(nc, subjects, max),
  };
}
