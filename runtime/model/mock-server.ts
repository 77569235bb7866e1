/**
 * `dirigent mock-llm`: a scripted, OpenAI-compatible chat completions server for tests and offline
 * demos. It speaks just enough of the API for the real `openai` SDK: completions (plain and SSE),
 * model listing and a health check. The script format lives in `mock-llm-script.ts`.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { validate } from "../../protocol/codec.js";
import { answerFor, ChatRequestBody, modelsOf, type AnsweredBy, type MockAnswer, type MockGate, type MockScript } from "./mock-script.js";
import { messageOf } from "../../protocol/errors.js";

export { loadMockScript, MockScript, MockScriptError, parseMockScript } from "./mock-script.js";
export type { AnsweredBy, ChatRequestBody } from "./mock-script.js";

/** The largest request body the mock accepts (8 MiB). */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** Options of {@link startMockLlm}. */
export interface MockLlmOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number | undefined;
  /** Interface to bind; defaults to `127.0.0.1`. */
  host?: string | undefined;
  /** The script; without one every request gets the echo reply `mock: <last user message>`. */
  script?: MockScript | undefined;
  /** Receives one line per request answered, aborted or refused. */
  log?: ((line: string) => void) | undefined;
}

/** A chat completion request the server accepted, kept for assertions. */
export interface RecordedRequest {
  /** The request body as sent (validated; unknown fields kept). */
  body: ChatRequestBody;
  /** The request headers. */
  headers: IncomingHttpHeaders;
  /** The index of the rule that answered, `"default"`, or `"echo"` when nothing matched. */
  answeredBy: AnsweredBy;
}

