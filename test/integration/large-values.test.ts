/**
 * Values larger than one NATS message in the JetStream task store (runtime/nats/store.ts, runtime/nats/chunks.ts),
 * against real nats-servers: the repository's (max_payload 2 MB) and one with a 64 KiB max_payload. 3–5 MB values
 * are written and read back whole through the unchanged store API, compare-and-set keeps its meaning on the pointer,
 * replaced chunks are purged, listings show no chunk keys, and a value over the hard maximum is refused for good.
 */
import { randomBytes } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPermanentStoreError, MAX_STORED_VALUE_BYTES, StoreRefusedError } from "../../actors/bus.js";
import { connectNats } from "../../runtime/nats/bus.js";
import { openKvStore, type NatsTaskStore } from "../../runtime/nats/store.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import type { NatsConnection } from "@nats-io/transport-node";

const SMALL_PAYLOAD_CONF = `
max_payload: 65536
jetstream {
  store_dir: "js"
  max_memory_store: 64MB
  max_file_store: 1GB
}
`;

const bytes = (n: number): Uint8Array => new Uint8Array(randomBytes(n));
/** Byte equality (a deep `toEqual` of megabytes takes minutes). */
const same = (a: Uint8Array | undefined, b: Uint8Array): boolean =>
  a !== undefined && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
let bucketNo = 0;
const bucket = () => `LARGE_${process.pid}_${++bucketNo}`;

/** Chunk entries the bucket's stream holds now. */
async function chunkEntries(nc: NatsConnection, name: string): Promise<number> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(`KV_${name}`, { subjects_filter: `$KV.${name}._chunk.>` });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

for (const setup of [
  { title: "max_payload 2 MB (nats.conf)", config: undefined },
  { title: "max_payload 64 KiB", config: SMALL_PAYLOAD_CONF },
]) {
  describe(`large values in the task store, ${setup.title}`, () => {
    let server: TestNatsServer;
    let nc: NatsConnection;

    beforeAll(async () => {
      server = await startTestNatsServer(setup.config === undefined ? {} : { config: setup.config });
      nc = await connectNats({ servers: server.url, name: "large-values" });
    });

    afterAll(async () => {
      await nc?.close();
      await server?.stop();
    });

    it("writes and reads back 3–5 MB values with create, put and update; compare-and-set holds", async () => {
      const name = bucket();
      const store: NatsTaskStore = await openKvStore(nc, name);
      const first = bytes(4 * 1024 * 1024 + 17);
      const revision = await store.createWithRevision("task-1", first);
      expect(revision).toBeGreaterThan(0);
      expect(same(await store.get("task-1"), first)).toBe(true);
      // The key exists: a second create writes nothing.
      expect(await store.create("task-1", bytes(3 * 1024 * 1024))).toBe("exists");
      const read = await store.getWithRevision("task-1");
      expect(read?.revision).toBe(revision);

      const second = bytes(3 * 1024 * 1024);
      const updated = await store.update("task-1", second, revision ?? 0);
      expect(updated).toBeGreaterThan(revision ?? 0);
      // A stale revision loses, large or small.
      expect(await store.update("task-1", bytes(5 * 1024 * 1024), revision ?? 0)).toBeUndefined();
      expect(await store.update("task-1", bytes(10), revision ?? 0)).toBeUndefined();
      expect(same(await store.get("task-1"), second)).toBe(true);

      const third = bytes(5 * 1024 * 1024);
      await store.put("task-2", third);
      expect(same(await store.get("task-2"), third)).toBe(true);
      expect((await store.keys()).sort()).toEqual(["task-1", "task-2"]);
    });

    it("purges the chunks of a replaced value: a larger, then a small one", async () => {
      const name = bucket();
      const store = await openKvStore(nc, name);
      await store.put("k", bytes(3 * 1024 * 1024));
      const once = await chunkEntries(nc, name);
      expect(once).toBeGreaterThan(1);
      const current = await store.getWithRevision("k");
      await store.update("k", bytes(3 * 1024 * 1024), current?.revision ?? 0);
      // The old value's chunks are gone, the new value's are there (the same count for the same size).
      expect(await chunkEntries(nc, name)).toBe(once);
      const small = new TextEncoder().encode('{"small":true}');
      const again = await store.getWithRevision("k");
      await store.update("k", small, again?.revision ?? 0);
      expect(await chunkEntries(nc, name)).toBe(0);
      expect(new TextDecoder().decode(await store.get("k"))).toBe('{"small":true}');
    });

    it("a reader in another process (a second store on its own connection) reads the value a writer chunked", async () => {
      const name = bucket();
      const writer = await openKvStore(nc, name);
      const other = await connectNats({ servers: server.url, name: "large-values-reader" });
      try {
        const reader = await openKvStore(other, name);
        const value = bytes(3 * 1024 * 1024 + 5);
        await writer.put("shared", value);
        expect(same(await reader.get("shared"), value)).toBe(true);
        // The reader overwrites it with a small value: having read the pointer, it purges the chunks.
        const read = await reader.getWithRevision("shared");
        await reader.update("shared", bytes(100), read?.revision ?? 0);
        expect(await chunkEntries(nc, name)).toBe(0);
      } finally {
        await other.close();
      }
    });

    it("two concurrent updates of one revision: one wins, and the stored value is the winner's", async () => {
      const name = bucket();
      const store = await openKvStore(nc, name);
      const base = await store.createWithRevision("race", bytes(10));
      const a = bytes(3 * 1024 * 1024);
      const b = bytes(3 * 1024 * 1024);
      const [ra, rb] = await Promise.all([store.update("race", a, base ?? 0), store.update("race", b, base ?? 0)]);
      expect([ra, rb].filter((r) => r !== undefined)).toHaveLength(1);
      const winner = ra !== undefined ? a : b;
      expect(same(await store.get("race"), winner)).toBe(true);
      // The loser's chunks are gone: only the winner's remain.
      const winnerOnly = await chunkEntries(nc, name);
      await store.put("race", bytes(1));
      expect(winnerOnly).toBeGreaterThan(0);
      expect(await chunkEntries(nc, name)).toBe(0);
    });

    it("refuses a value over the hard maximum for good, writing nothing", async () => {
      const name = bucket();
      const store = await openKvStore(nc, name);
      const err = await store.put("huge", new Uint8Array(MAX_STORED_VALUE_BYTES + 1)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreRefusedError);
      expect(isPermanentStoreError(err)).toBe(true);
      expect((err as Error).message).toMatch(/exceeds the store's maximum of 67108864 bytes/);
      expect(await store.get("huge")).toBeUndefined();
      expect(await chunkEntries(nc, name)).toBe(0);
    });
  });
}
