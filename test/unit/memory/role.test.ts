import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { silentLogger, type ActorDeps } from "../../../actors/deps.js";
import { startMemory } from "../../../actors/memory/memory.js";
import type { IndexSnapshot, IndexStore } from "../../../actors/memory/index-store.js";
import { ask, RemoteError } from "../../../actors/ask.js";
import { createSubjects, Requests } from "../../../protocol/index.js";
import { MemoryBus } from "../../../runtime/in-process/bus.js";
import { InMemoryIndexStore } from "../../../runtime/in-process/index-store.js";
import { gate } from "../../support/recorder.js";

const deps = (): ActorDeps => ({
  bus: new MemoryBus({ onError: (err) => console.error(err) }),
  subjects: createSubjects("unit"),
  log: silentLogger,
  now: () => new Date(),
  newId: () => randomUUID(),
});

const match = (d: ActorDeps, description: string) =>
  ask(
    d,
    Requests.memoryMatch,
    { type: "memory.match", templateDescription: description, templateType: "atomic", inputs: {} },
    { timeoutMs: 5000 },
  );

/** A store whose first read waits for the test. */
function slowStore(inner: IndexStore) {
  const release = gate();
  const store: IndexStore = {
    ...inner,
    durable: false,
    getGlobalIndex: async (): Promise<IndexSnapshot> => {
      await release.promise;
      return inner.getGlobalIndex();
    },
    updateGlobalIndex: (entries) => inner.updateGlobalIndex(entries),
    watch: (on) => inner.watch(on),
  };
  return { store, release: release.open };
}

describe("Memory role (in-process bus)", () => {
  it("holds a request that arrives while the index loads and answers it from that index", async () => {
    const inner = new InMemoryIndexStore();
    await inner.updateGlobalIndex([{ path: "/r/parse.ts", metadata: "Parses XML templates" }]);
    const { store, release } = slowStore(inner);
    const d = deps();
    const memory = startMemory(d, { concurrency: 2, store });
    const answer = match(d, "xml parser");
    await d.bus.flush();
    release();
    expect((await answer).matches.map((m) => m.path)).toEqual(["/r/parse.ts"]);
    await memory.stop();
  });

  it("answers held requests with UNAVAILABLE when it stops before the index loaded", async () => {
    const { store } = slowStore(new InMemoryIndexStore());
    const d = deps();
    const memory = startMemory(d, { concurrency: 2, store });
    const answer = match(d, "anything");
    await d.bus.flush();
    await memory.stop();
    await expect(answer).rejects.toEqual(expect.objectContaining({ code: "UNAVAILABLE" }));
    await expect(answer).rejects.toBeInstanceOf(RemoteError);
  });

  it("serves an empty index without a store", async () => {
    const d = deps();
    const memory = startMemory(d, { concurrency: 1 });
    expect(await match(d, "xml")).toEqual({ type: "memory.matched", context: "no relevant files found", matches: [] });
    await memory.stop();
  });
});
