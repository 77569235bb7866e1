/**
 * Chaos: a cluster of role processes (2 Directors, 2 Evaluators, 2 Handlers, 1 Memory) runs a few hundred tasks
 * submitted by a plain NATS client while the harness `kill -9`s role processes (starting replacements) and
 * restarts nats-server once. Every task ends with exactly one result and a final record. A crash repeats only what
 * was running in the crashed process: a Director or Evaluator kill adds no model call (the resumed walks join the
 * sessions still running in the Handlers); a Handler kill or the restart adds at most one to a task it hit: one
 * that overlapped the time the task ran (from its `task.running` to its final event, or to its stored result: events
 * are plain messages, and one published as nats-server goes down is lost), counting an ack wait after the incident
 * for the redeliveries.
 * Debugging: `CHAOS_LOG_LEVEL=info CHAOS_DUMP=/tmp/chaos.log` writes every process's output to that file.
 */
import { jetstream, type ConsumerMessages, type JsMsg } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { writeFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";

const TASKS = 200;
/** Every tenth task is a two-step sequential one. */
const isSequential = (n: number) => n % 10 === 0;
const ACK_WAIT_MS = 3000;
const MODEL_DELAY_MS = 250;
type Role = "director" | "evaluator" | "handler" | "memory";
const LAYOUT: Record<Role, number> = { director: 2, evaluator: 2, handler: 2, memory: 1 };
/** What happens after how many results: a `kill -9` of a process of a role, or a restart of nats-server. */
const INCIDENTS: { after: number; kind: Role | "nats" }[] = [
  { after: 10, kind: "director" },
  { after: 30, kind: "handler" },
  { after: 50, kind: "evaluator" },
  { after: 70, kind: "nats" },
  { after: 90, kind: "director" },
  { after: 110, kind: "handler" },
  { after: 130, kind: "evaluator" },
];

let server: TestNatsServer;
let mock: MockLlmServer;
const all: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "done", delayMs: MODEL_DELAY_MS }] } });
});

