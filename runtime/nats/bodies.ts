/**
 * Message bodies larger than one NATS message, carried by reference: the sender stores the body in the bodies bucket
 * (`Subjects.bodiesBucket`, a chunked store like the tasks bucket: runtime/nats/store.ts) and sends an empty message
 * whose {@link BODY_HEADER} names the key; the receiving bus reads the body back before its handler sees the message.
 * So a request between roles (an evaluation carrying a large template or input, a Handler request carrying the
 * prompt) is not bound by the server's `max_payload`. Bodies are not deleted by their reader (a request asked again
 * is stored again); the bucket's age limit, {@link BODIES_MAX_AGE_MS}, removes them.
 */
import { randomUUID } from "node:crypto";
import type { TaskStore } from "../../actors/bus.js";
import { TransportError } from "../../actors/bus.js";

/** Header of a message whose body is stored in the bodies bucket: `<key> <bytes>`. */
export const BODY_HEADER = "Dirigent-Body";

/** How long a stored body is kept: longer than any request waits for its answer. */
export const BODIES_MAX_AGE_MS = 60 * 60 * 1000;

/** Stores `data` under a new key; resolves with the header value naming it. */
export async function storeBody(bodies: TaskStore, data: Uint8Array): Promise<string> {
  const key = `body.${randomUUID()}`;
  await bodies.put(key, data);
  return `${key} ${data.byteLength}`;
}

/** A message as sent: its body, or an empty one with a {@link BODY_HEADER}. */
export interface Outgoing {
  data: Uint8Array;
  headers?: Record<string, string>;
}

const EMPTY = new Uint8Array(0);

/** `data` as sent: larger than `maxBytes` (and `bodies` given), stored, and the message names its key in a header. */
export async function outgoing(
  bodies: TaskStore | undefined,
  maxBytes: number,
  data: Uint8Array,
  headers: Record<string, string> | undefined,
): Promise<Outgoing> {
  if (bodies === undefined || data.byteLength <= maxBytes) return { data, ...(headers ? { headers } : {}) };
  return { data: EMPTY, headers: { ...headers, [BODY_HEADER]: await storeBody(bodies, data) } };
}

/** Reads the body a {@link BODY_HEADER} value names. */
export async function loadBody(bodies: TaskStore | undefined, reference: string, subject: string): Promise<Uint8Array> {
  const [key, size] = reference.split(" ");
  if (bodies === undefined || key === undefined || !/^body\.[0-9a-f-]+$/.test(key))
    throw new TransportError(`a message on '${subject}' refers to a stored body this bus cannot read: '${reference}'`, subject);
  const data = await bodies.get(key);
  if (data === undefined || (size !== undefined && Number(size) !== data.byteLength))
    throw new TransportError(`the stored body of a message on '${subject}' is gone or incomplete (${reference})`, subject);
  return data;
}
