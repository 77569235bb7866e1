import { describe, expect, it } from "vitest";
import { emptyIndexStore, IndexConflictError } from "../../../actors/memory/index-store.js";
import { InMemoryIndexStore } from "../../../runtime/in-process/index-store.js";
import { Recorder } from "../../support/recorder.js";

describe("in-memory index store", () => {
  it("replaces the whole index and tells watchers the new generation", async () => {
    const store = new InMemoryIndexStore();
    const seen = new Recorder<string>();
    const watch = await store.watch((g) => seen.push(g));
    await seen.count(1, "the initial generation");
    expect(seen.values).toEqual([""]);
    const g1 = await store.updateGlobalIndex([
      { path: "/a.ts", metadata: "a" },
      { path: "/b.ts", metadata: "b" },
    ]);
    const g2 = await store.updateGlobalIndex([{ path: "/c.ts", metadata: "c" }]);
    await seen.count(3, "two new generations");
    expect(seen.values).toEqual(["", g1, g2]);
    expect(await store.getGlobalIndex()).toEqual({ generation: g2, entries: [{ path: "/c.ts", metadata: "c" }] });
    await watch.stop();
  });

  it("refuses relative and duplicate paths, naming them", async () => {
    const store = new InMemoryIndexStore();
    await expect(store.updateGlobalIndex([{ path: "src/a.ts", metadata: "" }])).rejects.toThrow("index path 'src/a.ts' is not absolute");
    await expect(
      store.updateGlobalIndex([
        { path: "/a", metadata: "" },
        { path: "/a", metadata: "" },
      ]),
    ).rejects.toThrow("'/a' appears twice");
    expect((await store.getGlobalIndex()).generation).toBe("");
  });

  it("replaces the index with ifGeneration only while that generation is current", async () => {
    const store = new InMemoryIndexStore();
    const g1 = await store.updateGlobalIndex([{ path: "/a.ts", metadata: "a" }], { ifGeneration: "" });
    await expect(store.updateGlobalIndex([{ path: "/b.ts", metadata: "b" }], { ifGeneration: "" })).rejects.toThrow(IndexConflictError);
    const g2 = await store.updateGlobalIndex([{ path: "/c.ts", metadata: "c" }], { ifGeneration: g1 });
    await expect(store.updateGlobalIndex([], { ifGeneration: g1 })).rejects.toMatchObject({
      name: "IndexConflictError",
      expected: g1,
      actual: g2,
    });
    expect(await store.getGlobalIndex()).toEqual({ generation: g2, entries: [{ path: "/c.ts", metadata: "c" }] });
  });

  it("the empty store serves nothing and refuses writes", async () => {
    expect(await emptyIndexStore.getGlobalIndex()).toEqual({ generation: "", entries: [] });
    await expect(emptyIndexStore.updateGlobalIndex([])).rejects.toThrow("no index store");
  });
});
