/**
 * `npm run soak` (issue 30): how long dirigent holds. A steady stream of tasks (atomic, sequential, map) goes to
 * `dirigent up` and one worker process per role for `SOAK_SECONDS` (600), against the offline mock model, while
 * every `SOAK_KILL_EVERY_S` (30) a worker of a random role is killed with `kill -9` and restarted. The run reports
 * tasks accepted, completed, failed and lost (target 0), the model calls repeated per kill, and the `up` processes'
 * memory at the start and over the early, middle and last third of the load after the warm-up (target: RSS flat
 * within 10 % after the warm-up). It fails when a target is missed. Not part of `npm test` or `npm run bench`: it runs for minutes.
 *
 * Knobs (environment): `SOAK_SECONDS`, `SOAK_RATE` (tasks a second, 4), `SOAK_KILL_EVERY_S`, `SOAK_WARMUP_S` (60,
 * or a sixth of a shorter run), `SOAK_MODEL_DELAY_MS` (each model answer's delay, 1000), `SOAK_CONCURRENCY` (16),
 * `SOAK_UP` (`up` processes, 1), `SOAK_ACK_WAIT_MS` (5000), `SOAK_DRAIN_S` (the wait for the last results, 180),
 * `SOAK_LOG_LEVEL` (the processes' log level, warn), `SOAK_OUT` (a file for the figures as JSON).
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { writeFileSync, readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { expect, it } from "vitest";
import { createSubjects } from "../../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../../support/nats-server.js";
import { machineLine, processCpuUs, rssOf } from "../results.js";
import { heapUsedOf, startCluster, type Cluster } from "./cluster.js";
import { followResults, stepOf, submitSteadily, type Results, type SoakTask } from "./load.js";
import {
  KILLED_ROLES,
  memoryPoints,
  mib,
  percent,
  repeats,
  RSS_DRIFT_LIMIT,
  tally,
  type Kill,
  type MemorySample,
  type ModelCall,
} from "./report.js";

const knob = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const value = raw === undefined || raw === "" ? fallback : Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name}='${raw}': expected a number ≥ 0`);
  return value;
};
const SECONDS = knob("SOAK_SECONDS", 600);
const RATE = knob("SOAK_RATE", 4);
const KILL_EVERY_S = knob("SOAK_KILL_EVERY_S", 30);
const WARMUP_S = knob("SOAK_WARMUP_S", Math.min(60, SECONDS / 6));
const MODEL_DELAY_MS = knob("SOAK_MODEL_DELAY_MS", 1000);
const CONCURRENCY = knob("SOAK_CONCURRENCY", 16);
const UPS = knob("SOAK_UP", 1);
const ACK_WAIT_MS = knob("SOAK_ACK_WAIT_MS", 5000);
const DRAIN_S = knob("SOAK_DRAIN_S", 180);
/** How often the `up` processes' memory is read. */
const SAMPLE_EVERY_MS = 2000;
const PROGRESS_EVERY_MS = 30_000;

const log = (line: string) => console.log(`soak: ${line}`);
const loadAverage = () => Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);