afterAll(async () => {
  await Promise.all(all.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

const taskIdOf = (n: number) => `chaos-${n}`;
const xmlOf = (n: number) =>
  isSequential(n)
    ? `<task type="sequential"><description>chaos-${n} pipeline</description><steps>` +
      `<task><description>Do chaos-${n}-s1 now.</description></task>` +
      `<task><description>Do chaos-${n}-s2 now.</description></task></steps></task>`
    : `<task><description>Do chaos-${n}-s1 now.</description></task>`;

/** The step a model request is for (`chaos-17-s1`), from its last user message. */
function promptOf(body: unknown): string | undefined {
  const messages = (body as { messages?: { role: string; content: unknown }[] }).messages ?? [];
  const user = messages.filter((m) => m.role === "user").at(-1);
  const found = JSON.stringify(user?.content ?? "").match(/chaos-\d+-s\d/g);
  return found?.at(-1);
}

describe("chaos: kill -9 role processes and restart nats-server under load", () => {
  it("ends every task with exactly one result, loses none; Director and Evaluator kills repeat no model call, a Handler kill or a restart at most one", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    const env = {
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
      DIRIGENT_LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? "warn",
    };
    const live: Record<Role, CliProcess[]> = { director: [], evaluator: [], handler: [], memory: [] };
    /** Replacements still starting. */
    const starting = new Set<Promise<void>>();
    const start = (role: Role) => {
      const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      all.push(p);
      const ready = p.waitFor(/ready/, 90_000).then(() => void live[role].push(p));
      starting.add(ready);
      void ready.finally(() => starting.delete(ready)).catch(() => undefined);
      return ready;
    };
    const allStarted = () => Promise.all([...starting]);
    for (const role of ["memory", "handler", "evaluator", "director"] as const) for (let i = 0; i < LAYOUT[role]; i++) void start(role);
    await allStarted();

    const nc: NatsConnection = await connect({
      servers: server.url,
      name: "chaos-client",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    const js = jetstream(nc);
    /** Reads the events stream with an ordered consumer; short heartbeats make it recover soon after the restart. */
    const follow = async (filter: string, each: (m: JsMsg) => void) => {
      const messages: ConsumerMessages = await (
        await js.consumers.get(subjects.eventsStream, { filter_subjects: filter })
      ).consume({ expires: 2000 });
      const reading = (async () => {
        for await (const m of messages) each(m);
      })();
      return async () => {
        messages.stop();
        await reading.catch(() => undefined);
      };
    };
    // Results, one record per message; and when each task was running (from the events' own times).
    const results = new Recorder<{ taskId: string; status: string; error?: unknown }>();
    /** When each task's first result was stored (the stream's time, as its events' `at`). */
    const resultAt = new Map<string, number>();
    const stopResults = await follow(subjects.anyTaskResult, (m) => {
      const outcome = m.json<{ taskId: string; status: string; error?: unknown }>();
      if (!resultAt.has(outcome.taskId)) resultAt.set(outcome.taskId, Math.floor(m.info.timestampNanos / 1e6));
      results.push({ taskId: outcome.taskId, status: outcome.status, ...(outcome.error ? { error: outcome.error } : {}) });
    });
    const running = new Map<string, { from: number; to: number }>();
    /** How many events the stream held beyond the last one read: 0 once the reader has caught up. */
    let eventsBehind = Number.POSITIVE_INFINITY;
    const stopEvents = await follow(subjects.anyTaskEvents, (m) => {
      eventsBehind = m.info.pending;
      const event = m.json<{ taskId: string; type: string; at: string }>();
      const at = Date.parse(event.at);
      const span = running.get(event.taskId) ?? { from: Number.POSITIVE_INFINITY, to: Number.NEGATIVE_INFINITY };
      if (event.type === "task.running" || event.type === "task.resumed") span.from = Math.min(span.from, at);
      if (event.type === "task.completed" || event.type === "task.failed") span.to = Math.max(span.to, at);
      running.set(event.taskId, span);
      results.touch();
    });
    const distinct = () => new Set(results.values.map((r) => r.taskId)).size;
    const submittedAt = new Map<string, number>();

    try {
      const submit = async (n: number) => {
        const body = JSON.stringify({ taskId: taskIdOf(n), xml: xmlOf(n) });
        if (!submittedAt.has(taskIdOf(n))) submittedAt.set(taskIdOf(n), Date.now());
        for (let attempt = 1; ; attempt++) {
          try {
            const reply = (await nc.request(`${root}.tasks.submit`, body, { timeout: 5000 })).json<{ status: string }>();
            expect(["accepted", "duplicate"]).toContain(reply.status);
            return;
          } catch (err) {
            if (attempt >= 5) throw err;
            await delay(200);
          }
        }
      };
      for (let n = 0; n < TASKS; n += 20) await Promise.all(Array.from({ length: 20 }, (_, i) => submit(n + i)));

      // Incidents, each after a number of tasks finished; the index into mock.requests dates it among the model calls.
      // An incident lasts from its start until an ack wait after it is over: redeliveries of what it interrupted
      // come up to then.
      const marks: { time: number; until: number; kind: string }[] = [];
      const started = Date.now();
      for (const incident of INCIDENTS) {
        await results.until(() => distinct() >= incident.after, `${incident.after} results before the ${incident.kind} incident`, 90_000);
        const mark = { time: Date.now(), until: Number.POSITIVE_INFINITY, kind: incident.kind };
        marks.push(mark);
        console.log(`chaos: ${incident.kind} incident after ${distinct()} results, ${Date.now() - started} ms`);
        if (incident.kind === "nats") {
          // A process starting during the outage would fail its first connect.
          await allStarted();
          await server.restart();
          mark.until = Date.now() + ACK_WAIT_MS;
          continue;
        }
        // One process of the role stays up; the replacement starts in the background.
        const pool = live[incident.kind];
        while (pool.length < LAYOUT[incident.kind]) await allStarted();
        const victim = pool.splice(Math.floor(Math.random() * pool.length), 1)[0];
        if (!victim) throw new Error(`no ${incident.kind} process left`);
        victim.child.kill("SIGKILL");
        await victim.exited;
        mark.until = Date.now() + ACK_WAIT_MS;
        void start(incident.kind);
      }
      try {
        await results.until(() => distinct() >= TASKS, `all ${TASKS} results`, 90_000);
      } catch (err) {
        const seen = new Set(results.values.map((r) => r.taskId));
        const missing = Array.from({ length: TASKS }, (_, n) => taskIdOf(n)).filter((id) => !seen.has(id));
        const states = await Promise.all(
          missing.map(
            async (id) => `${id}: ${(await nc.request(`${root}.tasks.${id}.get`, "", { timeout: 5000 })).string().slice(0, 300)}`,
          ),
        );
        console.log(`missing:\n${states.join("\n")}`);
        for (const [role, ps] of Object.entries(live)) for (const p of ps) console.log(`--- ${role}\n${p.output().slice(-4000)}`);
        throw err;
      }
      const elapsed = Date.now() - started;

      // No event says "nothing more will be published": wait until every intake message is acked, then look again.
      const deadline = Date.now() + 20_000;
      for (;;) {
        const info = await (await js.consumers.get(subjects.intakeStream, subjects.directorConsumer)).info();
        if (info.num_pending + info.num_ack_pending === 0) break;
        if (Date.now() > deadline)
          throw new Error(`intake not drained: ${JSON.stringify({ pending: info.num_pending, ackPending: info.num_ack_pending })}`);
        await delay(100);
      }
      await nc.flush();
      const stored = await (await js.streams.get(subjects.eventsStream)).info(false, { subjects_filter: subjects.anyTaskResult });
      const perSubject = stored.state.subjects ?? {};

      // Exactly one result per task, stored and delivered; all complete.
      const byTask = new Map<string, string[]>();
      for (const r of results.values)
        byTask.set(r.taskId, [...(byTask.get(r.taskId) ?? []), r.error ? `${r.status} ${JSON.stringify(r.error)}` : r.status]);
      const ids = Array.from({ length: TASKS }, (_, n) => taskIdOf(n));
      expect([...byTask.keys()].sort()).toEqual([...ids].sort());
      const summary = (id: string) => `${id}: results ${JSON.stringify(byTask.get(id))}, stored ${perSubject[subjects.taskResult(id)]}`;
      expect(ids.filter((id) => byTask.get(id)?.length !== 1).map(summary)).toEqual([]);
      expect(ids.filter((id) => byTask.get(id)?.[0] !== "COMPLETE").map(summary)).toEqual([]);
      expect(ids.filter((id) => perSubject[subjects.taskResult(id)] !== 1).map(summary)).toEqual([]);

      // `get` answers the final state for each.
      const states = await Promise.all(
        ids.map(async (id) => (await nc.request(`${root}.tasks.${id}.get`, "", { timeout: 5000 })).json<{ state: string }>().state),
      );
      expect(states.filter((s) => s !== "completed")).toEqual([]);

      // Model calls: every step called; a task repeats calls at most once per Handler kill or restart while it was
      // running, never for a Director or Evaluator kill.
      const calls = new Map<string, number>();
      for (const r of mock.requests) {
        const prompt = promptOf(r.body);
        if (prompt) calls.set(prompt, (calls.get(prompt) ?? 0) + 1);
      }
      const steps = ids.flatMap((id, n) => (isSequential(n) ? [`${id}-s1`, `${id}-s2`] : [`${id}-s1`]));
      expect(steps.filter((s) => !calls.has(s))).toEqual([]);
      // Every event stored is read: nothing is published any more (the intake is drained).
      await results.until(() => eventsBehind === 0, "the events read up to the stream's end", 10_000);
      /** When task `id` ran: its first `task.running` (its submission if that event was lost) to its final event or result. */
      const spanOf = (id: string) => {
        const span = running.get(id);
        const from = span !== undefined && Number.isFinite(span.from) ? span.from : (submittedAt.get(id) ?? 0);
        return { from, to: Math.max(span?.to ?? 0, resultAt.get(id) ?? 0) };
      };
      const excess: string[] = [];
      let repeats = 0;
      for (const id of ids) {
        const extra = [...calls].filter(([prompt]) => prompt.startsWith(`${id}-`)).reduce((sum, [, n]) => sum + n - 1, 0);
        const span = spanOf(id);
        const hit = marks.filter((m) => m.time <= span.to && m.until >= span.from);
        const allowed = hit.filter((m) => m.kind === "handler" || m.kind === "nats").length;
        repeats += extra;
        if (extra > allowed)
          excess.push(`${id}: ${extra} repeated calls; incidents while it ran: ${hit.map((m) => m.kind).join(", ") || "none"}`);
      }
      expect(excess).toEqual([]);
      console.log(
        `chaos: ${TASKS} tasks, ${steps.length} steps, ${mock.requests.length} model calls (${repeats} repeated) ` +
          `through ${marks.map((m) => m.kind).join(", ")} in ${elapsed} ms; ` +
          `final events missing from the stream: ${ids.filter((id) => !Number.isFinite(running.get(id)?.to)).join(", ") || "none"}`,
      );
    } finally {
      if (process.env.CHAOS_DUMP) writeFileSync(process.env.CHAOS_DUMP, all.map((p, i) => `=== process ${i}\n${p.output()}`).join("\n"));
      await stopResults();
      await stopEvents();
      await nc.close();
    }
  }, 400_000);
});
