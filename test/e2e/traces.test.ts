/**
 * OpenTelemetry traces across the four roles in four processes: a task submitted by a plain NATS client with a
 * `traceparent` header ends up as one trace under the client's trace id, with spans from every process, received by
 * an OTLP/HTTP (JSON) receiver the test runs; without an OTLP endpoint nothing is exported.
 */
import { connect, headers } from "@nats-io/transport-node";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, startMockLlmCli, type CliProcess } from "../support/processes.js";
import { claimant, startDirectors } from "../support/takeover.js";

/** One span as received, with its process's service name. */
interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  attributes: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; attributes?: OtlpAttribute[] }[] }[];
  }[];
}

const valueOf = (v: OtlpValue): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue ?? v.arrayValue?.values?.map(valueOf)));
const attributesOf = (list: OtlpAttribute[] | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

/** A minimal OTLP/HTTP receiver (JSON bodies): every request by path, every span decoded. */
class OtlpReceiver {
  readonly requests: { path: string; body: string }[] = [];
  readonly spans: ReceivedSpan[] = [];
  readonly #listeners = new Set<() => void>();
  readonly #server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      this.requests.push({ path: req.url ?? "", body });
      if (req.url === "/v1/traces") this.#take(JSON.parse(body) as OtlpExport);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      for (const l of this.#listeners) l();
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    const address = this.#server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    return `http://127.0.0.1:${address.port}`;
  }

  #take(data: OtlpExport): void {
    for (const rs of data.resourceSpans ?? []) {
      const service = String(attributesOf(rs.resource?.attributes)["service.name"]);
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? "",
            name: s.name,
            attributes: attributesOf(s.attributes),
          });
    }
  }

  /** Resolves once `done` holds for the spans received, checked after each request. */
  until(done: () => boolean, timeoutMs = 20_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.#listeners.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#listeners.delete(check);
        reject(new Error(`spans received: ${JSON.stringify(this.spans.map((s) => [s.service, s.name, s.traceId]))}`));
      }, timeoutMs);
      this.#listeners.add(check);
      check();
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

const ROLES = ["memory", "handler", "evaluator", "director"];
/** The API key of the Handler that meets the leaky server. */
const API_KEY = "sk-e2e-secret-4242";
const TEMPLATE = `<task type="sequential"><steps>
  <task type="associative_memory"><query>capital cities</query></task>
  <task><description>What is the capital of {{country}}?</description></task>
</steps></task>`;

let server: TestNatsServer;
let receiver: OtlpReceiver;
let endpoint: string;
let dir: string;
let modelUrl: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  receiver = new OtlpReceiver();
  endpoint = await receiver.start();
  dir = mkdtempSync(join(tmpdir(), "dirigent-traces-"));
  const script = join(dir, "script.json");
  const rules = [
    { match: { lastUser: "capital of France" }, reply: "Paris" },
    // Still at the model when its Director is killed.
    { match: { lastUser: "SLOW" }, reply: "slow answer", delayMs: 2000 },
    // A server whose error echoes the request's Authorization header and its prompt.
    { match: { lastUser: "LEAKY" }, status: 401, error: `Incorrect API key: Authorization: Bearer ${API_KEY} for: LEAKY PROMPT-7731` },
  ];
  writeFileSync(script, JSON.stringify({ rules }));
  const mock = await startMockLlmCli(script);
  processes.push(mock.process);
  modelUrl = mock.url;
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await server?.stop();
  await receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The four roles (or `roles`), each in its own process, with `env`. */
async function startRoles(root: string, env: NodeJS.ProcessEnv, roles = ROLES): Promise<CliProcess[]> {
  const started: CliProcess[] = [];
  for (const role of roles) {
    const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "2"], {
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      ...env,
    });
    processes.push(worker);
    started.push(worker);
    await worker.waitFor(/ready/);
  }
  return started;
}

