/**
 * The recorded waits for the user's input (actors/evaluator/input.ts): an answer and a timeout are recorded per
 * question and occurrence, and a later evaluation of the same task gets them at once without listening for input.
 */
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { InputTimeout, taskInputs } from "../../actors/evaluator/input.js";
import { createSubjects } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";
import { MemoryTaskStore } from "../../runtime/in-process/store.js";
import { tid } from "../support/ids.js";

const subjects = createSubjects("inp");
let bus: MemoryBus | undefined;

afterEach(async () => {
  await bus?.close();
});

function setup() {
  bus = new MemoryBus({ onError: () => undefined });
  const deps: ActorDeps = { bus, subjects, log: silentLogger, now: () => new Date(), newId: () => "x" };
  return { deps, client: new DirigentClient(bus, subjects), store: new MemoryTaskStore() };
}

const never = new AbortController().signal;

describe("recorded input", () => {
  it("records each answer by question and occurrence, and replays them in a new evaluation of the task", async () => {
    const { deps, client, store } = setup();
    const first = taskInputs(deps, tid("t1"), 5_000, store);
    const q = { question: "which language?" };
    expect(await first.inputRecorded(q)).toBe(false);
    const waiting = first.wait(q, never);
    await client.input("t1", "Python");
    expect(await waiting).toBe("Python");
    const again = first.wait(q, never);
    await client.input("t1", "Rust");
    expect(await again).toBe("Rust");

    const rerun = taskInputs(deps, tid("t1"), 5_000, store);
    expect(await rerun.inputRecorded(q)).toBe(true);
    expect(await rerun.wait(q, never)).toBe("Python");
    expect(await rerun.inputRecorded(q)).toBe(true);
    expect(await rerun.wait(q, never)).toBe("Rust");
    // A third time the question is new: nobody answers within the timeout.
    expect(await rerun.inputRecorded(q)).toBe(false);
    // Another task never sees these answers.
    expect(await taskInputs(deps, tid("t2"), 5_000, store).inputRecorded(q)).toBe(false);
  });

  it("records a timeout, which a re-run gets at once", async () => {
    const { deps, store } = setup();
    const q = { question: "go?", timeout_s: 0.05 };
    await expect(taskInputs(deps, tid("t3"), 5_000, store).wait(q, never)).rejects.toBeInstanceOf(InputTimeout);
    const started = Date.now();
    await expect(taskInputs(deps, tid("t3"), 60_000, store).wait({ question: "go?" }, never)).rejects.toThrow(/no answer on .* within 0 s/);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("records nothing without a store", async () => {
    const { deps, client } = setup();
    const inputs = taskInputs(deps, tid("t4"), 5_000, undefined);
    const waiting = inputs.wait({ question: "q" }, never);
    await client.input("t4", "a");
    expect(await waiting).toBe("a");
    expect(await inputs.inputRecorded({ question: "q" })).toBe(false);
  });
});
