/**
 * LocalResponders and the semaphore under them: a call when a slot is free, nothing (go over NATS) otherwise; the
 * request definitions (protocol/requests.ts) and their validation on the local path.
 */
import { z } from "zod";
import { describe, expect, it } from "vitest";
import { ask, RemoteError } from "../../actors/ask.js";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { Semaphore } from "../../actors/limit.js";
import { LocalResponders } from "../../actors/local.js";
import { serve } from "../../actors/serve.js";
import { createSubjects, defineRequest, Requests, type AnyRequestDefinition, type Subjects } from "../../protocol/index.js";
import { MemoryBus, subjectMatches } from "../../runtime/in-process/bus.js";

const gate = () => {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
};

describe("LocalResponders", () => {
  it("calls the responder while it has a slot free, and declines when none is, or nobody serves the subject", async () => {
    const local = new LocalResponders();
    const held = gate();
    const stop = local.register("s.work", new Semaphore(1), async (request) => {
      await held.promise;
      return { echoed: request };
    });
    const first = local.dispatch("s.work", { n: 1 });
    expect(first).toBeInstanceOf(Promise);
    expect(local.dispatch("s.work", { n: 2 })).toBeUndefined();
    expect(local.dispatch("s.other", { n: 3 })).toBeUndefined();
    held.open();
    await expect(first).resolves.toEqual({ echoed: { n: 1 } });
    await expect(local.dispatch("s.work", { n: 4 })).resolves.toEqual({ echoed: { n: 4 } });
    stop();
    expect(local.dispatch("s.work", { n: 5 })).toBeUndefined();
  });

  it("tries each responder of a subject in turn", async () => {
    const local = new LocalResponders();
    const held = gate();
    local.register("s.work", new Semaphore(1), async () => (await held.promise, "a"));
    local.register("s.work", new Semaphore(1), async () => "b");
    const a = local.dispatch("s.work", {});
    await expect(local.dispatch("s.work", {})).resolves.toBe("b");
    held.open();
    await expect(a).resolves.toBe("a");
  });

  it("hands progress to the sink that owns the task, and says when none does", () => {
    const local = new LocalResponders();
    const got: string[] = [];
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-1" as never, event: "x", message: "m" })).toBe(false);
    const stop = local.onProgress((p) => (p.taskId === "t-1" ? (got.push(p.event), true) : false));
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-1" as never, event: "x", message: "m" })).toBe(true);
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-2" as never, event: "y", message: "m" })).toBe(false);
    stop();
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-1" as never, event: "z", message: "m" })).toBe(false);
    expect(got).toEqual(["x"]);
  });
});

