/**
 * actors/promise-actor.ts: XState's promise actor with its abort signal made on first read; the same outcomes, the
 * signal aborted when the actor is stopped, whether it was read before the stop or after.
 */
import { describe, expect, it } from "vitest";
import { createActor, setup, toPromise } from "xstate";
import { fromPromise } from "../../actors/promise-actor.js";

const invoking = (logic: ReturnType<typeof fromPromise<string>>) =>
  setup({ actors: { work: logic } }).createMachine({
    initial: "working",
    context: { result: "" },
    states: {
      working: {
        invoke: {
          src: "work",
          onDone: { target: "done", actions: ({ context, event }) => void (context.result = event.output) },
          onError: { target: "failed" },
        },
        on: { leave: "left" },
      },
      done: { type: "final" },
      failed: { type: "final" },
      left: { type: "final" },
    },
  });

describe("fromPromise (lazy abort signal)", () => {
  it("resolves and rejects as XState's own", async () => {
    const ok = createActor(invoking(fromPromise(async () => "answer")));
    ok.start();
    await toPromise(ok);
    expect(ok.getSnapshot().value).toBe("done");
    expect(ok.getSnapshot().context.result).toBe("answer");
    const failing = createActor(invoking(fromPromise<string>(async () => Promise.reject(new Error("boom")))));
    failing.start();
    await toPromise(failing);
    expect(failing.getSnapshot().value).toBe("failed");
  });

  it("aborts a signal read before the stop, and hands an aborted one to an effect that reads it after", async () => {
    let before: AbortSignal | undefined;
    let late: () => AbortSignal = () => {
      throw new Error("not started");
    };
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const readBefore = createActor(
      invoking(
        fromPromise<string>(async ({ signal }) => {
          before = signal;
          await held;
          return "late";
        }),
      ),
    );
    readBefore.start();
    expect(before?.aborted).toBe(false);
    readBefore.send({ type: "leave" });
    expect(before?.aborted).toBe(true);

    const readAfter = createActor(invoking(fromPromise<string>((args) => ((late = () => args.signal), held.then(() => "late")))));
    readAfter.start();
    readAfter.send({ type: "leave" });
    expect(late().aborted).toBe(true);
    release();
    await held;
    // The answer of a stopped actor is dropped.
    expect(readBefore.getSnapshot().value).toBe("left");
    expect(readAfter.getSnapshot().value).toBe("left");
  });

  it("makes no signal for an effect that never reads it", async () => {
    const Original = globalThis.AbortController;
    let made = 0;
    globalThis.AbortController = class extends Original {
      constructor() {
        super();
        made++;
      }
    };
    try {
      const actor = createActor(invoking(fromPromise(async () => "answer")));
      actor.start();
      await toPromise(actor);
    } finally {
      globalThis.AbortController = Original;
    }
    expect(made).toBe(0);
  });
});