/** Submits the task from a plain NATS client with `traceparent`, runs `during`, and waits for its result. */
async function runTask(root: string, taskId: string, traceparent: string, xml = TEMPLATE, during?: () => Promise<void>): Promise<unknown> {
  const nc = await connect({ servers: server.url, name: "traces-plain-client" });
  try {
    const result = nc.subscribe(`${root}.tasks.${taskId}.result`, { max: 1 });
    const h = headers();
    h.set("traceparent", traceparent);
    const body = JSON.stringify({ taskId, xml, inputs: { country: "France" } });
    const reply = await nc.request(`${root}.tasks.submit`, body, { timeout: 10_000, headers: h });
    expect(reply.json()).toEqual({ taskId, status: "accepted" });
    await during?.();
    for await (const m of result) return m.json();
    return undefined;
  } finally {
    await nc.drain();
  }
}

describe("OpenTelemetry traces across four processes", () => {
  it("puts a task submitted with a traceparent under the client's trace, with spans from every process", async () => {
    const root = randomRoot();
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_SERVICE_NAME: "",
    };
    await startRoles(root, otel);
    const traceId = randomBytes(16).toString("hex");
    const clientSpan = randomBytes(8).toString("hex");
    const taskId = `traced-${Date.now()}`;
    expect(await runTask(root, taskId, `00-${traceId}-${clientSpan}-01`)).toMatchObject({ taskId, status: "COMPLETE", content: "Paris" });

    const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    const expected = ["task.submit", "director.run", "director.evaluate", "evaluator.evaluate", "evaluate sequential"];
    expected.push("evaluate associative_memory", "memory.match", "evaluate atomic", "handler.execute");
    // Each process exports its spans in its own batches: the trace is complete once every span and every parent came.
    const complete = () => {
      const ids = new Set([clientSpan, ...inTrace().map((s) => s.spanId)]);
      const names = new Set(inTrace().map((s) => s.name));
      const modelCall = inTrace().some((s) => s.attributes["gen_ai.operation.name"] === "chat");
      return modelCall && expected.every((n) => names.has(n)) && inTrace().every((s) => ids.has(s.parentSpanId));
    };
    await receiver.until(complete);
    const spans = inTrace();
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(ROLES.map((r) => `dirigent-${r}`)));
    // Every span of the task is in the client's trace, and the trace is one tree under the client's span.
    expect(receiver.spans.filter((s) => s.attributes["dirigent.task_id"] === taskId).every((s) => s.traceId === traceId)).toBe(true);
    const ids = new Set([clientSpan, ...spans.map((s) => s.spanId)]);
    expect(spans.filter((s) => !ids.has(s.parentSpanId)).map((s) => s.name)).toEqual([]);
    const submit = spans.find((s) => s.name === "task.submit");
    expect(submit).toMatchObject({ service: "dirigent-director", parentSpanId: clientSpan });
    const byName = (name: string) => spans.filter((s) => s.name === name).map((s) => s.service);
    expect(byName("director.run")).toEqual(["dirigent-director"]);
    expect(byName("evaluator.evaluate")).toEqual(["dirigent-evaluator"]);
    expect(byName("evaluate sequential")).toEqual(["dirigent-evaluator"]);
    expect(byName("evaluate associative_memory")).toEqual(["dirigent-evaluator"]);
    expect(byName("evaluate atomic")).toEqual(["dirigent-evaluator"]);
    expect(byName("memory.match")).toEqual(["dirigent-memory"]);

    const model = spans.filter((s) => s.attributes["gen_ai.operation.name"] === "chat");
    expect(model).toHaveLength(1);
    expect(model[0]).toMatchObject({ service: "dirigent-handler", attributes: { "dirigent.task_id": taskId, "dirigent.turn": 1 } });
    const attributes = model[0]?.attributes ?? {};
    expect(typeof attributes["gen_ai.request.model"]).toBe("string");
    expect(typeof attributes["gen_ai.response.model"]).toBe("string");
    expect(attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
    expect(attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
    // Prompts, completions and secrets are not recorded without the opt-in.
    const exported = receiver.requests.map((r) => r.body).join("\n");
    expect(exported).not.toMatch(/capital of France/);
    expect(exported).not.toMatch(/Paris/);
    expect(attributes["gen_ai.input.messages"]).toBeUndefined();
    // Traces only: no metrics, no logs.
    expect(receiver.requests.filter((r) => r.path !== "/v1/traces")).toEqual([]);
  });

  it("continues the client's trace in the Director that takes the task over", async () => {
    const root = randomRoot();
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_BSP_SCHEDULE_DELAY: "50" };
    await startRoles(root, otel, ["memory", "handler", "evaluator"]);
    const directors = await startDirectors(server.url, root, { ...otel, DIRIGENT_ACK_WAIT_MS: "1500", DIRIGENT_LOG_LEVEL: "info" });
    processes.push(...directors);
    const traceId = randomBytes(16).toString("hex");
    const taskId = `takeover-${Date.now()}`;
    const killClaimant = async () => {
      const owner = await claimant(directors, taskId);
      owner.child.kill("SIGKILL");
      await owner.exited;
    };
    const xml = "<task><description>SLOW question</description></task>";
    const outcome = await runTask(root, taskId, `00-${traceId}-${randomBytes(8).toString("hex")}-01`, xml, killClaimant);
    expect(outcome).toMatchObject({ taskId, status: "COMPLETE", content: "slow answer" });
    // The killed Director's run never ended; the second delivery's run is in the client's trace.
    const rerun = () => receiver.spans.find((s) => s.name === "director.run" && s.attributes["dirigent.task_id"] === taskId);
    await receiver.until(() => rerun() !== undefined);
    expect(rerun()).toMatchObject({ traceId, service: "dirigent-director", attributes: { "dirigent.deliveries": 2 } });
    expect(receiver.spans.filter((s) => s.attributes["dirigent.task_id"] === taskId).every((s) => s.traceId === traceId)).toBe(true);
  });

  it("records a model error echoing the API key and the prompt in no span, content tracing off", async () => {
    const root = randomRoot();
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_BSP_SCHEDULE_DELAY: "50" };
    await startRoles(root, {}, ["memory", "evaluator", "director"]);
    await startRoles(root, { ...otel, OPENAI_API_KEY: API_KEY }, ["handler"]);
    const taskId = `leaky-${Date.now()}`;
    const traceparent = `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
    const xml = "<task><description>LEAKY PROMPT-7731</description></task>";
    expect(await runTask(root, taskId, traceparent, xml)).toMatchObject({ taskId, status: "FAILED" });
    const chat = () =>
      receiver.spans.find((s) => s.attributes["gen_ai.operation.name"] === "chat" && s.attributes["dirigent.task_id"] === taskId);
    await receiver.until(() => chat() !== undefined);
    const exported = receiver.requests.map((r) => r.body).join("\n");
    expect(exported).toContain("model request failed: HTTP 401 after 1 attempt");
    expect(exported).not.toContain(API_KEY);
    expect(exported).not.toContain("PROMPT-7731");
  }, 60_000);

  it("exports nothing without an OTLP endpoint", async () => {
    const root = randomRoot();
    // The traced processes of the tests before stop first: what they still held is exported as they exit.
    await Promise.all(processes.slice(1).map((p) => p.stop()));
    const before = receiver.requests.length;
    // Only the per-signal endpoints of metrics and logs point at the receiver: an SDK started anyway would use them.
    const started = await startRoles(root, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "",
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${endpoint}/v1/metrics`,
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: `${endpoint}/v1/logs`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "50",
    });
    const taskId = `untraced-${Date.now()}`;
    const traceparent = `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
    expect(await runTask(root, taskId, traceparent)).toMatchObject({ taskId, status: "COMPLETE", content: "Paris" });
    // A traced process exports what is left when it stops: these stop having sent nothing.
    await Promise.all(started.map((p) => p.stop()));
    expect(started.map((p) => p.child.exitCode)).toEqual([0, 0, 0, 0]);
    expect(receiver.requests.length).toBe(before);
  });
});