it(`soak: ${SECONDS} s at ${RATE} tasks/s, a worker killed every ${KILL_EVERY_S} s`, async () => {
  let nats: TestNatsServer | undefined;
  let mock: MockLlmServer | undefined;
  let cluster: Cluster | undefined;
  let nc: NatsConnection | undefined;
  let results: Results | undefined;
  const timers: NodeJS.Timeout[] = [];
  try {
    nats = await startTestNatsServer();
    mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "done", delayMs: MODEL_DELAY_MS }] } });
    const root = randomRoot();
    const subjects = createSubjects(root);
    cluster = await startCluster({
      natsUrl: nats.url,
      root,
      modelUrl: mock.url,
      ups: UPS,
      concurrency: CONCURRENCY,
      ackWaitMs: ACK_WAIT_MS,
    });
    const { ups } = cluster;
    nc = await connect({ servers: nats.url, name: "soak-client", maxReconnectAttempts: -1 });
    results = await followResults(nc, subjects);
    log(`${machineLine()}; ${UPS} up + ${KILLED_ROLES.length} workers on ${nats.url}, subjects under '${root}'`);

    const began = performance.now();
    const now = () => performance.now() - began;
    const durationMs = SECONDS * 1000;
    const samples = new Map<number, MemorySample[]>(ups.map((u) => [u.pid, []]));
    const sample = async () => {
      const at = now();
      for (const up of ups) {
        const rss = rssOf(up.pid);
        const heapUsed = await heapUsedOf(up);
        if (rss !== undefined) samples.get(up.pid)?.push({ at, rss, ...(heapUsed === undefined ? {} : { heapUsed }) });
      }
    };
    await sample();
    timers.push(setInterval(() => void sample(), SAMPLE_EVERY_MS));
    const cpuBefore = ups.map((u) => processCpuUs(u.pid) ?? 0);

    const calls: ModelCall[] = [];
    const requests = mock.requests;
    const takeCalls = () => {
      const at = now();
      for (const r of requests.splice(0)) {
        const step = stepOf(r.body);
        if (step !== undefined) calls.push({ at, step });
      }
    };
    timers.push(setInterval(takeCalls, 250));

    const kills: Kill[] = [];
    const loads: number[] = [loadAverage()];
    const accepted = new Set<string>();
    const refused = new Map<string, string>();
    const submitted = new Map<string, SoakTask>();
    const byTask = results.byTask;
    const progress = () => {
      loads.push(loadAverage());
      const rss = ups.map((u) => mib(rssOf(u.pid) ?? 0)).join(", ");
      log(
        `${(now() / 1000).toFixed(0)} s: ${submitted.size} submissions answered, ${accepted.size} accepted, ${byTask.size} results, ` +
          `${calls.length} model calls, ${kills.length} kills; up RSS ${rss}; load ${loads.at(-1)}`,
      );
    };
    timers.push(setInterval(progress, PROGRESS_EVERY_MS));

    // Kills, one every KILL_EVERY_S from the start of the load, each once the previous replacement is ready.
    const killing = (async () => {
      if (KILL_EVERY_S <= 0) return;
      for (let next = KILL_EVERY_S * 1000; next < durationMs; next += KILL_EVERY_S * 1000) {
        if (next > now()) await delay(next - now());
        const role = KILLED_ROLES[Math.floor(Math.random() * KILLED_ROLES.length)] ?? "director";
        kills.push({ at: now(), role });
        const started = performance.now();
        await cluster?.kill(role);
        log(
          `${(now() / 1000).toFixed(0)} s: killed the ${role} worker; its replacement ready in ${(performance.now() - started).toFixed(0)} ms`,
        );
      }
    })();

    const submittedCount = await submitSteadily(nc, subjects, root, RATE, AbortSignal.timeout(durationMs), (task, refusal) => {
      submitted.set(task.taskId, task);
      if (refusal === undefined) accepted.add(task.taskId);
      else refused.set(task.taskId, refusal);
    });
    const loadMs = now();
    await killing;
    log(`load over after ${(loadMs / 1000).toFixed(0)} s: ${submittedCount} submitted; waiting for the last results`);
    const drained = await results.until(() => [...accepted].every((id) => byTask.has(id)), DRAIN_S * 1000);
    const drainMs = now() - loadMs;
    await sample();
    takeCalls();
    for (const t of timers) clearInterval(t);
    loads.push(loadAverage());
    const cpuUs = ups.reduce((sum, u, i) => sum + (processCpuUs(u.pid) ?? 0) - (cpuBefore[i] ?? 0), 0);

    const outcome = tally(accepted, refused.size, byTask);
    const repeated = repeats(calls, kills);
    const killsBy = Object.fromEntries(KILLED_ROLES.map((r) => [r, kills.filter((k) => k.role === r).length]));
    const memory = ups.map((u) => ({
      pid: u.pid,
      rss: memoryPoints(samples.get(u.pid) ?? [], (s) => s.rss, WARMUP_S * 1000, durationMs),
      heap: memoryPoints(samples.get(u.pid) ?? [], (s) => s.heapUsed, WARMUP_S * 1000, durationMs),
      afterDrain: samples.get(u.pid)?.at(-1),
    }));
    const lostIds = [...accepted].filter((id) => !byTask.has(id));
    const failedIds = [...accepted].filter((id) => byTask.has(id) && byTask.get(id)?.[0] !== "COMPLETE");
    const lostStates = await Promise.all(
      lostIds.slice(0, 20).map(async (id) => {
        try {
          return `${id}: ${(await nc!.request(subjects.taskGet(id), "", { timeout: 5000 })).string().slice(0, 300)}`;
        } catch (err) {
          return `${id}: ${String(err)}`;
        }
      }),
    );

    const rows: string[][] = [
      [
        "load",
        `${(loadMs / 1000).toFixed(0)} s at ${RATE} tasks/s (atomic, sequential of 3, map of 3: 2:1:1), then ${(drainMs / 1000).toFixed(0)} s to drain`,
        "",
      ],
      ["tasks accepted", `${outcome.accepted} (refused ${outcome.refused})`, ""],
      ["completed / failed", `${outcome.completed} / ${outcome.failed}`, "failed 0"],
      ["lost (accepted, no result)", `${outcome.lost}`, "0"],
      ["tasks with two results", `${outcome.repeatedResults}`, "0"],
      ["kills (`kill -9`)", `${kills.length}: ${KILLED_ROLES.map((r) => `${r} ${killsBy[r]}`).join(", ")}`, ""],
      ["model calls (repeated)", `${repeated.calls} (${repeated.repeated})`, ""],
      [
        "repeated model calls per kill",
        `${kills.length === 0 ? "–" : (repeated.repeated / kills.length).toFixed(2)}; by the role killed last before them: ` +
          `${KILLED_ROLES.map((r) => `${r} ${repeated.byRole[r]} in ${killsBy[r]} kills`).join(", ")}, before any kill ${repeated.byRole.none}`,
        "",
      ],
      ["CPU of the `up` processes per task", `${(cpuUs / 1000 / Math.max(1, outcome.accepted)).toFixed(1)} ms`, ""],
      ...memory.flatMap((m, i) => {
        const name = ups.length > 1 ? `up ${i + 1} ` : "up ";
        const points = (p: typeof m.rss) =>
          p === undefined
            ? "no samples"
            : `${mib(p.start)}; ${p.thirds.map((t) => `${mib(t.mean)} (${mib(t.min)}–${mib(t.max)})`).join(" / ")}; drift ${percent(p.drift)}`;
        return [
          [
            `${name}RSS: at the start; after the warm-up, mean (range) of the early / middle / last third of the load`,
            points(m.rss),
            `drift ≤ ${RSS_DRIFT_LIMIT * 100} %`,
          ],
          [`${name}V8 heap used, the same way`, points(m.heap), ""],
          [`${name}after the drain: RSS / heap`, m.afterDrain ? `${mib(m.afterDrain.rss)} / ${mib(m.afterDrain.heapUsed ?? 0)}` : "–", ""],
        ];
      }),
      ["load average (1 min) during the run", `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}`, ""],
    ];
    const met = (value: boolean) => (value ? "yes" : "**no**");
    const verdicts = {
      failed: outcome.failed === 0,
      lost: outcome.lost === 0 && drained,
      repeatedResults: outcome.repeatedResults === 0,
      rss: memory.every((m) => m.rss !== undefined && m.rss.drift <= RSS_DRIFT_LIMIT),
    };
    const table = [`| figure | value | target |`, `| --- | --- | --- |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
    log(
      `figures (${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${machineLine()}):\n${table}\n` +
        `targets met: failed 0 ${met(verdicts.failed)}, lost 0 ${met(verdicts.lost)}, one result each ${met(verdicts.repeatedResults)}, ` +
        `RSS flat ${met(verdicts.rss)}` +
        (failedIds.length
          ? `\nfailed tasks (first 20):\n${failedIds
              .slice(0, 20)
              .map((id) => `${id} (${submitted.get(id)?.kind}): ${byTask.get(id)?.[0]}`)
              .join("\n")}`
          : "") +
        (lostStates.length ? `\nlost tasks (first 20):\n${lostStates.join("\n")}` : ""),
    );
    if (process.env.SOAK_OUT)
      writeFileSync(
        process.env.SOAK_OUT,
        JSON.stringify(
          {
            seconds: SECONDS,
            rate: RATE,
            killEveryS: KILL_EVERY_S,
            outcome,
            kills,
            repeated,
            memory,
            loads,
            samples: Object.fromEntries(samples),
            table,
          },
          null,
          1,
        ),
      );
    expect(failedIds).toEqual([]);
    expect(lostIds).toEqual([]);
    expect(outcome.repeatedResults).toBe(0);
    expect(verdicts.rss, "RSS of the up processes flat within 10 % after the warm-up").toBe(true);
  } catch (err) {
    if (cluster) console.log(cluster.outputs());
    throw err;
  } finally {
    for (const t of timers) clearInterval(t);
    await results?.stop();
    await nc?.close();
    await cluster?.stop();
    await mock?.close();
    await nats?.stop();
  }
}, 3_600_000);