describe("Semaphore", () => {
  it("hands a freed slot to the first waiter, never to a newcomer", async () => {
    const slots = new Semaphore(1);
    const order: string[] = [];
    const held = gate();
    const first = slots.run(async () => (await held.promise, order.push("first")));
    const second = slots.run(async () => void order.push("second"));
    held.open();
    await first;
    // The slot went to `second`, which waits in line: a newcomer is refused until it is done.
    expect(slots.tryRun(async () => void order.push("newcomer"))).toBeUndefined();
    await second;
    await slots.tryRun(async () => void order.push("third"));
    expect(order).toEqual(["first", "second", "third"]);
    expect(slots.inUse).toBe(0);
  });

  it("frees the slot of a call that throws at once", async () => {
    const slots = new Semaphore(1);
    await expect(
      slots.tryRun(() => {
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(slots.inUse).toBe(0);
  });
});

/** Every subject `subjects` produces: its names, and its functions called with an id or a verb. */
function produced(subjects: Subjects): Set<string> {
  const out = new Set<string>();
  for (const value of Object.values(subjects)) {
    if (typeof value === "string") out.add(value);
    else if (typeof value === "function") {
      for (const arg of ["t-1", "get", "resume", "cancel"]) {
        const subject = (value as (arg: string) => unknown)(arg);
        if (typeof subject === "string") out.add(subject);
      }
    }
  }
  return out;
}

describe("request definitions", () => {
  const all: [string, AnyRequestDefinition][] = Object.entries(Requests);

  it("take their subjects from protocol/subjects.ts, for any root, each subject and name once", () => {
    for (const root of ["dirigent", "acme.dirigent-2"]) {
      const subjects = createSubjects(root);
      const known = produced(subjects);
      for (const [key, definition] of all) {
        const served = definition.servedOn(subjects);
        const asked = definition.at("t-1").subjectOf(subjects);
        expect(known, `${key}: served on ${served}`).toContain(served);
        expect(known, `${key}: asked on ${asked}`).toContain(asked);
        expect(subjectMatches(served, asked), `${key}: ${asked} is not under ${served}`).toBe(true);
        // Keyed like the subject it is asked on: a request without an id goes to `subjects[key]`.
        const own = subjects[key as keyof Subjects];
        expect(typeof own === "function" ? (own as (id: string) => string)("t-1") : own).toBe(asked);
      }
      expect(new Set(all.map(([, d]) => d.servedOn(subjects))).size).toBe(all.length);
    }
    expect(new Set(all.map(([, d]) => d.name)).size).toBe(all.length);
  });

  it("take a local call as it is only where parsing changes nothing: no defaults, transforms or pipes in either schema", () => {
    // Parsing a valid value of such a schema gives the same value (less unknown keys): a call that never left the
    // process needs no second parse (actors/serve.ts, actors/ask.ts).
    const CHANGING = new Set(["default", "prefault", "catch", "transform", "pipe", "codec", "success"]);
    const changing = (schema: z.ZodType): string[] => {
      const seen = new Set<unknown>();
      const found: string[] = [];
      const walk = (node: z.ZodType | undefined, at: string): void => {
        if (node === undefined || seen.has(node)) return;
        seen.add(node);
        const def = node._zod.def as unknown as Record<string, unknown> & { type: string };
        if (CHANGING.has(def.type)) found.push(`${at || "/"}: ${def.type}`);
        for (const key of ["innerType", "element", "keyType", "valueType", "left", "right", "in", "out"])
          walk(def[key] as z.ZodType | undefined, at);
        for (const [key, value] of Object.entries((def.shape ?? {}) as Record<string, z.ZodType>)) walk(value, `${at}/${key}`);
        for (const option of [...((def.options ?? []) as z.ZodType[]), ...((def.items ?? []) as z.ZodType[])]) walk(option, at);
        if (def.type === "lazy") walk((def.getter as () => z.ZodType)(), at);
      };
      walk(schema, "");
      return found;
    };
    const asIs = all.filter(([, d]) => d.localAsIs).map(([key]) => key);
    expect(asIs).toEqual(["evaluate", "execute"]);
    for (const [key, d] of all.filter(([, d]) => d.localAsIs)) expect([key, ...changing(d.request), ...changing(d.reply)]).toEqual([key]);
    // The walk does see them.
    expect(changing(z.object({ a: z.array(z.string().default("x")), b: z.string().transform((v) => v.length) }))).toEqual([
      "/a: default",
      "/b: pipe",
      "/b: transform",
    ]);
  });

  it("are checked by the compiler at both ends", () => {
    const deps = { subjects: createSubjects("t") } as ActorDeps;
    const never = () => undefined as unknown as Promise<never>;
    // Type checks only (tsc -p tsconfig.test.json): none of these functions is called.
    const checks = [
      // @ts-expect-error a request about one task needs its id: `Requests.taskGet.at(taskId)`
      () => ask(deps, Requests.taskGet, {}, { timeoutMs: 1 }),
      // @ts-expect-error the body of memory.match lacks `inputs`
      () => ask(deps, Requests.memoryMatch, { type: "memory.match", templateDescription: "d", templateType: "atomic" }, { timeoutMs: 1 }),
      async () => {
        const reply = await ask(
          deps,
          Requests.memoryMatch,
          { type: "memory.match", templateDescription: "d", templateType: "atomic", inputs: {} },
          { timeoutMs: 1 },
        );
        // @ts-expect-error the answer is typed: a MatchReply has no `xml`
        return reply.xml;
      },
      () =>
        serve(deps, Requests.execute, {
          concurrency: 1,
          // @ts-expect-error a Handler answers execute with an ExecuteReply, not a MatchReply
          handle: async () => ({ type: "memory.matched" as const, context: "", matches: [] }),
        }),
      () => serve(deps, Requests.execute, { concurrency: 1, handle: never }),
      // @ts-expect-error local dispatch finds responders by the subject asked: not for a wildcard
      () => serve(deps, Requests.goalGet, { concurrency: 1, local: true, handle: never }),
    ];
    expect(checks).toHaveLength(6);
  });
});

describe("local dispatch", () => {
  const setup = () => {
    const bus = new MemoryBus({ onError: () => undefined });
    const deps: ActorDeps = {
      bus,
      subjects: createSubjects("local-test"),
      log: silentLogger,
      now: () => new Date(),
      newId: () => "id",
      local: new LocalResponders(),
    };
    return { bus, deps };
  };
  const match = { type: "memory.match" as const, templateDescription: "d", templateType: "atomic", inputs: {} };

  it("refuses an answer that does not match the reply schema, naming the request, the subject and the field", async () => {
    const { bus, deps } = setup();
    let calls = 0;
    const sub = serve(deps, Requests.memoryMatch, {
      concurrency: 1,
      local: true,
      // A handler that lies about its answer (the compiler cannot see through a cast).
      handle: async () => (calls++, { type: "memory.matched", context: 42, matches: [] }) as never,
    });
    const refused = await ask(deps, Requests.memoryMatch, match, { timeoutMs: 5000 }).catch((err: unknown) => err);
    expect(calls).toBe(1);
    expect(refused).toBeInstanceOf(RemoteError);
    expect(refused).toMatchObject({ code: "INVALID_MESSAGE" });
    expect((refused as RemoteError).message).toBe(
      "answer of memory.match on 'local-test.memory.match': invalid message: /context: Invalid input: expected string, received number",
    );
    // The same answer over the bus is refused the same way.
    const remote = await ask({ ...deps, local: undefined }, Requests.memoryMatch, match, { timeoutMs: 5000 }).catch((err: unknown) => err);
    expect(calls).toBe(2);
    expect(remote).toMatchObject({ code: "INVALID_MESSAGE", message: (refused as RemoteError).message });
    await sub.unsubscribe();
    await bus.close();
  });

  it("validates the request as a message would be: refusals, defaults and stripped fields alike", async () => {
    const { bus, deps } = setup();
    const Body = z.object({ n: z.int().min(1), unit: z.string().default("s") });
    const Answer = z.object({ got: z.unknown() });
    const echo = defineRequest("echo", (s) => `${s.root}.echo`, Body, Answer);
    const seen: unknown[] = [];
    const sub = serve(deps, echo, { concurrency: 1, local: true, handle: async (request) => (seen.push(request), { got: request }) });
    expect(await ask(deps, echo, { n: 2, extra: true } as { n: number }, { timeoutMs: 5000 })).toEqual({ got: { n: 2, unit: "s" } });
    const refused = await ask(deps, echo, { n: 0 }, { timeoutMs: 5000 }).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: "INVALID_MESSAGE", message: expect.stringContaining("/n: Too small") });
    expect(seen).toEqual([{ n: 2, unit: "s" }]);
    // Over the bus: the same answer, the same refusal.
    const remote = { ...deps, local: undefined };
    expect(await ask(remote, echo, { n: 2, extra: true } as { n: number }, { timeoutMs: 5000 })).toEqual({ got: { n: 2, unit: "s" } });
    expect(await ask(remote, echo, { n: 0 }, { timeoutMs: 5000 }).catch((err: unknown) => err)).toMatchObject({
      code: "INVALID_MESSAGE",
      message: (refused as RemoteError).message,
    });
    await sub.unsubscribe();
    await bus.close();
  });
});
