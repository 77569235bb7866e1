import { describe, expect, it } from "vitest";
import { createActor, fromCallback, waitFor } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { find, rootEnv } from "../../../machines/language/env.js";
import { mapMachine, type BranchCommand, type BranchDone, type BranchInput, type MapInput } from "../../../machines/evaluator/map.js";
import { runBranches } from "../../../actors/evaluator/runners/map.js";
import type { TaskResult } from "../../../protocol/index.js";
import type { Scoped } from "../../../machines/evaluator/evaluation.js";

const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });
const bad = (message: string): TaskResult => ({
  content: "",
  status: "FAILED",
  notes: {},
  error: { type: "TASK_FAILURE", reason: "unexpected_error", message },
});

/** Branches the test settles by hand: each started branch waits until the test resolves it. */
function harness(input: Partial<MapInput>) {
  const started: BranchInput[] = [];
  const aborted: string[] = [];
  const pending = new Map<string, (r: TaskResult) => void>();
  const events: { event: string; message: string; data?: Record<string, unknown> }[] = [];
  let waiters: Array<() => void> = [];
  const machine = mapMachine.provide({
    actors: {
      branches: fromCallback<BranchCommand, Scoped>(({ receive, sendBack }) => {
        const mine: string[] = [];
        receive(({ index, input: i }) => {
          const key = i.scope ?? i.path;
          started.push(i);
          mine.push(key);
          pending.set(key, (result) => sendBack({ type: "branch.done", index, result }));
          for (const w of waiters) w();
          waiters = [];
        });
        // Stopped: the branches still running are stopped with it.
        return () => aborted.push(...mine.filter((k) => pending.has(k)));
      }),
    },
    actions: { progress: (_, p) => events.push(p) },
  });
  const full: MapInput = {
    path: "0",
    stepCount: 3,
    env: rootEnv({ topic: "tides" }),
    maxParallel: 10,
    onFailure: "fail_fast",
    as: "item",
    ...input,
  };
  const actor = createActor(machine, { input: full }).start();
  actor.send(START);
  const startedCount = (n: number) =>
    started.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(() => started.length >= n && resolve()));
  const settle = async (key: string, result: TaskResult) => {
    const resolve = pending.get(key);
    if (!resolve) throw new Error(`branch ${key} is not running`);
    pending.delete(key);
    resolve(result);
  };
  return { actor, started, aborted, events, startedCount, settle };
}

