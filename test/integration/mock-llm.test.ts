import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI, { APIUserAbortError, BadRequestError, InternalServerError, RateLimitError } from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadMockScript, MockScriptError, startMockLlm, type MockLlmServer, type MockScript } from "../../runtime/mock-llm.js";

type Message = OpenAI.Chat.ChatCompletionMessageParam;

const servers: MockLlmServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(script?: MockScript, log?: (line: string) => void): Promise<{ server: MockLlmServer; client: OpenAI }> {
  const server = await startMockLlm({ script, log });
  servers.push(server);
  return { server, client: new OpenAI({ baseURL: server.url, apiKey: "test", maxRetries: 0 }) };
}

function user(content: string): Message {
  return { role: "user", content };
}

async function ask(client: OpenAI, messages: Message[], model = "mock-model"): Promise<OpenAI.Chat.ChatCompletion> {
  return client.chat.completions.create({ model, messages });
}

function textOf(completion: OpenAI.Chat.ChatCompletion): string | null {
  return completion.choices[0]?.message.content ?? null;
}

function functionCalls(completion: OpenAI.Chat.ChatCompletion): { id: string; name: string; arguments: string }[] {
  return (completion.choices[0]?.message.tool_calls ?? []).flatMap((c) =>
    c.type === "function" ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
  );
}

/** Resolves with the first log line that contains `text`. */
function logWatcher(): { log: (line: string) => void; next: (text: string) => Promise<string> } {
  const lines: string[] = [];
  const waiters: { text: string; resolve: (line: string) => void }[] = [];
  return {
    log(line) {
      lines.push(line);
      for (const w of waiters.filter((w) => line.includes(w.text))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    },
    next(text) {
      const seen = lines.find((l) => l.includes(text));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ text, resolve }));
    },
  };
}

describe("mock-llm: plain replies", () => {
  it("echoes the last user message when there is no script", async () => {
    const { server, client } = await start();
    const completion = await ask(client, [user("first"), { role: "assistant", content: "ok" }, user("hello there")]);
    expect(textOf(completion)).toBe("mock: hello there");
    expect(completion.id).toBe("chatcmpl-mock-1");
    expect(completion.model).toBe("mock-model");
    expect(completion.object).toBe("chat.completion");
    expect(completion.created).toBeGreaterThan(0);
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.answeredBy).toBe("echo");
    expect(server.requests[0]?.body.messages).toHaveLength(3);
  });

  it("cuts the echo at 200 characters and echoes the requested model", async () => {
    const { client } = await start();
    const completion = await ask(client, [user("x".repeat(500))], "gpt-4o-mini");
    expect(textOf(completion)).toBe(`mock: ${"x".repeat(200)}`);
    expect(completion.model).toBe("gpt-4o-mini");
  });

  it("gives each response a new id", async () => {
    const { client } = await start();
    const ids = [(await ask(client, [user("a")])).id, (await ask(client, [user("b")])).id];
    expect(ids).toEqual(["chatcmpl-mock-1", "chatcmpl-mock-2"]);
  });

  it("fills {{lastUser}} in the default reply, taking the user text literally", async () => {
    const { server, client } = await start({ rules: [], default: { reply: "you said <{{lastUser}}> ({{lastUser}})" } });
    expect(textOf(await ask(client, [user("cost $& $1")]))).toBe("you said <cost $& $1> (cost $& $1)");
    expect(server.requests[0]?.answeredBy).toBe("default");
  });

  it("reads the text parts of array content", async () => {
    const { client } = await start({ rules: [{ match: { lastUser: "needle" }, reply: "found" }] });
    const completion = await ask(client, [
      { role: "user", content: [{ type: "text", text: "hay " }, { type: "text", text: "needle" }] },
    ]);
    expect(textOf(completion)).toBe("found");
  });
});

