import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { assign, createActor, createMachine, fromPromise, setup } from "xstate";
import { inspectOption, type InspectHook } from "../../actors/inspect-option.js";
import { createSubjects } from "../../protocol/index.js";
import { InspectMessage } from "../../protocol/inspect.js";
import { createInspectPublisher, inspectHookFor, samplePoint } from "../../runtime/inspect/publisher.js";
import { secretValues } from "../../runtime/secrets.js";
import { REDACTED } from "../../runtime/inspect/sanitize.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";
import { tid } from "../support/ids.js";

const subjects = createSubjects("insp");
let bus: MemoryBus;

afterEach(async () => {
  await bus?.close();
});

/** Every inspection message published on the bus, raw and parsed, as it arrives. */
function record(b: MemoryBus): { raw: string[]; messages: InspectMessage[]; subjects: string[] } {
  const out = { raw: [] as string[], messages: [] as InspectMessage[], subjects: [] as string[] };
  b.subscribe(subjects.anyInspect, (msg) => {
    const text = new TextDecoder().decode(msg.data);
    out.raw.push(text);
    out.subjects.push(msg.subject);
    out.messages.push(InspectMessage.parse(JSON.parse(text)));
  });
  return out;
}

const machine = setup({
  types: {
    context: {} as { taskId: string; apiKey: string; notes: string; items: number[] },
    events: {} as { type: "go"; token: string } | { type: "finish" },
  },
  actors: { work: fromPromise(async () => "ok") },
}).createMachine({
  id: "probe",
  initial: "idle",
  context: { taskId: "t-1", apiKey: "sk-very-secret", notes: "n".repeat(5000), items: Array.from({ length: 100 }, (_, i) => i) },
  states: {
    idle: { on: { go: "working" } },
    working: { invoke: { src: "work", onDone: "waiting" } },
    waiting: { on: { finish: { target: "done", actions: assign({ notes: "finished" }) } } },
    done: { type: "final" },
  },
});

async function runProbe(publisher: { hook: InspectHook }): Promise<void> {
  const actor = createActor(machine, inspectOption({ inspect: publisher.hook }, "evaluator", tid("t-1"))).start();
  actor.send({ type: "go", token: "tok-123" });
  await new Promise<void>((resolve) => actor.subscribe((s) => s.matches("waiting") && resolve()));
  actor.send({ type: "finish" });
}