describe("map machine", () => {
  it("runs every step at once and returns their results in step order, whatever order they finish in", async () => {
    const h = harness({});
    await h.startedCount(3);
    expect(h.started.map((s) => s.path)).toEqual(["0.steps.0", "0.steps.1", "0.steps.2"]);
    await h.settle("0.steps.2", ok("[1,2]"));
    await h.settle("0.steps.0", ok("zero"));
    await h.settle("0.steps.1", ok('{"a":1}'));
    const snap = await waitFor(h.actor, (s) => s.status === "done");
    expect(snap.value).toBe("done");
    expect(snap.output?.status).toBe("COMPLETE");
    expect(JSON.parse(snap.output?.content ?? "")).toEqual(["zero", '{"a":1}', "[1,2]"]);
    expect(snap.output?.parsedContent).toEqual(["zero", { a: 1 }, [1, 2]]);
    expect(snap.output?.notes["step_results"]).toEqual([
      { content: "zero", status: "COMPLETE" },
      { content: '{"a":1}', status: "COMPLETE", parsedContent: { a: 1 } },
      { content: "[1,2]", status: "COMPLETE", parsedContent: [1, 2] },
    ]);
    const finished = h.events.filter((e) => e.event === "branch.finished").map((e) => e.message);
    expect(finished).toEqual(["branch 3/3 COMPLETE", "branch 1/3 COMPLETE", "branch 2/3 COMPLETE"]);
    expect(h.events.filter((e) => e.event === "branch.finished").map((e) => e.data?.["finished"])).toEqual([1, 2, 3]);
  });

  it("holds to max_parallel: a branch starts only when another finishes", async () => {
    const h = harness({ stepCount: 5, maxParallel: 2 });
    await h.startedCount(2);
    expect(h.started).toHaveLength(2);
    await h.settle("0.steps.1", ok("b"));
    await h.startedCount(3);
    expect(h.started.map((s) => s.path)).toEqual(["0.steps.0", "0.steps.1", "0.steps.2"]);
    await h.settle("0.steps.0", ok("a"));
    await h.settle("0.steps.2", ok("c"));
    await h.startedCount(5);
    expect(h.started).toHaveLength(5);
    await h.settle("0.steps.3", ok("d"));
    await h.settle("0.steps.4", ok("e"));
    const snap = await waitFor(h.actor, (s) => s.status === "done");
    expect(JSON.parse(snap.output?.content ?? "")).toEqual(["a", "b", "c", "d", "e"]);
    expect(h.events[0]?.message).toBe("map started: 5 branches, 2 at once");
  });

  it("fail_fast: the first failure stops the running branches and never starts the rest", async () => {
    const h = harness({ stepCount: 4, maxParallel: 3 });
    await h.startedCount(3);
    await h.settle("0.steps.1", bad("the model refused"));
    const snap = await waitFor(h.actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(h.aborted.sort()).toEqual(["0.steps.0", "0.steps.2"]);
    expect(h.started).toHaveLength(3);
    const out = snap.output;
    expect(out?.status).toBe("FAILED");
    expect(out?.error?.message).toBe("branch 2/4 failed: the model refused");
    const details = out?.error?.type === "TASK_FAILURE" ? out.error.details : undefined;
    expect(details?.["failedBranches"]).toEqual([2]);
    expect(details?.["cancelledBranches"]).toEqual([1, 3]);
    expect((details?.["partialResults"] as { status: string }[]).map((r) => r.status)).toEqual([
      "CANCELLED",
      "FAILED",
      "CANCELLED",
      "NOT_STARTED",
    ]);
    expect(h.events.filter((e) => e.data?.["status"] === "CANCELLED").map((e) => e.message)).toEqual([
      "branch 1/4 CANCELLED",
      "branch 3/4 CANCELLED",
    ]);
  });

  it("collect: every branch runs; the failure names each failed branch and keeps the others' results", async () => {
    const h = harness({ stepCount: 3, onFailure: "collect" });
    await h.startedCount(3);
    await h.settle("0.steps.0", bad("first broke"));
    await h.settle("0.steps.1", ok("fine"));
    expect(h.aborted).toEqual([]);
    await h.settle("0.steps.2", bad("third broke"));
    const snap = await waitFor(h.actor, (s) => s.status === "done");
    expect(snap.output?.error?.message).toBe("2 of 3 branches failed: branch 1: first broke; branch 3: third broke");
    const details = snap.output?.error?.type === "TASK_FAILURE" ? snap.output.error.details : undefined;
    expect(details?.["failedBranches"]).toEqual([1, 3]);
    expect((details?.["partialResults"] as { content: string }[])[1]).toEqual({ content: "fine", status: "COMPLETE" });
  });

  it("runs its one step once per element of a list, the element bound to `as`, each branch under its own scope", async () => {
    const h = harness({ stepCount: 1, over: "files", as: "file", env: rootEnv({ files: '["a.md","b.md"]' }) });
    await h.startedCount(2);
    expect(h.started.map((s) => [s.path, s.scope, find(s.env, "file"), find(s.env, "file_index")])).toEqual([
      ["0.steps.0", "0/map:0:", { found: true, value: "a.md" }, { found: true, value: 0 }],
      ["0.steps.0", "0/map:1:", { found: true, value: "b.md" }, { found: true, value: 1 }],
    ]);
    expect(h.events.filter((e) => e.event === "branch.started").map((e) => e.data?.["nodePath"])).toEqual(["0/map:0", "0/map:1"]);
    await h.settle("0/map:1:", ok("B"));
    await h.settle("0/map:0:", ok("A"));
    const snap = await waitFor(h.actor, (s) => s.status === "done");
    expect(snap.output?.content).toBe('["A","B"]');
  });

  it("completes at once over an empty list, and refuses a value that is not a list", async () => {
    const empty = harness({ stepCount: 1, over: "xs", env: rootEnv({ xs: [] }) });
    const done = await waitFor(empty.actor, (s) => s.status === "done");
    expect(done.output).toMatchObject({ status: "COMPLETE", content: "[]" });
    const wrong = harness({ stepCount: 1, over: "xs", env: rootEnv({ xs: "not json" }) });
    const failed = await waitFor(wrong.actor, (s) => s.status === "done");
    expect(failed.output?.error).toMatchObject({ reason: "input_validation_failure" });
    expect(failed.output?.error?.message).toMatch(/^over="xs": its text is not a JSON list/);
    const missing = harness({ stepCount: 1, over: "nope", env: rootEnv({}) });
    expect((await waitFor(missing.actor, (s) => s.status === "done")).output?.error?.message).toBe(
      `over="nope": no variable 'nope' is bound here`,
    );
  });

  it("runs each branch it is sent, and answers a branch that throws as a failed branch", async () => {
    let listener: ((c: BranchCommand) => void) | undefined;
    const done: BranchDone[] = [];
    const stop = runBranches(
      (l) => (listener = l),
      (e) => done.push(e),
      async (path) => {
        if (path.endsWith("1")) throw new Error("boom");
        return ok("x");
      },
    );
    listener?.({ type: "branch.start", index: 0, input: { path: "0.steps.0", env: rootEnv(), parts: 2 } });
    listener?.({ type: "branch.start", index: 1, input: { path: "0.steps.1", env: rootEnv(), parts: 1 } });
    await new Promise((r) => setImmediate(r));
    expect(done.map((d) => [d.index, d.result.status, d.result.error?.message])).toEqual([
      [0, "COMPLETE", undefined],
      [1, "FAILED", "boom"],
    ]);
    stop();
  });

  it("runs more than ten branches on its one abort signal with no listener warning from Node", async () => {
    let listener: ((c: BranchCommand) => void) | undefined;
    const warnings: string[] = [];
    const warned = (w: Error) => warnings.push(w.name);
    process.on("warning", warned);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const aborted: number[] = [];
    const stop = runBranches(
      (l) => (listener = l),
      () => undefined,
      async (path, _env, signal) => {
        signal.addEventListener("abort", () => aborted.push(Number(path.split(".").pop())), { once: true });
        await gate;
        return ok("x");
      },
    );
    for (let index = 0; index < 20; index++)
      listener?.({ type: "branch.start", index, input: { path: `0.steps.${index}`, env: rootEnv(), parts: 1 } });
    stop();
    release();
    // Node emits its warning on the next tick after the listener that passed the limit.
    await new Promise((r) => setImmediate(r));
    process.off("warning", warned);
    expect(aborted).toHaveLength(20);
    expect(warnings).toEqual([]);
  });
});
