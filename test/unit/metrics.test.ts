/**
 * The Prometheus metrics of a runtime system (runtime/metrics/): names, types and labels as docs/operations.md lists
 * them, values from the actors' seam and the metered model client, the endpoint, and the configuration keys.
 */
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import type { CallModel } from "../../actors/model.js";
import { ModelCallError } from "../../actors/model.js";
import type { TaskId } from "../../protocol/index.js";
import { loadConfig } from "../../runtime/config.js";
import { METRICS } from "../../runtime/metrics/names.js";
import { createRuntimeMetrics } from "../../runtime/metrics/registry.js";
import { startMetricsServer } from "../../runtime/metrics/server.js";

const reply = { content: "ok", toolCalls: [], usage: { promptTokens: 100, completionTokens: 20 }, model: "m-2024", finishReason: "stop" };

describe("runtime metrics", () => {
  it("registers every listed metric with its type and labels, and prom-client's process metrics prefixed dirigent_", async () => {
    const metrics = createRuntimeMetrics({ log: silentLogger });
    const json = await metrics.registry.getMetricsAsJSON();
    for (const spec of Object.values(METRICS)) {
      if (spec.name.startsWith("dirigent_intake_")) continue; // only with a Director on NATS
      const found = json.find((m) => m.name === spec.name);
      expect(found, spec.name).toBeDefined();
      expect(found?.type).toBe(spec.type);
    }
    for (const spec of Object.values(METRICS)) {
      expect(spec.name).toMatch(/^dirigent_[a-z_]+$/);
      if (spec.type === "counter") expect(spec.name).toMatch(/_total$/);
      if (spec.type === "histogram") expect(spec.name).toMatch(/_seconds$/);
    }
    expect(json.some((m) => m.name === "dirigent_process_cpu_seconds_total")).toBe(true);
    expect(json.every((m) => m.name.startsWith("dirigent_"))).toBe(true);
  });

  it("counts ended tasks, steps, tool calls and in-flight work from the actors' seam", async () => {
    const metrics = createRuntimeMetrics({ log: silentLogger });
    const { seam, registry } = metrics;
    seam.taskEnded({ state: "completed", type: "atomic", seconds: 1.5 });
    seam.taskEnded({ state: "completed", type: "atomic", seconds: 0.5 });
    seam.taskEnded({ state: "failed", type: "sequential", seconds: 3 });
    seam.step("handler.execute", 0.2);
    const taskId = "t1" as TaskId;
    seam.progress({
      type: "task.progress",
      taskId,
      event: "tool.call",
      data: { tool: "read_file", source: "builtin", malformed: false },
    });
    seam.progress({ type: "task.progress", taskId, event: "tool.call", data: { tool: "nope", malformed: true } });
    seam.progress({ type: "task.progress", taskId, event: "model.turn", data: {} });
    let running = 2;
    seam.inflight("handler", () => running);
    seam.inflight("handler", () => 1);
    const text = await registry.metrics();
    expect(text).toContain('dirigent_tasks_total{state="completed",type="atomic"} 2');
    expect(text).toContain('dirigent_tasks_total{state="failed",type="sequential"} 1');
    expect(text).toContain('dirigent_task_duration_seconds_count{state="completed"} 2');
    expect(text).toContain('dirigent_task_duration_seconds_sum{state="completed"} 2');
    expect(text).toContain('dirigent_step_duration_seconds_count{step="handler.execute"} 1');
    expect(text).toContain('dirigent_tool_calls_total{source="builtin"} 1');
    expect(text).toContain('dirigent_tool_calls_total{source="none"} 1');
    expect(text).toContain('dirigent_inflight{role="handler"} 3');
    running = 0;
    expect(await registry.metrics()).toContain('dirigent_inflight{role="handler"} 1');
  });

  it("meters model calls: outcome, tokens, cost by the requested model, retries", async () => {
    const metrics = createRuntimeMetrics({ log: silentLogger, prices: { m: { input: 1, output: 10 } } });
    let fail = false;
    const call: CallModel = async (_request, _signal, hooks) => {
      hooks?.onRetry?.({ attempt: 1, maxRetries: 2, delayMs: 1, fromRetryAfter: false, message: "429" });
      if (fail) throw new ModelCallError("down", 3, 503);
      return reply;
    };
    const metered = metrics.meterModel(call);
    const heard: number[] = [];
    await metered({ model: "m", messages: [] }, new AbortController().signal, { onRetry: (r) => heard.push(r.attempt) });
    fail = true;
    await expect(metered({ model: "m", messages: [] }, new AbortController().signal)).rejects.toThrow("down");
    const text = await metrics.registry.metrics();
    expect(heard).toEqual([1]);
    expect(text).toContain('dirigent_model_calls_total{model="m",outcome="ok"} 1');
    expect(text).toContain('dirigent_model_calls_total{model="m",outcome="error"} 1');
    expect(text).toContain('dirigent_model_tokens_total{model="m",kind="prompt"} 100');
    expect(text).toContain('dirigent_model_tokens_total{model="m",kind="completion"} 20');
    expect(text).toContain('dirigent_model_cost_total{model="m"} 0.0003');
    expect(text).toContain('dirigent_model_retries_total{model="m"} 2');
  });

  it("keeps two systems' registries apart", async () => {
    const a = createRuntimeMetrics({ log: silentLogger });
    const b = createRuntimeMetrics({ log: silentLogger });
    a.seam.taskEnded({ state: "completed", type: "atomic", seconds: 1 });
    expect(await a.registry.metrics()).toContain("dirigent_tasks_total{");
    expect(await b.registry.metrics()).not.toContain("dirigent_tasks_total{");
  });

  it("serves GET /metrics on loopback, 404 elsewhere", async () => {
    const metrics = createRuntimeMetrics({ log: silentLogger });
    const server = await startMetricsServer(metrics.registry, "127.0.0.1", 0, silentLogger);
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const ok = await fetch(server.url);
      expect(ok.status).toBe(200);
      expect(ok.headers.get("content-type")).toMatch(/^text\/plain/);
      expect(await ok.text()).toContain("# TYPE dirigent_tasks_total counter");
      expect((await fetch(server.url.replace("/metrics", "/other"))).status).toBe(404);
    } finally {
      await server.close();
    }
  });

  it("is off by default; DIRIGENT_METRICS_PORT and --metrics-port turn it on, DIRIGENT_METRICS_HOST moves it", () => {
    const none = loadConfig({}, {});
    expect(none.metricsPort).toBeUndefined();
    expect(none.metricsHost).toBe("127.0.0.1");
    expect(loadConfig({}, { DIRIGENT_METRICS_PORT: "9464", DIRIGENT_METRICS_HOST: "0.0.0.0" })).toMatchObject({
      metricsPort: 9464,
      metricsHost: "0.0.0.0",
    });
    expect(loadConfig({ metricsPort: "9465" }, { DIRIGENT_METRICS_PORT: "9464" }).metricsPort).toBe(9465);
    expect(() => loadConfig({}, { DIRIGENT_METRICS_PORT: "70000" })).toThrow(/environment variable DIRIGENT_METRICS_PORT/);
    expect(() => loadConfig({ metricsPort: "http" }, {})).toThrow(/flag --metrics-port/);
  });
});

describe("docs/grafana/dirigent.json and docs/prometheus/alerts.yml", () => {
  it("name only metrics a runtime process exports", async () => {
    const known = new Set((await createRuntimeMetrics({ log: silentLogger }).registry.getMetricsAsJSON()).map((m) => m.name));
    for (const spec of Object.values(METRICS)) known.add(spec.name);
    const exported = (name: string) => known.has(name) || known.has(name.replace(/_(bucket|sum|count)$/, ""));
    for (const file of ["docs/grafana/dirigent.json", "docs/prometheus/alerts.yml"]) {
      const text = await readFile(new URL(`../../${file}`, import.meta.url), "utf8");
      const names = [...new Set(text.match(/\bdirigent_[a-z0-9_]+/g) ?? [])];
      expect(names.length, file).toBeGreaterThan(3);
      for (const name of names) expect(exported(name), `${file}: ${name}`).toBe(true);
    }
  });
});
