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
 */

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
