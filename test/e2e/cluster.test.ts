/**
 * A three-node NATS cluster under load: role processes connected with all three URLs and `--replicas 3` run a few
 * hundred tasks while the harness `kill -9`s the nats-server leading the intake stream (found with
 * `$JS.API.STREAM.INFO`), starts it again, and once it is back kills the node leading the intake stream then. Every
 * task ends with exactly one result, none is lost, and model calls are repeated at most once per task and node loss
 * (docs/deploy.md, "What a crash repeats": a NATS outage may repeat a Handler's call in flight). The events stream's
 * leader is moved to each node killed, and its replay holds every event of every task. Prints how long
 * results stopped at each leader loss (BENCHMARKS.md, "NATS cluster (issue 22)").
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { readRecentTaskMessages } from "../../runtime/inspect/replay.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsCluster, type TestNatsCluster } from "../support/nats-cluster.js";
import { randomRoot } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";

const TASKS = 300;
const ACK_WAIT_MS = 3000;
const MODEL_DELAY_MS = 20;
const CONCURRENCY = 16;
const LAYOUT = { memory: 1, handler: 1, evaluator: 1, director: 2 } as const;

let cluster: TestNatsCluster;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  cluster = await startTestNatsCluster(3);
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "done", delayMs: MODEL_DELAY_MS }] } });
});

afterAll(async () => {
  for (const p of processes) p.child.kill("SIGKILL");
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await cluster?.stop();
});

const taskIdOf = (n: number) => `cl-${n}`;

/** What the roles logged (at `info`) of these tasks, to tell what happened to each. */
const loggedOf = (ids: string[]) =>
  processes
    .flatMap((p) => p.output().split("\n"))
    .filter((line) => ids.some((id) => line.includes(`"${id}"`) || line.includes(`'${id}'`)))
    .slice(0, 120);

/** The step a model request is for (`cl-17-s`), from its last user message. */
function promptOf(body: unknown): string | undefined {
  const messages = (body as { messages?: { role: string; content: unknown }[] }).messages ?? [];
  const user = messages.filter((m) => m.role === "user").at(-1);
  return JSON.stringify(user?.content ?? "")
    .match(/cl-\d+-s/g)
    ?.at(-1);
}

