/**
 * Reading tasks back from the events stream (`<ROOT>_EVENTS`) for `dirigent inspect`: one task, or the latest of all.
 *
 * Only read-only JetStream API requests are used (`STREAM.INFO` and `STREAM.MSG.GET` on the events stream), so the
 * `inspector` NATS user needs no right to create consumers (a push consumer's deliver subject would let it publish).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import type { ReplayedMessage, TaskReplay } from "./server.js";
import { messageOf } from "../../protocol/errors.js";
import { jetStreamApi, TaskId, type Subjects } from "../../protocol/index.js";

/** JetStream's error codes: no message found, stream not found. */
const NO_MESSAGE = 10037;
const NO_STREAM = 10059;
/** Message reads in flight at once when listing the recent messages. */
const CONCURRENCY = 64;
const TIMEOUT_MS = 5000;

const ApiError = z.object({ code: z.number(), err_code: z.number().optional(), description: z.string().optional() });
const StreamInfoReply = z.object({
  error: ApiError.optional(),
  state: z.object({ messages: z.number(), first_seq: z.number(), last_seq: z.number() }).optional(),
});
const MsgGetReply = z.object({
  error: ApiError.optional(),
  message: z.object({ subject: z.string(), seq: z.number(), data: z.string().optional() }).optional(),
});

/** A JetStream API request failed (a permission violation, a timeout, a server error). */
export class ReplayError extends Error {
  override name = "ReplayError";
}

async function api<T>(nc: NatsConnection, subject: string, body: unknown, schema: z.ZodType<T>): Promise<T> {
  let text: string;
  try {
    const reply = await nc.request(subject, JSON.stringify(body ?? {}), { timeout: TIMEOUT_MS });
    text = reply.string();
  } catch (err) {
    throw new ReplayError(`cannot read the events stream (${subject}): ${messageOf(err)}`, { cause: err });
  }
  const parsed = schema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new ReplayError(`unexpected JetStream reply on ${subject}: ${text.slice(0, 200)}`);
  return parsed.data;
}

interface Stored extends ReplayedMessage {
  seq: number;
}

/** One stored message: by sequence, or the first at or after `seq` on subject `next`; `undefined` when there is none. */
async function getMessage(nc: NatsConnection, stream: string, seq: number, next?: string): Promise<Stored | undefined> {
  const subject = jetStreamApi.streamMsgGet(stream);
  const reply = await api(nc, subject, next === undefined ? { seq } : { seq, next_by_subj: next }, MsgGetReply);
  if (reply.error) {
    if (reply.error.err_code === NO_MESSAGE) return undefined;
    throw new ReplayError(`${subject}: ${reply.error.description ?? reply.error.code}`);
  }
  const m = reply.message;
  return m ? { subject: m.subject, seq: m.seq, data: new Uint8Array(Buffer.from(m.data ?? "", "base64")) } : undefined;
}

/** The events stream's sequence range; `undefined` when the stream does not exist or is empty. */
async function streamRange(nc: NatsConnection, stream: string): Promise<{ first: number; last: number } | undefined> {
  const subject = jetStreamApi.streamInfo(stream);
  const reply = await api(nc, subject, {}, StreamInfoReply);
  if (reply.error) {
    if (reply.error.err_code === NO_STREAM) return undefined;
    throw new ReplayError(`${subject}: ${reply.error.description ?? reply.error.code}`);
  }
  const state = reply.state;
  return state && state.messages > 0 ? { first: state.first_seq, last: state.last_seq } : undefined;
}

/** The newest `max` messages of the events stream (events and results of all tasks), in order; none without a stream. */
export async function readRecentTaskMessages(nc: NatsConnection, subjects: Subjects, max: number): Promise<ReplayedMessage[]> {
  const range = await streamRange(nc, subjects.eventsStream);
  if (!range) return [];
  const start = Math.max(range.first, range.last - max + 1);
  const out: ReplayedMessage[] = [];
  for (let from = start; from <= range.last; from += CONCURRENCY) {
    const seqs = Array.from({ length: Math.min(CONCURRENCY, range.last - from + 1) }, (_, i) => from + i);
    // A message removed by age between the range and the read is simply absent.
    const read = await Promise.all(seqs.map((seq) => getMessage(nc, subjects.eventsStream, seq)));
    for (const m of read) if (m) out.push({ subject: m.subject, data: m.data });
  }
  return out;
}