describe("inspection publisher", () => {
  it("publishes actor creation, events with source and target, snapshots and microsteps with process, role and task", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const seen = record(bus);
    const publisher = createInspectPublisher({ bus, subjects, maxPerSec: 10_000, process: "host:1" });
    await runProbe(publisher);
    await bus.flush();
    const kinds = new Set(seen.messages.map((m) => m.type));
    expect(kinds).toEqual(new Set(["inspect.actor", "inspect.event", "inspect.snapshot", "inspect.microstep"]));
    expect(seen.subjects).toContain("insp.inspect.evaluator.actor");
    const [root, child] = seen.messages.filter((m) => m.type === "inspect.actor");
    expect(root).toMatchObject({
      process: "host:1",
      role: "evaluator",
      taskId: "t-1",
      machine: "probe",
      isMachine: true,
      snapshot: { value: "idle" },
    });
    expect(child).toMatchObject({ machine: "work", isMachine: false, parentId: root?.actorId, rootId: root?.actorId });
    const done = seen.messages.find((m) => m.type === "inspect.event" && m.event.type.startsWith("xstate.done.actor"));
    expect(done).toMatchObject({ actorId: root?.actorId, sourceId: child?.actorId });
    const last = seen.messages.filter((m) => m.type === "inspect.snapshot" && m.actorId === root?.actorId).at(-1);
    expect(last).toMatchObject({ eventType: "finish", snapshot: { status: "done", value: "done", context: { notes: "finished" } } });
    const step = seen.messages.find((m) => m.type === "inspect.microstep" && m.eventType === "go");
    expect(step).toMatchObject({ transitions: [{ source: "probe.idle", targets: ["probe.working"] }], value: "working" });
  });

  it("masks secrets and cuts large values in contexts and events", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const seen = record(bus);
    await runProbe(createInspectPublisher({ bus, subjects, maxPerSec: 10_000 }));
    await bus.flush();
    const all = seen.raw.join("\n");
    expect(all).not.toContain("sk-very-secret");
    expect(all).not.toContain("tok-123");
    expect(all).not.toContain("n".repeat(301));
    const created = seen.messages.find((m) => m.type === "inspect.actor");
    expect(created?.type === "inspect.actor" && created.snapshot.context).toMatchObject({
      apiKey: REDACTED,
      items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "…(+90 items)"],
    });
    const go = seen.messages.find((m) => m.type === "inspect.event" && m.event.type === "go");
    expect(go?.type === "inspect.event" && go.event).toEqual({ type: "go", token: REDACTED });
  });

  it("throttles: beyond the budget events are dropped and counted, and each actor's latest snapshot still gets out", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const seen = record(bus);
    let clock = 0;
    const publisher = createInspectPublisher({ bus, subjects, maxPerSec: 5, now: () => clock });
    const counter = setup({ types: { context: {} as { n: number }, events: {} as { type: "inc" } } }).createMachine({
      id: "counter",
      context: { n: 0 },
      initial: "on",
      states: { on: { on: { inc: { actions: assign({ n: ({ context }) => context.n + 1 }) } } } },
    });
    const actor = createActor(counter, inspectOption({ inspect: publisher.hook }, "handler", tid("t-2"))).start();
    for (let i = 0; i < 50; i++) actor.send({ type: "inc" });
    await bus.flush();
    expect(seen.messages.length).toBeLessThanOrEqual(6);
    expect(publisher.stats().dropped).toBeGreaterThan(40);
    expect(publisher.stats().pending).toBe(1);
    // A second later the budget is back: the coalesced snapshot (n = 50) goes out, with the count of dropped messages.
    clock = 1000;
    publisher.stop();
    await bus.flush();
    const last = seen.messages.at(-1);
    expect(last).toMatchObject({ type: "inspect.snapshot", snapshot: { context: { n: 50 } } });
    expect(seen.messages.some((m) => (m.dropped ?? 0) > 0)).toBe(true);
  });

  it("samples whole tasks by task id, the same way in every process", () => {
    expect(samplePoint(tid("task-a"))).toBe(samplePoint(tid("task-a")));
    const points = Array.from({ length: 4000 }, (_, i) => samplePoint(tid(`task-${i}-x`)));
    const share = points.filter((p) => p < 0.25).length / points.length;
    expect(share).toBeGreaterThan(0.2);
    expect(share).toBeLessThan(0.3);
  });

  it("publishes nothing for tasks outside the sample, and costs nothing when off", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const seen = record(bus);
    const out = Array.from({ length: 50 }, (_, i) => tid(`t-${i}`)).find((id) => samplePoint(id) >= 0.1) ?? tid("t-none");
    const publisher = createInspectPublisher({ bus, subjects, maxPerSec: 1000, sample: 0.1 });
    createActor(machine, inspectOption({ inspect: publisher.hook }, "director", out))
      .start()
      .send({ type: "go", token: "x" });
    await bus.flush();
    expect(seen.messages).toEqual([]);
    expect(inspectHookFor({ inspect: false, inspectMaxPerSec: 10, inspectSample: 1 }, bus, subjects)).toBeUndefined();
    expect(inspectOption({ inspect: undefined }, "director", out)).toEqual({});
  });

  it("masks the configuration's secrets (API key, NATS password from a file, token) wherever they appear", async () => {
    const dir = mkdtempSync(join(tmpdir(), "insp-"));
    const file = join(dir, "password");
    writeFileSync(file, "file-password-77\nignored\n");
    const secrets = secretValues({ openaiApiKey: "sk-config-key-1", natsPasswordFile: file, natsToken: "nats-token-42" });
    rmSync(dir, { recursive: true });
    expect(secrets).toEqual(["sk-config-key-1", "nats-token-42", "file-password-77"]);
    bus = new MemoryBus({ onError: () => undefined });
    const seen: string[] = [];
    bus.subscribe(subjects.anyInspect, (msg) => void seen.push(new TextDecoder().decode(msg.data)));
    const hook = inspectHookFor(
      { inspect: true, inspectMaxPerSec: 1000, inspectSample: 1, openaiApiKey: "sk-config-key-1", natsToken: "nats-token-42" },
      bus,
      subjects,
    );
    const machine = createMachine({
      id: "m",
      context: { note: "" },
      initial: "a",
      states: { a: { on: { go: { actions: assign({ note: ({ event }) => String(event["text"]) }) } } } },
    });
    createActor(machine, inspectOption({ inspect: hook }, "director", tid("t1")))
      .start()
      .send({ type: "go", text: "with sk-config-key-1 and nats-token-42" });
    await bus.flush();
    expect(seen.join("\n")).toContain(`with ${REDACTED} and ${REDACTED}`);
    expect(seen.join("\n")).not.toMatch(/sk-config-key-1|nats-token-42/);
  });
});