describe("a three-node NATS cluster with replicas 3", () => {
  it("loses no task and runs none twice when the intake stream's leader is killed twice", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    const env = {
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
      // What the roles log of a task that fails is printed: at `info` it names each step of its run.
      DIRIGENT_LOG_LEVEL: "info",
      DIRIGENT_DRAIN_GRACE_MS: "2000",
    };
    const args = ["--nats", cluster.url, "--prefix", root, "--replicas", "3", "--concurrency", String(CONCURRENCY)];
    for (const role of ["memory", "handler", "evaluator", "director"] as const)
      for (let i = 0; i < LAYOUT[role]; i++) processes.push(startCli(["worker", "--role", role, ...args], env));
    await Promise.all(processes.map((p) => p.waitFor(/ready/, 90_000)));

    const nc: NatsConnection = await connect({ servers: [...cluster.urls], maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    // A short API timeout: a request to a stream without a leader goes unanswered, and is asked again sooner.
    const jsm = await jetstreamManager(nc, { timeout: 1000 });
    // A clustered server says so: the Directors' events then wait for each other (runtime/transport.ts, `orderedWrites.holds()`).
    expect(nc.info?.cluster).toBeTruthy();
    // Every stream and bucket the roles created has three replicas.
    for (const stream of [subjects.intakeStream, subjects.eventsStream, `KV_${subjects.tasksBucket}`, `KV_${subjects.turnsBucket}`])
      expect((await jsm.streams.info(stream)).config.num_replicas, stream).toBe(3);
    // A JetStream API request can go unanswered while a stream elects its leader: asked again.
    const api = async <T>(request: () => Promise<T>): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await request();
        } catch (err) {
          if (attempt >= 20) throw err;
        }
      }
    };
    // A stream can be between two leaders when asked (just after a step down, or an election on a loaded machine: seen
    // 3 times in 51 runs beside two other test files): asked again until it has one.
    const leaderOf = async (stream: string) => {
      for (const deadline = Date.now() + 30_000; ; await delay(50)) {
        const leader = (await api(() => jsm.streams.info(stream))).cluster?.leader;
        if (leader) return leader;
        if (Date.now() > deadline) throw new Error(`no leader of ${stream} within 30 s`);
      }
    };

    // Results as published (a plain subscription, for progress and timing); the events stream is counted at the end.
    const results = new Recorder<{ taskId: string; status: string; at: number; content?: string; error?: unknown }>();
    const subscription = nc.subscribe(subjects.anyTaskResult, {
      callback: (_err, m) => {
        const { taskId, status, content, error } = m.json<{ taskId: string; status: string; content: string; error?: unknown }>();
        // What a task that did not complete says about why.
        results.push({ taskId, status, at: Date.now(), ...(status === "COMPLETE" ? {} : { content: content.slice(0, 500), error }) });
      },
    });
    const distinct = () => new Set(results.values.map((r) => r.taskId)).size;
    const kills: { node: string; at: number; elected: number }[] = [];
    // The events stream's leader is moved to the node about to be killed (a step down elects another at random), so
    // events are published while it elects a new one.
    const colocateEvents = async (node: string) => {
      for (let attempt = 1; (await leaderOf(subjects.eventsStream)) !== node; attempt++) {
        if (attempt > 30) throw new Error(`the events stream's leader never moved to ${node}`);
        await api(() => nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${subjects.eventsStream}`, "", { timeout: 5000 }));
        // Until its new leader is known.
        for (let polls = 0; (await api(() => jsm.streams.info(subjects.eventsStream))).cluster?.leader === undefined; polls++) {
          if (polls > 200) throw new Error("the events stream elected no leader");
          await delay(50);
        }
      }
    };
    const killLeader = async () => {
      const node = await leaderOf(subjects.intakeStream);
      await colocateEvents(node);
      const kill = { node, at: Date.now(), elected: 0 };
      kills.push(kill);
      await cluster.kill(node);
      // How long the intake stream has no leader (no event announces the new one to a client: polled).
      for (;;) {
        const leader = await api(() => jsm.streams.info(subjects.intakeStream)).then(
          (info) => info.cluster?.leader,
          () => undefined,
        );
        if (leader !== undefined && leader !== node) break;
        await delay(50);
      }
      kill.elected = Date.now() - kill.at;
      console.log(`cluster: killed ${node} (intake leader) after ${distinct()} results; new leader after ${kill.elected} ms`);
      return node;
    };
    try {
      const submit = async (n: number) => {
        const body = JSON.stringify({ taskId: taskIdOf(n), xml: `<task><description>Do ${taskIdOf(n)}-s now.</description></task>` });
        const reply = (await nc.request(`${root}.tasks.submit`, body, { timeout: 5000 })).json<{ status: string }>();
        expect(reply.status).toBe("accepted");
      };
      const started = Date.now();
      // Half before the first kill, half once the killed node is back: work is queued at both kills.
      const submitRange = async (from: number, to: number) => {
        for (let n = from; n < to; n += 50) await Promise.all(Array.from({ length: Math.min(50, to - n) }, (_, i) => submit(n + i)));
      };
      await submitRange(0, TASKS / 2);

      await results.until(() => distinct() >= 60, "60 results before the first kill", 60_000);
      const first = await killLeader();
      await results.until(() => distinct() >= 130, "130 results after the first kill", 60_000);
      await cluster.start(first);
      // Back once it is a current replica of every stream again (the task records, the turns and the index buckets
      // too, not only the intake): a stream it still catches up when the next node dies has one current replica of
      // three, no majority, and stops taking writes until it has caught up. CI saw that once: killed 2 s after the node
      // came back, the second kill stopped every result for 60 s. Three replicas bear the loss of one node at a time.
      const restarted = Date.now();
      const streams = await api(async () => {
        const names: string[] = [];
        for await (const info of jsm.streams.list()) if (info.config.num_replicas > 1) names.push(info.config.name);
        return names;
      });
      for (const stream of streams)
        for (const deadline = Date.now() + 60_000; ; await delay(100)) {
          const { cluster: placed } = await api(() => jsm.streams.info(stream));
          if (placed?.leader === first || placed?.replicas?.some((r) => r.name === first && r.current)) break;
          if (Date.now() > deadline) throw new Error(`${first} did not catch up on ${stream}`);
        }
      console.log(`cluster: ${first} current on ${streams.length} streams ${Date.now() - restarted} ms after its start`);
      await submitRange(TASKS / 2, TASKS);
      await results.until(() => distinct() >= 180, "180 results before the second kill", 60_000);
      const second = await killLeader();
      await results.until(() => distinct() >= 240, "240 results after the second kill", 60_000);
      await cluster.start(second);
      const ids = Array.from({ length: TASKS }, (_, n) => taskIdOf(n));
      const storedResults = async () =>
        (await api(() => jsm.streams.info(subjects.eventsStream, { subjects_filter: subjects.anyTaskResult }))).state.subjects ?? {};
      // The client may have missed a result while it reconnected: the events stream has them all.
      for (const deadline = Date.now() + 60_000; ; await delay(200)) {
        const stored = await storedResults();
        const missing = ids.filter((id) => !stored[subjects.taskResult(id)]);
        if (missing.length === 0) break;
        if (Date.now() > deadline) {
          const states = await Promise.all(
            missing
              .slice(0, 10)
              .map(async (id) => `${id}: ${(await nc.request(`${root}.tasks.${id}.get`, "", { timeout: 5000 })).string()}`),
          );
          throw new Error(`${missing.length} results missing:\n${states.join("\n")}\nlogged:\n${loggedOf(missing).join("\n")}`);
        }
      }
      const elapsed = Date.now() - started;

      // Nothing more is on its way once every intake message is acked; then count.
      for (const deadline = Date.now() + 60_000; ; await delay(100)) {
        const info = await api(() => jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer));
        if (info.num_pending + info.num_ack_pending === 0) break;
        if (Date.now() > deadline) throw new Error(`intake not drained: ${info.num_pending} pending, ${info.num_ack_pending} unacked`);
      }
      await nc.flush();
      const perSubject = await storedResults();
      expect(ids.filter((id) => perSubject[subjects.taskResult(id)] !== 1)).toEqual([]);
      // Every result seen is COMPLETE. A result stored while its stream elected a leader is sent again until stored
      // (the stream keeps one, by its message id): a plain subscriber may see copies of it.
      const failed = results.values.filter((r) => r.status !== "COMPLETE");
      expect(failed, `not COMPLETE; the roles logged:\n${loggedOf(failed.map((r) => r.taskId)).join("\n")}`).toEqual([]);
      const copies = results.values.length - new Set(results.values.map((r) => r.taskId)).size;
      const states = await Promise.all(
        ids.map(async (id) => (await nc.request(`${root}.tasks.${id}.get`, "", { timeout: 5000 })).json<{ state: string }>().state),
      );
      expect(states.filter((state) => state !== "completed")).toEqual([]);

      // The events stream's replay, read as docs/deploy.md tells a client that needs each event once (the last seq per
      // task kept; after a `task.resumed`, numbers accepted again from there): every seq from 1 to the task's
      // `task.completed`, which comes last. Events published while the stream elected its leader were sent again until
      // stored. A Director whose delivery another took over (its in-progress signals lost with a killed leader) is told
      // by its successor and stops before the successor's `task.resumed`; only one that could not be told (reconnecting
      // to another node just then) may publish what its walk reports, numbered from its own count, until its next
      // write finds the claim lost: the reading drops those.
      // Read by sequence, as `dirigent inspect` reads it (runtime/inspect/replay.ts): `STREAM.MSG.GET` is answered by the
      // stream's leader. A consumer made for the replay was not: nats-server 2.9 places one without a durable name on any
      // replica, and on the node just started again, still catching up, it ended short of the events published while
      // that node was down (CI, 2026-11-28: some 40 tasks of the second kill "missing" their last events).
      const replay = (await api(() => readRecentTaskMessages(nc, subjects, Number.MAX_SAFE_INTEGER)))
        .filter((m) => m.subject.endsWith(".events"))
        .map((m) => JSON.parse(new TextDecoder().decode(m.data)) as { taskId: string; seq: number; type: string });
      const byTask = new Map<string, { seq: number; type: string }[]>();
      for (const e of replay) byTask.set(e.taskId, [...(byTask.get(e.taskId) ?? []), e]);
      const gapped: string[] = [];
      const gaps = ids.flatMap((id) => {
        const events = byTask.get(id) ?? [];
        const last = onceEach(events).at(-1);
        const seqs = new Set(events.map((e) => e.seq));
        const missing = last === undefined ? [1] : Array.from({ length: last.seq }, (_, i) => i + 1).filter((n) => !seqs.has(n));
        if (last?.type === "task.completed" && missing.length === 0) return [];
        gapped.push(id);
        return [
          `${id}: last ${last?.type}, missing seq ${missing.join(",")} (stored: ${events.map((e) => `${e.seq} ${e.type}`).join(", ")})`,
        ];
      });
      // A gap says what the roles logged of its task. Those seen on 2026-11-28 came from a second Director that found the
      // task final and published its result while the owner's last events still waited through an election (the owner
      // had stopped signalling progress), and from a takeover whose previous owner never stored events its checkpoint counted.
      const eventsLogged = () => processes.flatMap((p) => p.output().split("\n")).filter((line) => line.includes("events stream"));
      expect(gaps, `the roles logged:\n${[...loggedOf(gapped), ...eventsLogged().slice(0, 40)].join("\n")}`).toEqual([]);

      // Model calls: every task's once, a repeat at most once per node loss.
      const calls = new Map<string, number>();
      for (const r of mock.requests) {
        const prompt = promptOf(r.body);
        if (prompt) calls.set(prompt, (calls.get(prompt) ?? 0) + 1);
      }
      expect(ids.filter((id) => !calls.has(`${id}-s`))).toEqual([]);
      expect(ids.filter((id) => (calls.get(`${id}-s`) ?? 0) > 1 + kills.length)).toEqual([]);
      const repeats = [...calls.values()].reduce((sum, n) => sum + n - 1, 0);
      expect(repeats).toBeLessThanOrEqual(kills.length * CONCURRENCY);

      // The stall: the longest wait for a result from each kill on, against the longest gap before the first kill.
      const times = results.values.map((r) => r.at);
      const longestGap = (from: number, to: number) => {
        let longest = 0;
        let previous = from;
        for (const t of times.filter((t) => t > from && t <= to)) {
          longest = Math.max(longest, t - previous);
          previous = t;
        }
        return longest;
      };
      const firstAt = kills[0]?.at ?? 0;
      const baseline = longestGap(times[0] ?? started, firstAt);
      const stalls = kills.map(
        (k, i) => `${k.node} ${longestGap(k.at, kills[i + 1]?.at ?? Number.POSITIVE_INFINITY)} ms (leader after ${k.elected} ms)`,
      );
      console.log(
        `cluster: ${TASKS} tasks in ${elapsed} ms, ${mock.requests.length} model calls (${repeats} repeated), ${copies} copies of results; ` +
          `longest wait for a result after a leader kill: ${stalls.join(", ")}; before the first kill: ${baseline} ms`,
      );
      for (const p of processes) expect(p.child.exitCode).toBeNull();
    } catch (err) {
      // Each role's warnings and errors, and what it logged from a second before the last kill on (its last 4,000
      // characters would hold only the lines of the tasks claimed just then).
      const since = (kills.at(-1)?.at ?? 0) - 1000;
      for (const p of processes)
        console.log(
          p
            .output()
            .split("\n")
            .filter((line) => {
              const logged = /"level":(\d+),"time":(\d+)/.exec(line);
              return logged !== null && (Number(logged[1]) >= 40 || Number(logged[2]) >= since);
            })
            .slice(-150)
            .join("\n"),
        );
      for (const name of cluster.names) console.log(`--- ${name}\n${cluster.stderr(name).slice(-3000)}`);
      throw err;
    } finally {
      subscription.unsubscribe();
      await nc.close();
    }
  });
});

/** A task's events as a client that needs each once reads them (docs/deploy.md): later ones with a seq already seen dropped. */
function onceEach<E extends { seq: number; type: string }>(events: E[]): E[] {
  let last = 0;
  return events.filter((e) => {
    if (e.seq <= last && e.type !== "task.resumed") return false;
    last = e.seq;
    return true;
  });
}