describe("mock-llm: rule matching", () => {
  const script: MockScript = {
    rules: [
      { match: { lastUser: "weather" }, reply: "substring rule" },
      { match: { lastUser: { regex: "^plan\\b", flags: "i" } }, reply: "regex rule" },
      { match: { system: "You are terse" }, reply: "system rule" },
      { match: { model: "special-model" }, reply: "model rule" },
      { match: { turn: 2 }, reply: "turn-2 rule" },
      { match: { anyMessage: "remember", turn: 3 }, reply: "any-message rule" },
      { match: { lastUser: "first" }, reply: "first wins" },
      { match: { lastUser: "first" }, reply: "never reached" },
    ],
  };

  it("matches by lastUser substring and regex", async () => {
    const { server, client } = await start(script);
    expect(textOf(await ask(client, [user("how is the weather?")]))).toBe("substring rule");
    expect(textOf(await ask(client, [user("PLAN the trip")]))).toBe("regex rule");
    expect(textOf(await ask(client, [user("explain the plan")]))).toBe("mock: explain the plan");
    expect(server.requests.map((r) => r.answeredBy)).toEqual([0, 1, "echo"]);
  });

  it("lastUser looks only at the last user message", async () => {
    const { client } = await start(script);
    const completion = await ask(client, [
      user("weather"),
      { role: "assistant", content: "a" },
      user("other"),
      { role: "assistant", content: "b" },
      user("again"),
    ]);
    expect(textOf(completion)).toBe("mock: again");
  });

  it("matches by system message, model and turn", async () => {
    const { client } = await start(script);
    expect(textOf(await ask(client, [{ role: "system", content: "You are terse." }, user("hi")]))).toBe("system rule");
    expect(textOf(await ask(client, [user("hi")], "special-model"))).toBe("model rule");
    expect(textOf(await ask(client, [user("hi"), { role: "assistant", content: "hello" }, user("and?")]))).toBe("turn-2 rule");
  });

  it("requires every condition of a rule", async () => {
    const { client } = await start(script);
    const turn1 = [user("remember this")];
    const turn3: Message[] = [...turn1, { role: "assistant", content: "ok" }, user("next"), { role: "assistant", content: "ok" }, user("go")];
    expect(textOf(await ask(client, turn1))).toBe("mock: remember this");
    expect(textOf(await ask(client, turn3))).toBe("any-message rule");
  });

  it("lets the first matching rule win", async () => {
    const { client } = await start(script);
    expect(textOf(await ask(client, [user("first")]))).toBe("first wins");
  });

  it("uses a new script after setScript", async () => {
    const { client, server } = await start(script);
    server.setScript({ rules: [], default: { reply: "replaced" } });
    expect(textOf(await ask(client, [user("weather")]))).toBe("replaced");
  });
});

