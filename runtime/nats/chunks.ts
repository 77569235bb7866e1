/**
 * How a KV value larger than one NATS message is stored (runtime/nats/store.ts): in chunks under derived keys of the
 * same bucket, with a small *pointer* entry under the key itself.
 *
 * - A chunk is the entry `_chunk.<id>.<n>.<key>` (`id` unique per write, `n` from 0). Keys starting with `_chunk.`
 *   are the store's own: listings leave them out, and callers may not use them.
 * - The pointer is the key's entry with the header {@link CHUNKS_HEADER} `<id> <count> <bytes>` and an empty body. It
 *   is written after all its chunks, with the caller's compare-and-set, so a reader that finds it finds its chunks.
 * - After a pointer (or a plain value) replaces a chunked value, the key's older chunks are purged: every chunk of the
 *   key stored before the first chunk of the new value (before the new entry, for a plain value). Writes of a chunked
 *   value are always compare-and-set (an unconditional one reads the revision first), so a newer value's chunks are
 *   never among them. A writer that crashes between its chunks and its pointer, or a purge that fails, leaves
 *   orphaned chunks: the next chunked write of the same key purges them; a bucket with a TTL (the turns bucket)
 *   ages them out.
 *
 * Message bodies larger than one NATS message are carried by reference: the sender stores the body in the bodies
 * bucket (`Subjects.bodiesBucket`, a chunked store like the tasks bucket) and sends an empty message
 * whose {@link BODY_HEADER} names the key; the receiving bus reads the body back before its handler sees the message.
 * So a request between roles (an evaluation carrying a large template or input, a Handler request carrying the
 * prompt) is not bound by the server's `max_payload`. Bodies are not deleted by their reader (a request asked again
 * is stored again); the bucket's age limit, {@link BODIES_MAX_AGE_MS}, removes them.
 */
import { randomUUID } from "node:crypto";
import type { BusMessage, TaskStore } from "../../actors/bus.js";
import { encodeJson, errorReply, messageOf } from "../../protocol/index.js";
import { TransportError } from "../../actors/bus.js";

/** Header of a pointer entry: `<id> <count> <bytes>`. */
export const CHUNKS_HEADER = "Dirigent-Chunks";

/** First token of every chunk key. */
export const CHUNK_TOKEN = "_chunk";

/** Room left in a message for its subject, headers and protocol line (bytes). */
const MESSAGE_MARGIN = 16 * 1024;

/** A pointer's content. */
export interface ChunkPointer {
  /** Unique per write. */
  readonly id: string;
  /** Number of chunks. */
  readonly count: number;
  /** The whole value's size in bytes. */
  readonly bytes: number;
}

/** The key of chunk `n` of the value written as `id` under `key`. */
export function chunkKey(id: string, n: number, key: string): string {
  return `${CHUNK_TOKEN}.${id}.${n}.${key}`;
}

/** Whether `key` is one of the store's chunk keys. */
export function isChunkKey(key: string): boolean {
  return key.startsWith(`${CHUNK_TOKEN}.`);
}

/** The header value of a pointer. */
export function formatPointer(p: ChunkPointer): string {
  return `${p.id} ${p.count} ${p.bytes}`;
}

/** A pointer header's content; `undefined` when it is malformed. */
export function parsePointer(value: string): ChunkPointer | undefined {
  const [id, count, bytes] = value.split(" ");
  const n = Number(count);
  const size = Number(bytes);
  if (id === undefined || id === "" || !Number.isInteger(n) || n < 1 || !Number.isInteger(size) || size < 0) return undefined;
  return { id, count: n, bytes: size };
}

/**
 * The largest value stored as one entry, and the size of each chunk of a larger one: the server's `max_payload` less
 * room for subject and headers, and at most the bucket's maximum value size (`maxValueSize`, `-1`: none).
 */
export function chunkBytes(maxPayload: number, maxValueSize: number): number {
  const fits = maxPayload - Math.min(MESSAGE_MARGIN, Math.floor(maxPayload / 4));
  return maxValueSize > 0 ? Math.min(fits, maxValueSize) : fits;
}

/** `value` cut into pieces of at most `size` bytes (views, not copies). */
export function split(value: Uint8Array, size: number): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  for (let at = 0; at < value.byteLength; at += size) pieces.push(value.subarray(at, Math.min(at + size, value.byteLength)));
  return pieces;
}

/** Joins chunks read back into the value. */
export function join(pieces: readonly Uint8Array[], bytes: number): Uint8Array {
  const value = new Uint8Array(bytes);
  let at = 0;
  for (const piece of pieces) {
    value.set(piece, at);
    at += piece.byteLength;
  }
  return value;
}

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

/**
 * `handler`, given the message with its body read back (`body`); a body that cannot be read (gone, or a reference to
 * nothing) is answered `INVALID_MESSAGE` when the message expects a reply, and reported as the handler's error.
 */
export function withBody(handler: (msg: BusMessage) => void | Promise<void>, body: Promise<Uint8Array>) {
  return async (msg: BusMessage): Promise<void> => {
    let data: Uint8Array;
    try {
      data = await body;
    } catch (err) {
      if (msg.expectsReply) msg.respond(encodeJson(errorReply("INVALID_MESSAGE", messageOf(err))));
      throw err;
    }
    await handler({ ...msg, data });
  };
}
