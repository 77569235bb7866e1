import { describe, expect, it } from "vitest";
import { createActor, fromPromise } from "xstate";
import { memoryMachine, type LoadedIndex, type MatchEvent } from "../../../machines/memory/memory.js";

const request = (requestId: string): MatchEvent => ({
  type: "memory.match",
  templateDescription: "parse the xml template",
  templateType: "atomic",
  inputs: {},
  requestId,
});

/** A machine whose loads the test resolves by hand, recording what is answered with which generation. */
function harness() {
  const answers: { requestId: string; generation: string | null }[] = [];
  const loads: { resolve: (value: LoadedIndex) => void; reject: (err: Error) => void }[] = [];
  const errors: unknown[] = [];
  const actor = createActor(
    memoryMachine.provide({
      actors: {
        loadIndex: fromPromise<LoadedIndex, { generation: string | null }>(
          () => new Promise<LoadedIndex>((resolve, reject) => loads.push({ resolve, reject })),
        ),
      },
      actions: {
        answer: (_, p) => answers.push({ requestId: p.request.requestId, generation: p.generation }),
        loadFailed: (_, p) => errors.push(p.error),
      },
    }),
    { input: {} },
  ).start();
  return { actor, answers, loads, errors };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("memory machine", () => {
  it("holds requests while the first generation loads, then answers them from it", async () => {
    const { actor, answers, loads } = harness();
    expect(actor.getSnapshot().value).toBe("loading");
    actor.send(request("r1"));
    expect(answers).toEqual([]);
    loads[0]?.resolve({ generation: "g1", entries: 3 });
    await settle();
    expect(actor.getSnapshot().value).toBe("serving");
    expect(answers).toEqual([{ requestId: "r1", generation: "g1" }]);
    expect(actor.getSnapshot().context).toMatchObject({ generation: "g1", entries: 3, held: [] });
  });

  it("reloads on a new generation and keeps answering from the old one meanwhile", async () => {
    const { actor, answers, loads } = harness();
    loads[0]?.resolve({ generation: "g1", entries: 1 });
    await settle();
    actor.send({ type: "index.changed", generation: "g1" });
    expect(actor.getSnapshot().value).toBe("serving");
    actor.send({ type: "index.changed", generation: "g2" });
    expect(actor.getSnapshot().value).toBe("reloading");
    actor.send(request("r2"));
    expect(answers).toEqual([{ requestId: "r2", generation: "g1" }]);
    loads[1]?.resolve({ generation: "g2", entries: 2 });
    await settle();
    actor.send(request("r3"));
    expect(answers.at(-1)).toEqual({ requestId: "r3", generation: "g2" });
    expect(loads).toHaveLength(2);
  });

  it("loads again when the store moved on during a load", async () => {
    const { actor, loads } = harness();
    actor.send({ type: "index.changed", generation: "g2" });
    loads[0]?.resolve({ generation: "g1", entries: 1 });
    await settle();
    expect(actor.getSnapshot().value).toBe("reloading");
    loads[1]?.resolve({ generation: "g2", entries: 1 });
    await settle();
    expect(actor.getSnapshot().value).toBe("serving");
    expect(actor.getSnapshot().context.generation).toBe("g2");
  });

  it("reports a failed load and keeps serving the generation it has", async () => {
    const { actor, answers, loads, errors } = harness();
    loads[0]?.resolve({ generation: "g1", entries: 1 });
    await settle();
    actor.send({ type: "index.changed", generation: "g2" });
    loads[1]?.reject(new Error("bucket gone"));
    await settle();
    expect(errors.map(String)).toEqual(["Error: bucket gone"]);
    expect(actor.getSnapshot().value).toBe("serving");
    actor.send(request("r4"));
    expect(answers).toEqual([{ requestId: "r4", generation: "g1" }]);
  });
});