/** Every stored message of one subject, in order (`next_by_subj` from sequence 1). */
async function readSubject(nc: NatsConnection, stream: string, subject: string): Promise<Stored[]> {
  const out: Stored[] = [];
  for (let seq = 1; ; ) {
    const m = await getMessage(nc, stream, seq, subject);
    if (!m) return out;
    out.push(m);
    seq = m.seq + 1;
  }
}

/** One task's stored events and result, in order; none when the stream does not exist. */
export async function readStoredTask(nc: NatsConnection, subjects: Subjects, taskId: TaskId): Promise<ReplayedMessage[]> {
  if (!(await streamRange(nc, subjects.eventsStream))) return [];
  const parts = await Promise.all(
    [subjects.taskEvents(taskId), subjects.taskResult(taskId)].map((s) => readSubject(nc, subjects.eventsStream, s)),
  );
  return parts
    .flat()
    .sort((a, b) => a.seq - b.seq)
    .map((m) => ({ subject: m.subject, data: m.data }));
}

/** {@link TaskReplay} over a NATS connection with JetStream. */
export function natsTaskReplay(nc: NatsConnection, subjects: Subjects): TaskReplay {
  return {
    task: (taskId) => readStoredTask(nc, subjects, taskId),
    recent: (max) => readRecentTaskMessages(nc, subjects, max),
  };
}

/** One task as `dirigent list` shows it: its last stored event. */
export interface ListedTask {
  readonly taskId: TaskId;
  /** The task's state after its last event. */
  readonly state: string;
  /** The last event's type (`task.completed`, `model.turn`, …). */
  readonly type: string;
  /** ISO-8601 time of the last event. */
  readonly at: string;
  /** The last event's one-line summary. */
  readonly message?: string;
}

const StreamSubjectsReply = z.object({
  error: ApiError.optional(),
  state: z.object({ subjects: z.record(z.string(), z.number()).optional() }).optional(),
  total: z.number().optional(),
  offset: z.number().optional(),
  limit: z.number().optional(),
});

/** A stored event as read back from the stream, checked like any message from outside. */
const ListedEvent = z.object({
  taskId: TaskId,
  state: z.string(),
  type: z.string(),
  at: z.string(),
  message: z.string().optional(),
});

/**
 * Every task with events in the events stream (kept 24 h), newest last event first, from read-only API requests
 * (`STREAM.INFO` with a subject filter, paged by the server, then `STREAM.MSG.GET` of each task's last event), so
 * the `inspector` NATS user may list them.
 */
export async function listStoredTasks(nc: NatsConnection, subjects: Subjects): Promise<ListedTask[]> {
  const info = jetStreamApi.streamInfo(subjects.eventsStream);
  const names: string[] = [];
  for (let offset = 0; ; ) {
    const reply = await api(nc, info, { subjects_filter: subjects.anyTaskEvents, offset }, StreamSubjectsReply);
    if (reply.error) {
      if (reply.error.err_code === NO_STREAM) return [];
      throw new ReplayError(`${info}: ${reply.error.description ?? reply.error.code}`);
    }
    const page = Object.keys(reply.state?.subjects ?? {});
    names.push(...page);
    offset += page.length;
    if (page.length === 0 || reply.total === undefined || offset >= reply.total) break;
  }
  const get = jetStreamApi.streamMsgGet(subjects.eventsStream);
  const out: ListedTask[] = [];
  for (let i = 0; i < names.length; i += CONCURRENCY) {
    const read = await Promise.all(
      names.slice(i, i + CONCURRENCY).map(async (subject) => {
        const reply = await api(nc, get, { last_by_subj: subject }, MsgGetReply);
        // Aged out since the listing: absent.
        if (reply.error || !reply.message?.data) return undefined;
        try {
          const event = ListedEvent.safeParse(JSON.parse(Buffer.from(reply.message.data, "base64").toString("utf8")));
          return event.success ? event.data : undefined;
        } catch {
          return undefined;
        }
      }),
    );
    for (const e of read)
      if (e) out.push({ taskId: e.taskId, state: e.state, type: e.type, at: e.at, ...(e.message ? { message: e.message } : {}) });
  }
  return out.sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0));
}