/** A running mock model server. */
export interface MockLlmServer {
  /** Base URL for the SDK's `baseURL`, ending in `/v1`. */
  readonly url: string;
  /** The port actually bound. */
  readonly port: number;
  /** Every chat completion request accepted so far, oldest first. */
  readonly requests: RecordedRequest[];
  /** Replaces the script and resets the `times` counters. */
  setScript(script: MockScript): void;
  /**
   * Opens the gate `name` whatever its count: the answers held there go out, and later requests at it pass at once.
   * A test holds a model call at a gate of a count never reached, and opens it once what it waits for has happened
   * (a process killed while the call is provably in flight), instead of guessing a delay.
   */
  openGate(name: string): void;
  /** Stops listening, drops open connections and cancels pending delays. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Starts a mock model server. Nothing is shared between servers, so tests may run several.
 * @example
 * const server = await startMockLlm({ script: await loadMockScript("examples/mock-script.json") });
 * const client = new OpenAI({ baseURL: server.url, apiKey: "test" });
 */
export async function startMockLlm(options: MockLlmOptions = {}): Promise<MockLlmServer> {
  const host = options.host ?? "127.0.0.1";
  const log = options.log ?? (() => {});
  const state: ServerState = { script: options.script, uses: new Map(), gates: new Map(), requests: [], completions: 0, toolCalls: 0 };
  const server = createServer((req, res) => {
    handle(req, res, state, log).catch((error: unknown) => {
      log(`mock-llm: ${req.method ?? "?"} ${req.url ?? "?"} failed: ${messageOf(error)}`);
      if (!res.headersSent) sendError(res, 500, "mock server error");
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}/v1`,
    port,
    requests: state.requests,
    setScript(script) {
      state.script = script;
      state.uses.clear();
      state.gates.clear();
    },
    openGate(name) {
      openGate(state, name);
    },
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error === undefined ? resolve() : reject(error)));
        // Keep-alive sockets (the SDK pools them) would hold close() open; dropping them also
        // fires each pending response's "close", which cancels its delay.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

interface ServerState {
  script: MockScript | undefined;
  uses: Map<number, number>;
  /** Gates by name: requests arrived, and the held ones' releases (none once open). */
  gates: Map<string, { arrived: number; held: Array<() => void> }>;
  requests: RecordedRequest[];
  completions: number;
  toolCalls: number;
}

async function handle(req: IncomingMessage, res: ServerResponse, state: ServerState, log: (line: string) => void): Promise<void> {
  res.on("error", (error) => log(`mock-llm: response error: ${error.message}`));
  const path = new URL(req.url ?? "/", "http://mock").pathname.replace(/\/+$/, "") || "/";
  const route = `${req.method ?? ""} ${path}`;
  if (route === "GET /health") return sendJson(res, 200, { status: "ok" });
  if (route === "GET /v1/models") return sendJson(res, 200, modelList(state.script));
  const gate = /^POST \/gates\/([^/]{1,200})\/open$/.exec(route);
  if (gate) {
    openGate(state, decodeURIComponent(gate[1] ?? ""));
    return sendJson(res, 200, { opened: decodeURIComponent(gate[1] ?? "") });
  }
  if (route !== "POST /v1/chat/completions") {
    log(`mock-llm: ${route} → 404`);
    return sendError(res, 404, `unknown route '${route}'`);
  }

  const text = await readBody(req);
  if (text === undefined) {
    log(`mock-llm: ${route} → 413`);
    return sendError(res, 413, `request body exceeds ${MAX_BODY_BYTES} bytes`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    log(`mock-llm: ${route} → 400 (not JSON)`);
    return sendError(res, 400, `request body is not JSON: ${messageOf(error)}`);
  }
  const parsed = validate(ChatRequestBody, json);
  if (!parsed.ok) {
    const problems = parsed.error.issues.map((i) => `${i.path || "/"}: ${i.message}`).join("; ");
    log(`mock-llm: ${route} → 400 (${problems})`);
    const param = parsed.error.issues[0]?.path.slice(1).replaceAll("/", ".") ?? null;
    return sendError(res, 400, `invalid chat completion request: ${problems}`, param);
  }
  const body = parsed.value;
  const answer = answerFor(state.script, body, state.uses);
  state.requests.push({ body, headers: req.headers, answeredBy: answer.answeredBy });
  const id = `chatcmpl-mock-${++state.completions}`;
  const summary = `mock-llm: ${id} model=${body.model} answeredBy=${answer.answeredBy}`;

  if (answer.gate) {
    log(`${summary} at gate '${answer.gate.name}'`);
    if (!(await passGate(state, answer.gate, res))) {
      log(`${summary} → aborted by client at gate '${answer.gate.name}'`);
      return;
    }
  }
  if (answer.delayMs > 0) {
    log(`${summary} delaying ${answer.delayMs} ms`);
    if (!(await delay(answer.delayMs, res))) {
      log(`${summary} → aborted by client during delay`);
      return;
    }
  }
  if (answer.kind === "error") {
    log(`${summary} → ${answer.status}`);
    return sendError(res, answer.status, answer.message, null, answer.headers);
  }
  const completion: Completion = {
    ...answer,
    id,
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    toolCalls: answer.toolCalls.map((c) => ({ ...c, id: c.id ?? `call_mock_${++state.toolCalls}` })),
  };
  if (body.stream === true) {
    log(`${summary} → 200 (stream)`);
    await sendStream(state, res, completion, body.stream_options?.include_usage === true);
  } else {
    log(`${summary} → 200`);
    sendJson(res, 200, completionBody(completion), completion.headers);
  }
}

type Completion = Omit<Extract<MockAnswer, { kind: "completion" }>, "toolCalls"> & {
  id: string;
  created: number;
  model: string;
  toolCalls: { id: string; name: string; arguments: string }[];
};

function completionBody(c: Completion): object {
  const message = {
    role: "assistant",
    content: c.content,
    refusal: c.refusal,
    ...(c.toolCalls.length > 0 ? { tool_calls: c.toolCalls.map((t) => toolCallBody(t, t.arguments)) } : {}),
  };
  return {
    id: c.id,
    object: "chat.completion",
    created: c.created,
    model: c.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: c.finishReason }],
    usage: c.usage,
    system_fingerprint: "dirigent-mock",
  };
}

async function sendStream(state: ServerState, res: ServerResponse, c: Completion, includeUsage: boolean): Promise<void> {
  // The SSE frames are written in one go (but for a stream gate), so a client gone now is the only abort to check.
  if (res.destroyed) return;
  res.writeHead(200, { ...c.headers, "content-type": "text/event-stream", "cache-control": "no-cache" });
  const frame = (choices: object[], extra: object = {}): void => {
    const chunk = { id: c.id, object: "chat.completion.chunk", created: c.created, model: c.model, choices, ...extra };
    res.write(`data: ${JSON.stringify(includeUsage ? { usage: null, ...chunk } : chunk)}\n\n`);
  };
  const delta = (d: object, finishReason: string | null = null): void =>
    frame([{ index: 0, delta: d, logprobs: null, finish_reason: finishReason }]);

  delta(c.content === null ? { role: "assistant" } : { role: "assistant", content: "" });
  for (const [n, piece] of (c.chunks ?? c.content?.match(/\S+\s*|\s+/gu) ?? []).entries()) {
    // A stream gate holds the rest of the text (and the end) until the test opens it; no count opens it by itself.
    if (c.streamGate && n === c.streamGate.after && !(await passGate(state, { name: c.streamGate.name, count: 1000 }, res))) return;
    delta({ content: piece });
  }
  for (const piece of c.refusal?.match(/\S+\s*|\s+/gu) ?? []) delta({ refusal: piece });
  for (const [index, call] of c.toolCalls.entries()) {
    delta({ tool_calls: [{ index, ...toolCallBody(call, "") }] });
    for (const piece of call.arguments.match(/[\s\S]{1,8}/gu) ?? []) {
      delta({ tool_calls: [{ index, function: { arguments: piece } }] });
    }
  }
  delta({}, c.finishReason);
  if (includeUsage) frame([], { usage: c.usage });
  res.end("data: [DONE]\n\n");
}

function toolCallBody(call: { id: string; name: string }, args: string): object {
  return { id: call.id, type: "function", function: { name: call.name, arguments: args } };
}

function modelList(script: MockScript | undefined): object {
  const ids = [...new Set(["mock-model", ...modelsOf(script)])];
  return { object: "list", data: ids.map((id) => ({ id, object: "model", created: 0, owned_by: "dirigent-mock" })) };
}

/** Opens the gate `name` whatever its count: the answers held there go out, later requests pass at once. */
function openGate(state: ServerState, name: string): void {
  const entry = state.gates.get(name) ?? { arrived: 0, held: [] };
  state.gates.set(name, entry);
  entry.arrived = Number.POSITIVE_INFINITY;
  for (const release of entry.held.splice(0)) release();
}

/**
 * Resolves `true` once `gate.count` requests have reached the gate (releasing those held), at once for a gate already
 * open, or `false` when the client goes away first (it is then no longer counted).
 */
function passGate(state: ServerState, gate: MockGate, res: ServerResponse): Promise<boolean> {
  const entry = state.gates.get(gate.name) ?? { arrived: 0, held: [] };
  state.gates.set(gate.name, entry);
  entry.arrived++;
  if (entry.arrived >= gate.count) {
    for (const release of entry.held.splice(0)) release();
    return Promise.resolve(true);
  }
  if (res.destroyed) {
    entry.arrived--;
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const release = (): void => {
      res.off("close", onClose);
      resolve(true);
    };
    const onClose = (): void => {
      entry.arrived--;
      entry.held = entry.held.filter((r) => r !== release);
      resolve(false);
    };
    entry.held.push(release);
    res.once("close", onClose);
  });
}

/** Resolves `true` after `ms`, or `false` as soon as the client goes away (the timer is then cleared). */
function delay(ms: number, res: ServerResponse): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onClose = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      res.off("close", onClose);
      resolve(true);
    }, ms);
    res.once("close", onClose);
  });
}

/** The body as text, or `undefined` when it is larger than {@link MAX_BODY_BYTES}. */
async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Oversized bodies are still drained: leaving the loop early would destroy the socket, and
  // the client would see a reset instead of the 413.
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  return size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString("utf8");
}

function sendJson(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  res.writeHead(status, { ...headers, "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  param: string | null = null,
  extra: Record<string, string> = {},
): void {
  const type = status === 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error";
  const code = status === 429 ? "rate_limit_exceeded" : status === 404 ? "not_found" : null;
  // Clients honour retry-after(-ms), so retries of a scripted 429 do not wait seconds unless the script asks for it.
  const scripted = "retry-after" in extra || "retry-after-ms" in extra;
  const headers: Record<string, string> = status === 429 && !scripted ? { "retry-after": "0", "retry-after-ms": "0", ...extra } : extra;
  sendJson(res, status, { error: { message, type, param, code } }, headers);
}