describe("mock-llm: tool calls", () => {
  const tools: OpenAI.Chat.ChatCompletionTool[] = [
    { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
  ];
  const script: MockScript = {
    rules: [
      { match: { hasToolResult: "sunny" }, reply: "It is sunny in Oslo." },
      { match: { hasToolResult: true }, reply: "The tool said something else." },
      { match: { lastUser: "weather", hasToolResult: false }, toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
      { match: { lastUser: "broken" }, toolCalls: [{ name: "get_weather", arguments: '{"city": "Oslo"', id: "call_fixed" }] },
    ],
  };

  it("round-trips: tool call, then a reply to the tool result", async () => {
    const { client } = await start(script);
    const messages: Message[] = [user("what is the weather in Oslo?")];
    const first = await client.chat.completions.create({ model: "mock-model", messages, tools });
    expect(first.choices[0]?.finish_reason).toBe("tool_calls");
    expect(textOf(first)).toBeNull();
    const [call] = functionCalls(first);
    expect(call?.name).toBe("get_weather");
    expect(JSON.parse(call?.arguments ?? "")).toEqual({ city: "Oslo" });
    expect(call?.id).toMatch(/^call_mock_\d+$/);

    const assistant = first.choices[0]?.message;
    if (assistant === undefined || call === undefined) throw new Error("no tool call");
    messages.push(assistant, { role: "tool", tool_call_id: call.id, content: '{"sky": "sunny"}' });
    const second = await client.chat.completions.create({ model: "mock-model", messages, tools });
    expect(textOf(second)).toBe("It is sunny in Oslo.");
    expect(second.choices[0]?.finish_reason).toBe("stop");

    messages.splice(-1, 1, { role: "tool", tool_call_id: call.id, content: "rain" });
    expect(textOf(await ask(client, messages))).toBe("The tool said something else.");
  });

  it("delivers invalid JSON arguments verbatim", async () => {
    const { client } = await start(script);
    const completion = await ask(client, [user("broken call please")]);
    expect(functionCalls(completion)).toEqual([{ id: "call_fixed", name: "get_weather", arguments: '{"city": "Oslo"' }]);
  });
});

describe("mock-llm: streaming", () => {
  const script: MockScript = {
    rules: [
      {
        match: { lastUser: "tools" },
        reply: "Calling two tools.",
        toolCalls: [
          { name: "search", arguments: { query: "actor model", limit: 3 } },
          { name: "broken", arguments: "{not json" },
        ],
      },
    ],
    default: { reply: "  Streaming   works,\nword by word: {{lastUser}}  " },
  };

  it("streams text deltas that add up to the full reply", async () => {
    const { client } = await start(script);
    const full = textOf(await ask(client, [user("go")]));
    const stream = await client.chat.completions.create({ model: "mock-model", messages: [user("go")], stream: true });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? ""));
    expect(deltas.filter((d) => d !== "").length).toBeGreaterThan(3);
    expect(deltas.join("")).toBe(full);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(chunks.every((c) => c.id === chunks[0]?.id && c.object === "chat.completion.chunk" && c.model === "mock-model")).toBe(true);
    expect(chunks.some((c) => c.usage != null)).toBe(false);
  });

  it("ends with a usage chunk when include_usage is set", async () => {
    const { client } = await start(script);
    const plain = await ask(client, [user("go")]);
    const stream = await client.chat.completions.create({
      model: "mock-model",
      messages: [user("go")],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual(plain.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage == null)).toBe(true);
  });

  it("streams tool-call deltas the SDK reassembles", async () => {
    const { client } = await start(script);
    const plain = await ask(client, [user("tools")]);
    const runner = client.chat.completions.stream({ model: "mock-model", messages: [user("tools")] });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    runner.on("chunk", (chunk) => chunks.push(chunk));
    const final = await runner.finalChatCompletion();

    const argumentDeltas = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
    expect(argumentDeltas.filter((d) => d.index === 0).length).toBeGreaterThan(2);
    expect(final.choices[0]?.finish_reason).toBe("tool_calls");
    expect(final.choices[0]?.message.content).toBe("Calling two tools.");
    const streamed = functionCalls(final);
    expect(streamed.map((c) => [c.name, c.arguments])).toEqual(functionCalls(plain).map((c) => [c.name, c.arguments]));
    expect(streamed[1]?.arguments).toBe("{not json");
    expect(JSON.parse(streamed[0]?.arguments ?? "")).toEqual({ query: "actor model", limit: 3 });
  });
});

describe("mock-llm: usage", () => {
  it("reports scripted counts, estimating the missing one", async () => {
    const { client } = await start({
      rules: [
        { match: { lastUser: "exact" }, reply: "x", usage: { prompt_tokens: 123, completion_tokens: 45 } },
        { match: { lastUser: "half" }, reply: "y".repeat(40), usage: { prompt_tokens: 7 } },
      ],
    });
    expect((await ask(client, [user("exact")])).usage).toEqual({ prompt_tokens: 123, completion_tokens: 45, total_tokens: 168 });
    expect((await ask(client, [user("half")])).usage).toEqual({ prompt_tokens: 7, completion_tokens: 10, total_tokens: 17 });
  });

  it("estimates plausible integer counts of at least 1", async () => {
    const { client } = await start({ rules: [{ reply: "" }] });
    const small = (await ask(client, [user("a")])).usage;
    expect(small).toEqual({ prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 });
    const big = (await ask(client, [{ role: "system", content: "s".repeat(400) }, user("u".repeat(400))])).usage;
    expect(big?.prompt_tokens).toBe(200);
    expect(Number.isInteger(big?.completion_tokens)).toBe(true);
  });
});

describe("mock-llm: errors, times and delays", () => {
  it("applies a rule only `times` times, then falls through", async () => {
    const { server, client } = await start({
      rules: [
        { times: 2, status: 429, error: "slow down" },
        { times: 1, reply: "second rule once" },
      ],
      default: { reply: "default" },
    });
    await expect(ask(client, [user("a")])).rejects.toBeInstanceOf(RateLimitError);
    await expect(ask(client, [user("a")])).rejects.toBeInstanceOf(RateLimitError);
    expect(textOf(await ask(client, [user("a")]))).toBe("second rule once");
    expect(textOf(await ask(client, [user("a")]))).toBe("default");
    expect(server.requests.map((r) => r.answeredBy)).toEqual([0, 0, 1, "default"]);
    server.setScript({ rules: [{ times: 1, reply: "counters reset" }] });
    expect(textOf(await ask(client, [user("a")]))).toBe("counters reset");
  });

  it("surfaces status 429 as RateLimitError with an OpenAI-style body and retry-after 0", async () => {
    const { client } = await start({ rules: [{ status: 429, error: "rate limited by script" }] });
    const error = await ask(client, [user("a")]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    const rateLimit = error as RateLimitError;
    expect(rateLimit.status).toBe(429);
    expect(rateLimit.message).toContain("rate limited by script");
    expect(rateLimit.code).toBe("rate_limit_exceeded");
    expect(rateLimit.headers?.get("retry-after")).toBe("0");
    const streaming = client.chat.completions.create({ model: "mock-model", messages: [user("a")], stream: true });
    await expect(streaming).rejects.toBeInstanceOf(RateLimitError);
  });

  it("lets the SDK's own retries get past scripted 429s quickly", async () => {
    const { server } = await start({ rules: [{ times: 3, status: 429 }, { reply: "finally" }] });
    const retrying = new OpenAI({ baseURL: server.url, apiKey: "test", maxRetries: 3 });
    expect(textOf(await ask(retrying, [user("a")]))).toBe("finally");
    expect(server.requests).toHaveLength(4);
  });

  it("answers other statuses, and error without status as 500", async () => {
    const { client } = await start({
      rules: [
        { match: { lastUser: "503" }, status: 503 },
        { match: { lastUser: "400" }, status: 400, error: "bad by script" },
        { error: "boom" },
      ],
    });
    await expect(ask(client, [user("503")])).rejects.toMatchObject({ status: 503, constructor: InternalServerError });
    await expect(ask(client, [user("400")])).rejects.toMatchObject({ status: 400, message: "400 bad by script" });
    await expect(ask(client, [user("x")])).rejects.toMatchObject({ status: 500, message: "500 boom" });
    await expect(ask(client, [user("400")])).rejects.toBeInstanceOf(BadRequestError);
  });

  it("waits delayMs before answering", async () => {
    const { client } = await start({ rules: [{ delayMs: 30, reply: "late" }] });
    const started = performance.now();
    expect(textOf(await ask(client, [user("a")]))).toBe("late");
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
  });

  it("stops the delay when the client aborts, and keeps serving", async () => {
    const watcher = logWatcher();
    const { server, client } = await start(
      { rules: [{ match: { lastUser: "slow" }, delayMs: 600_000, reply: "never" }], default: { reply: "fast" } },
      watcher.log,
    );
    const controller = new AbortController();
    const pending = client.chat.completions.create({ model: "mock-model", messages: [user("slow")] }, { signal: controller.signal });
    await watcher.next("delaying 600000 ms");
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
    await watcher.next("aborted by client during delay");
    expect(textOf(await ask(client, [user("quick")]))).toBe("fast");
    expect(server.requests).toHaveLength(2);
  });

  it("closes promptly while a delayed request is pending", async () => {
    const watcher = logWatcher();
    const { client, server } = await start({ rules: [{ delayMs: 600_000, reply: "never" }] }, watcher.log);
    const pending = ask(client, [user("a")]).catch((e: unknown) => e);
    await watcher.next("delaying");
    await server.close();
    expect(await pending).toBeInstanceOf(Error);
    await watcher.next("aborted by client during delay");
  });
});

describe("mock-llm: HTTP surface", () => {
  async function post(server: MockLlmServer, body: string): Promise<{ status: number; json: unknown }> {
    const response = await fetch(`${server.url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
    return { status: response.status, json: await response.json() };
  }

  it("refuses malformed bodies with 400 and an OpenAI-style error", async () => {
    const { server, client } = await start();
    const notJson = await post(server, "{oops");
    expect(notJson.status).toBe(400);
    expect(notJson.json).toMatchObject({ error: { type: "invalid_request_error", message: expect.stringContaining("not JSON") } });

    const noMessages = await post(server, JSON.stringify({ model: "mock-model" }));
    expect(noMessages.status).toBe(400);
    expect(noMessages.json).toMatchObject({ error: { message: expect.stringContaining("/messages"), param: "messages" } });


    const notArray = await post(server, JSON.stringify({ model: "mock-model", messages: "hi" }));
    expect(notArray.status).toBe(400);

    const badRole = await post(server, JSON.stringify({ model: "mock-model", messages: [{ content: "hi" }] }));
    expect(badRole.json).toMatchObject({ error: { message: expect.stringContaining("/messages/0/role"), param: "messages.0.role" } });

    expect(server.requests).toHaveLength(0);
    expect(textOf(await ask(client, [user("still fine")]))).toBe("mock: still fine");
  });

  it("answers unknown routes with 404", async () => {
    const { server } = await start();
    const response = await fetch(`${server.url}/embeddings`, { method: "POST", body: "{}" });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { message: "unknown route 'POST /v1/embeddings'" } });
  });

  it("lists mock-model and the models the script names", async () => {
    const { client, server } = await start({ rules: [{ match: { model: "gpt-x" }, reply: "a" }, { match: { model: "gpt-x" }, reply: "b" }] });
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(["mock-model", "gpt-x"]);
    const health = await fetch(server.url.replace(/\/v1$/, "/health"));
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
  });

  it("keeps servers apart", async () => {
    const a = await start({ rules: [], default: { reply: "a" } });
    const b = await start({ rules: [], default: { reply: "b" } });
    expect(a.server.port).not.toBe(b.server.port);
    expect(a.server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(textOf(await ask(a.client, [user("x")]))).toBe("a");
    expect(textOf(await ask(b.client, [user("x")]))).toBe("b");
    expect((await ask(b.client, [user("x")])).id).toBe("chatcmpl-mock-2");
  });
});

describe("mock-llm: script files", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dirigent-mock-llm-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function scriptFile(name: string, text: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  }

  async function loadError(path: string): Promise<MockScriptError> {
    const error = await loadMockScript(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MockScriptError);
    return error as MockScriptError;
  }

  it("names the file and the JSON pointer of each problem", async () => {
    const path = await scriptFile(
      "bad.json",
      JSON.stringify({ rules: [{ delayMs: "soon" }, { match: { lastUser: { regex: "(" } }, reploy: "typo" }, { status: 200 }] }),
    );
    const error = await loadError(path);
    expect(error.message).toContain(`${path}: /rules/0/delayMs: expected number`);
    expect(error.message).toContain(`${path}: /rules/1/match/lastUser/regex: invalid regular expression`);
    expect(error.message).toContain(`${path}: /rules/1: unrecognized key: "reploy"`);
    expect(error.message).toContain(`${path}: /rules/2/status:`);
    expect(error.file).toBe(path);
    expect(error.issues.map((i) => i.path)).toEqual(
      expect.arrayContaining(["/rules/0/delayMs", "/rules/1/match/lastUser/regex", "/rules/1", "/rules/2/status"]),
    );
  });

  it("explains a wrong text matcher and a missing rules array", async () => {
    const matcher = await loadError(await scriptFile("matcher.json", '{"rules": [{"match": {"system": 5}}]}'));
    expect(matcher.message).toBe(`${matcher.file}: /rules/0/match/system: expected a string or {"regex": "..."}`);
    const empty = await loadError(await scriptFile("empty.json", "{}"));
    expect(empty.message).toContain(`${empty.file}: /rules: expected array`);
  });

  it("refuses files that are not JSON or do not exist", async () => {
    const notJson = await loadError(await scriptFile("broken.json", "{ rules: "));
    expect(notJson.message).toMatch(/broken\.json: not JSON: /);
    const missing = await loadError(join(dir, "missing.json"));
    expect(missing.message).toMatch(/missing\.json: cannot read script: .*ENOENT/);
  });

  it("loads the example script, which answers haiku requests with a haiku", async () => {
    const script = await loadMockScript(fileURLToPath(new URL("../../examples/mock-script.json", import.meta.url)));
    const { client } = await start(script);
    const haiku = textOf(await ask(client, [user("Write a Haiku about actors")]));
    expect(haiku?.split("\n")).toHaveLength(3);
    const other = textOf(await ask(client, [user("Summarise the plan")]));
    expect(other).toContain('"Summarise the plan"');
  });
});
