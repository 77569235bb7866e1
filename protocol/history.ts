/**
 * The stored history of a task's events: a batch of them, one message on `<root>.tasks.<id>.history`. Each event
 * travels live on `<root>.tasks.<id>.events` (core NATS, stored no more one by one); the Director that published
 * them stores them in batches: at the task's end, before its result, and meanwhile at most every
 * `DIRIGENT_HISTORY_FLUSH_MS` (docs/protocol.md, "Stored history").
 */
import { z } from "zod";
import { decode, type Decoded } from "./codec.js";
import { TaskEvent } from "./tasks.js";

/** The message on `<root>.tasks.<id>.history`: events of one task, in the order they were published. */
export const TaskHistory = z.array(TaskEvent);
export type TaskHistory = z.infer<typeof TaskHistory>;

const OPEN = 0x5b; // [
const COMMA = 0x2c;
const CLOSE = 0x5d; // ]

/** The bytes of a {@link TaskHistory} holding the encoded events `bodies` (each a {@link TaskEvent}'s JSON), as they are. */
export function encodeTaskHistory(bodies: readonly Uint8Array[]): Uint8Array {
  let bytes = 2 + Math.max(0, bodies.length - 1);
  for (const body of bodies) bytes += body.byteLength;
  const out = new Uint8Array(bytes);
  out[0] = OPEN;
  let at = 1;
  bodies.forEach((body, i) => {
    if (i > 0) out[at++] = COMMA;
    out.set(body, at);
    at += body.byteLength;
  });
  out[at] = CLOSE;
  return out;
}

/** The bytes {@link encodeTaskHistory} adds to its events': the brackets and one comma per event. */
export const historyOverhead = (events: number): number => 2 + events;

/** Decodes a {@link TaskHistory} message. */
export function decodeTaskHistory(bytes: Uint8Array, maxBytes?: number): Decoded<TaskHistory> {
  return decode(TaskHistory, bytes, maxBytes);
}
