/**
 * The tracing seam (actors/tracing.ts, actors/handler/traces.ts) and the SDK switch (runtime/tracing/sdk.ts): nothing
 * recorded or injected without an SDK, the client's trace context kept all the same; model call spans after the GenAI
 * conventions, their content only when opted in and masked of secrets.
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { NodeSDK, tracing } from "@opentelemetry/sdk-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inSpan, startSpan, storedTraceContext, traceHeaders } from "../../actors/tracing.js";
import { inToolSpan, tracedModel } from "../../actors/handler/traces.js";
import { createMasker } from "../../actors/secrets.js";
import { traceContentWanted, tracingWanted } from "../../runtime/tracing/sdk.js";
import { maskingSpanProcessor } from "../../runtime/tracing/masking.js";
import { createModelClient } from "../../runtime/model/openai.js";
import { startMockLlm } from "../../runtime/model/mock-server.js";
import type { CallModel } from "../../actors/model.js";
import { tid } from "../support/ids.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
const reply = {
  content: "the answer",
  toolCalls: [],
  usage: { promptTokens: 12, completionTokens: 3 },
  model: "m-2025",
  finishReason: "stop",
};
const call: CallModel = async () => reply;
const request = { model: "m", messages: [{ role: "user" as const, content: "the prompt with sk-secret-123" }] };

describe("without an SDK", () => {
  it("records nothing and injects nothing, but keeps a valid received traceparent for the task", async () => {
    const span = startSpan("x");
    expect(span.span.isRecording()).toBe(false);
    expect(await inSpan("y", {}, async () => traceHeaders())).toEqual({});
    expect(storedTraceContext(new Map([["traceparent", PARENT]]))).toEqual({ traceparent: PARENT });
    expect(
      storedTraceContext(
        new Map([
          ["Traceparent", PARENT],
          ["tracestate", "a=b"],
        ]),
      ),
    ).toEqual({ traceparent: PARENT, tracestate: "a=b" });
    expect(storedTraceContext(new Map([["traceparent", "nonsense"]]))).toBeUndefined();
    expect(storedTraceContext(undefined)).toBeUndefined();
  });

  it("turns on only with an OTLP endpoint, and content only when asked", () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "" })).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).toBe(false);
    expect(traceContentWanted({})).toBe(false);
    expect(traceContentWanted({ DIRIGENT_TRACE_CONTENT: "on" })).toBe(true);
    expect(traceContentWanted({ DIRIGENT_TRACE_CONTENT: "off" })).toBe(false);
  });
});

describe("with an SDK", () => {
  const exporter = new tracing.InMemorySpanExporter();
  /** What an exporter of the runtime gets: every span masked of the process's secrets (runtime/tracing/sdk.ts). */
  const masked = new tracing.InMemorySpanExporter();
  const sdk = new NodeSDK({
    spanProcessors: [
      new tracing.SimpleSpanProcessor(exporter),
      maskingSpanProcessor(new tracing.SimpleSpanProcessor(masked), createMasker(["sk-secret-123"])),
    ],
    metricReaders: [],
    logRecordProcessors: [],
    autoDetectResources: false,
  });
  beforeAll(() => sdk.start());
  afterAll(async () => {
    await sdk.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });
  const parent = () => context.active();
  const spans = () => exporter.getFinishedSpans();

  it("continues a received trace and injects it into the requests asked inside", async () => {
    exporter.reset();
    const headers = await inSpan("served", { parent: new Map([["traceparent", PARENT]]) }, async () => traceHeaders());
    expect(headers["traceparent"]).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    expect(spans()[0]?.spanContext().traceId).toBe(TRACE_ID);
    expect(storedTraceContext(undefined, startSpan("s", { parent: { traceparent: PARENT } }).context)?.traceparent).toContain(TRACE_ID);
  });

  it("gives a model call gen_ai attributes, without its prompt and completion unless opted in", async () => {
    exporter.reset();
    const mask = createMasker(["sk-secret-123"]);
    await tracedModel(call, { parent: parent(), taskId: tid("t"), nodePath: "0", content: false, mask })(
      request,
      new AbortController().signal,
    );
    const [plain] = spans();
    expect(plain?.name).toBe("chat m");
    expect(plain?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "m",
      "gen_ai.response.model": "m-2025",
      "gen_ai.usage.input_tokens": 12,
      "gen_ai.usage.output_tokens": 3,
      "dirigent.task_id": "t",
    });
    expect(JSON.stringify(plain?.attributes)).not.toMatch(/prompt|answer|secret/);

    exporter.reset();
    await tracedModel(call, { parent: parent(), taskId: tid("t"), nodePath: "0", content: true, mask })(
      request,
      new AbortController().signal,
    );
    const recorded = JSON.stringify(spans()[0]?.attributes);
    expect(recorded).toMatch(/the prompt with \[redacted\]/);
    expect(recorded).toMatch(/the answer/);
    expect(recorded).not.toMatch(/sk-secret-123/);
  });

  it("records a failed model call without what its server echoed: neither the prompt nor the API key", async () => {
    // A server answering 401 with the request's Authorization header and the prompt in its error message.
    const mock = await startMockLlm({
      port: 0,
      script: {
        rules: [{ status: 401, error: "Incorrect API key: Authorization: Bearer sk-secret-123 for 'the prompt with sk-secret-123'" }],
      },
    });
    try {
      const client = createModelClient({ baseURL: mock.url, apiKey: "sk-secret-123", timeoutMs: 5000, maxRetries: 0 });
      exporter.reset();
      masked.reset();
      const trace = { parent: parent(), taskId: tid("t"), nodePath: "0", content: false, mask: createMasker(["sk-secret-123"]) };
      await expect(tracedModel(client, trace)(request, new AbortController().signal)).rejects.toThrow(/Bearer sk-secret-123/);
      const [span] = masked.getFinishedSpans();
      expect(span?.status).toEqual({ code: 2, message: "model request failed: HTTP 401 after 1 attempt" });
      expect(span?.events.map((e) => [e.name, e.attributes])).toEqual([
        ["exception", { "exception.type": "ModelCallError", "exception.message": "model request failed: HTTP 401 after 1 attempt" }],
      ]);
      expect(JSON.stringify([span?.status, span?.events, span?.attributes, span?.name])).not.toMatch(/sk-secret|prompt|Bearer/);
    } finally {
      await mock.close();
    }
  });

  it("masks the secrets of every field of a span before it is exported", async () => {
    masked.reset();
    const leak = new Error("connect to nats://handler:sk-secret-123@nats1:4222 failed");
    await expect(
      inSpan("ask sk-secret-123", { attributes: { "dirigent.task_id": "t-sk-secret-123", list: ["a", "sk-secret-123"] } }, async () => {
        throw leak;
      }),
    ).rejects.toBe(leak);
    const [span] = masked.getFinishedSpans();
    expect(span?.name).toBe("ask [redacted]");
    expect(span?.attributes).toEqual({ "dirigent.task_id": "t-[redacted]", list: ["a", "[redacted]"] });
    expect(span?.status.message).toBe("connect to nats://handler:[redacted]@nats1:4222 failed");
    expect(span?.events[0]?.attributes?.["exception.stacktrace"]).toMatch(/^Error: connect to nats:\/\/handler:\[redacted\]@nats1/);
    expect(JSON.stringify([span?.status, span?.events, span?.attributes, span?.name])).not.toMatch(/sk-secret/);
    // The span itself, and what another processor got, are untouched.
    expect(exporter.getFinishedSpans().at(-1)?.name).toBe("ask sk-secret-123");
  });

  it("runs a tool call in its span, with its arguments only when opted in", async () => {
    exporter.reset();
    const toolCall = { id: "c1", type: "function" as const, function: { name: "read_file", arguments: '{"path":"a"}' } };
    const trace = { parent: parent(), taskId: tid("t"), nodePath: "0", content: false, mask: createMasker([]) };
    await inToolSpan(toolCall, trace, "files", async () => ({ content: "file text" }));
    expect(spans()[0]?.name).toBe("execute_tool read_file");
    expect(spans()[0]?.attributes).toMatchObject({ "gen_ai.tool.name": "read_file", "dirigent.tool.source": "files" });
    expect(JSON.stringify(spans()[0]?.attributes)).not.toMatch(/file text|gen_ai\.tool\.call\.arguments/);

    exporter.reset();
    await inToolSpan(toolCall, { ...trace, content: true }, "files", async () => ({ content: "file text" }));
    expect(spans()[0]?.attributes).toMatchObject({ "gen_ai.tool.call.arguments": '{"path":"a"}', "gen_ai.tool.call.result": "file text" });
  });
});
