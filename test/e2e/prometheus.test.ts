/**
 * Prometheus metrics with a real Prometheus: every role in its own process serves `/metrics` on a free port, a
 * `prometheus` server started here scrapes them every second (with docs/prometheus/alerts.yml loaded), and after a
 * known workload (5 tasks completed, 2 failed by the model) its HTTP API answers `dirigent_tasks_total` with those
 * counts, and the model calls, in-flight gauges and process metrics of every role; the queries of
 * docs/grafana/dirigent.json are valid PromQL.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

const ROLES = ["memory", "handler", "evaluator", "director"] as const;
const DASHBOARD = new URL("../../docs/grafana/dirigent.json", import.meta.url);
const ALERTS = fileURLToPath(new URL("../../docs/prometheus/alerts.yml", import.meta.url));
const root = randomRoot();

let server: TestNatsServer;
let mock: MockLlmServer;
let transport: OpenTransport;
let prometheus: ChildProcess | undefined;
let promExited: Promise<unknown> = Promise.resolve();
let promOutput = "";
let promUrl = "";
let dir = "";
const workers: CliProcess[] = [];
const targets = new Map<string, string>();

/** A port free right now (Prometheus takes its listen address on the command line). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** An error {@link until} does not retry. */
class Fatal extends Error {}

/** Retries `check` every 250 ms until it returns a value, for at most `timeoutMs`. */
async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      if (err instanceof Fatal) throw err;
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${String(last)}); prometheus:\n${promOutput.slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** An instant query through Prometheus's HTTP API. */
async function query(expr: string): Promise<Sample[]> {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = (await res.json()) as { status: string; data: { result: Sample[] } };
  if (body.status !== "success") throw new Error(`query ${expr}: ${JSON.stringify(body)}`);
  return body.data.result;
}

/** `label value → sample value` of a query's answer. */
const byLabel = (samples: Sample[], label: string) => Object.fromEntries(samples.map((s) => [s.metric[label] ?? "", Number(s.value[1])]));

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: { rules: [{ match: { lastUser: "please fail" }, status: 400, error: "refused by the mock" }], default: { reply: "done" } },
  });
  for (const role of ROLES) {
    const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--metrics-port", "0"], {
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_LOG_LEVEL: "warn",
    });
    workers.push(worker);
    const [, url] = await worker.waitFor(/metrics on (http:\/\/\S+)\/metrics/);
    targets.set(role, new URL(url ?? "").host);
    await worker.waitFor(/ready/);
  }
  transport = await openNatsTransport(server.url, createSubjects(root), { name: "prometheus-test", log: silentLogger });
  dir = await mkdtemp(join(tmpdir(), "dirigent-prometheus-"));
  const config = [
    "global:",
    "  scrape_interval: 1s",
    "  evaluation_interval: 1s",
    "rule_files:",
    `  - ${JSON.stringify(ALERTS)}`,
    "scrape_configs:",
    "  - job_name: dirigent",
    "    static_configs:",
    ...[...targets].flatMap(([role, host]) => [`      - targets: [${JSON.stringify(host)}]`, `        labels: { process: ${role} }`]),
  ].join("\n");
  await writeFile(join(dir, "prometheus.yml"), `${config}\n`);
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn(
    "prometheus",
    [`--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  prometheus.stdout?.on("data", (chunk: Buffer) => (promOutput += chunk.toString()));
  prometheus.stderr?.on("data", (chunk: Buffer) => (promOutput += chunk.toString()));
  const child = prometheus;
  let spawnError: Error | undefined;
  child.once("error", (err) => (spawnError = err));
  promExited = new Promise((resolve) => child.once("exit", resolve));
  await until(async () => {
    if (spawnError) throw new Fatal(`cannot start prometheus (Debian: apt-get install prometheus): ${spawnError.message}`);
    if (child.exitCode !== null) throw new Fatal(`prometheus exited with ${child.exitCode}:\n${promOutput}`);
    return (await fetch(`${promUrl}/-/ready`)).ok ? true : undefined;
  }, "prometheus to be ready");
});

afterAll(async () => {
  if (prometheus?.pid !== undefined && prometheus.exitCode === null) {
    process.kill(prometheus.pid, "SIGTERM");
    await promExited;
  }
  await transport?.close();
  await Promise.all(workers.map((w) => w.stop()));
  await mock?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("metrics scraped by Prometheus", () => {
  it("answers dirigent_tasks_total with the counts of a known workload, and scrapes every role", async () => {
    const client = new DirigentClient(transport.bus, createSubjects(root));
    const task = (words: string) => `<task><description>${words}</description></task>`;
    const outcomes = await Promise.all([
      ...Array.from({ length: 5 }, (_, i) => client.run({ xml: task(`say done ${i}`) })),
      ...Array.from({ length: 2 }, (_, i) => client.run({ xml: task(`please fail ${i}`) })),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["COMPLETE", "COMPLETE", "COMPLETE", "COMPLETE", "COMPLETE", "FAILED", "FAILED"]);

    // Every role's endpoint is up.
    const up = await until(async () => {
      const samples = byLabel(await query("up"), "process");
      return ROLES.every((role) => samples[role] === 1) ? samples : undefined;
    }, "every role's target up");
    expect(Object.keys(up).sort()).toEqual([...ROLES].sort());

    const tasks = await until(async () => {
      const samples = await query("dirigent_tasks_total");
      const counts = byLabel(samples, "state");
      return counts["completed"] === 5 && counts["failed"] === 2 ? samples : undefined;
    }, "dirigent_tasks_total to show 5 completed and 2 failed");
    for (const sample of tasks) expect(sample.metric).toMatchObject({ process: "director", type: "atomic", job: "dirigent" });

    const durations = byLabel(await query("dirigent_task_duration_seconds_count"), "state");
    expect(durations).toEqual({ completed: 5, failed: 2 });
    // The other roles' counters, from their own scrapes (which may come a second after the Director's).
    const handler = await until(async () => {
      const calls = byLabel(await query("sum by (outcome) (dirigent_model_calls_total)"), "outcome");
      const steps = byLabel(await query('dirigent_step_duration_seconds_count{process="handler"}'), "step");
      const evaluations = byLabel(await query('dirigent_step_duration_seconds_count{process="evaluator"}'), "step");
      return calls["ok"] === 5 && calls["error"] === 2 && steps["handler.execute"] === 7 && evaluations["evaluator.evaluate"] === 7
        ? calls
        : undefined;
    }, "5 model calls answered, 7 sessions and 7 evaluations");
    expect(handler).toEqual({ ok: 5, error: 2 });
    const tokens = byLabel(await query("dirigent_model_tokens_total"), "kind");
    expect(tokens["prompt"]).toBeGreaterThan(0);
    // Each role reports its own work in flight, and none once the workload is over (a scrape may still have caught
    // a task's last moments: its ack follows its result).
    const inflight = await until(async () => {
      const samples = await query("dirigent_inflight");
      return samples.every((s) => Number(s.value[1]) === 0) ? samples : undefined;
    }, "nothing in flight");
    expect(new Set(inflight.map((s) => s.metric["role"]))).toEqual(new Set(["memory", "handler", "compiler", "evaluator", "director"]));
    const intake = await until(async () => {
      const samples = await query("dirigent_intake_pending + dirigent_intake_ack_pending");
      return samples.length === 1 && Number(samples[0]?.value[1]) === 0 ? samples : undefined;
    }, "an empty intake queue");
    expect(intake[0]?.metric).toMatchObject({ process: "director" });
    expect(byLabel(await query("dirigent_nats_reconnects_total"), "process")).toEqual({ memory: 0, handler: 0, evaluator: 0, director: 0 });
    expect(Object.keys(byLabel(await query("dirigent_process_cpu_seconds_total"), "process")).sort()).toEqual([...ROLES].sort());

    // Every query of the Grafana dashboard is valid PromQL; those of gauges have data.
    const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8")) as {
      panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
    };
    for (const panel of dashboard.panels) {
      for (const { expr } of panel.targets) {
        const samples = await query(expr);
        // A rate needs two samples of a series in its window, which a counter just created may not have yet.
        if (!/rate\(|increase\(/.test(expr)) expect(samples.length, `${panel.title}: ${expr}`).toBeGreaterThan(0);
      }
    }

    // The alert rules of docs/prometheus/alerts.yml load and evaluate.
    const rules = await until(async () => {
      const res = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
        data: { groups: Array<{ rules: Array<{ name: string; health: string; lastEvaluation: string }> }> };
      };
      const all = res.data.groups.flatMap((g) => g.rules);
      return all.length > 0 && all.every((r) => r.health === "ok") ? all : undefined;
    }, "the alert rules to evaluate");
    expect(rules.map((r) => r.name)).toEqual(
      expect.arrayContaining(["DirigentTasksStuck", "DirigentRedeliveryStorm", "DirigentModelErrorRate"]),
    );
  });
});
