/**
 * Reading a task's stored events and result back from the events stream: its history batches (protocol/history.ts)
 * unpacked into events, the events an older release stored one by one, and its result.
 */
import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { decode, decodeTaskHistory, encode, TaskEvent, type Subjects } from "../../protocol/index.js";

/** One stored message of a task: an event or its result. */
export interface StoredTaskMessage {
  /** `<root>.tasks.<id>.events` or `<root>.tasks.<id>.result`. */
  readonly subject: string;
  /** The body as published. */
  readonly data: Uint8Array;
  /** Sequence in the events stream of the message that held it (the events of one history batch share theirs). */
  readonly seq: number;
}

/**
 * The stored messages of a task, as published: a history batch (`<root>.tasks.<id>.history`) is unpacked into its
 * events, each on `<root>.tasks.<id>.events`; anything else (a result, an event stored one by one by an older
 * release) is as it is. An unreadable batch holds nothing.
 */
export function unpackStored<M extends { subject: string; data: Uint8Array }>(subjects: Subjects, message: M): M[] {
  if (!message.subject.endsWith(".history") || subjects.taskIdOf(message.subject) === undefined) return [message];
  const batch = decodeTaskHistory(message.data, MAX_HISTORY_BYTES);
  if (!batch.ok) return [];
  return batch.value.map((event) => ({ ...message, subject: subjects.taskEvents(event.taskId), data: encode(TaskEvent, event) }));
}

/** Largest history batch read (one message). */
const MAX_HISTORY_BYTES = 64 * 1024 * 1024;

/**
 * A task's stored messages in the order they were published: its events by their `seq` (batches of two Directors,
 * the one that queued it and the one that ran it, may be stored out of order), then its result.
 */
export function inPublishOrder<M extends { subject: string; data: Uint8Array; seq: number }>(subjects: Subjects, stored: M[]): M[] {
  const unpacked = stored.sort((a, b) => a.seq - b.seq).flatMap((m) => unpackStored(subjects, m));
  const isResult = (m: M) => m.subject.endsWith(".result");
  const eventSeq = new Map<M, number>();
  for (const m of unpacked) {
    if (isResult(m)) continue;
    const event = decode(TaskEvent, m.data);
    eventSeq.set(m, event.ok ? event.value.seq : 0);
  }
  const events = unpacked.filter((m) => !isResult(m)).sort((a, b) => (eventSeq.get(a) ?? 0) - (eventSeq.get(b) ?? 0));
  return [...events, ...unpacked.filter(isResult)];
}

/**
 * Reads the stored events and result of one task, in publish order ({@link inPublishOrder}): its history batches,
 * unpacked, the events an older release stored one by one, and its result. nats-server 2.9 accepts one filter
 * subject per consumer and only a subset of a stream subject, so each subject is read by an ordered consumer of its
 * own; the old events subject, which the stream no longer lists, message by message.
 * @returns an empty list when nothing is stored for the task.
 * @throws InvalidSubjectError when `taskId` is not a valid task id.
 */
export async function readTaskEvents(nc: NatsConnection, subjects: Subjects, taskId: string): Promise<StoredTaskMessage[]> {
  const js = jetstream(nc);
  const read = (filter: string) => readSubject(js, subjects.eventsStream, filter);
  const parts = await Promise.all([
    read(subjects.taskHistory(taskId)),
    readOneByOne(nc, subjects.eventsStream, subjects.taskEvents(taskId)),
    read(subjects.taskResult(taskId)),
  ]);
  return inPublishOrder(subjects, parts.flat());
}

/** The messages stored on `subject`, one `STREAM.MSG.GET` each (`next_by_subj`): a subject the stream no longer lists. */
async function readOneByOne(nc: NatsConnection, stream: string, subject: string): Promise<StoredTaskMessage[]> {
  const out: StoredTaskMessage[] = [];
  for (let seq = 1; ; ) {
    const body = JSON.stringify({ seq, next_by_subj: subject });
    const reply = await nc.request(`$JS.API.STREAM.MSG.GET.${stream}`, body, { timeout: 5000 });
    const m = (reply.json() as { message?: { subject: string; seq: number; data?: string } }).message;
    if (m === undefined) return out;
    out.push({ subject: m.subject, data: new Uint8Array(Buffer.from(m.data ?? "", "base64")), seq: m.seq });
    seq = m.seq + 1;
  }
}

async function readSubject(js: JetStreamClient, stream: string, filter: string): Promise<StoredTaskMessage[]> {
  const consumer = await js.consumers.get(stream, { filter_subjects: filter });
  try {
    const { num_pending: pending } = await consumer.info(true);
    if (pending === 0) return [];
    const out: StoredTaskMessage[] = [];
    // Bounded by `expires` should messages age out between the count and the fetch.
    const batch = await consumer.fetch({ max_messages: pending, expires: 5000 });
    for await (const m of batch) {
      out.push({ subject: m.subject, data: m.data, seq: m.seq });
      if (m.info.pending === 0) break;
    }
    return out;
  } finally {
    await consumer.delete().catch(() => undefined);
  }
}
