/** The mock model through the real `openai` SDK: errors, `times` and delays, the HTTP surface, script files. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI, { APIUserAbortError, BadRequestError, InternalServerError, RateLimitError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMockScript, MockScriptError, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { ask, closeServersAfterEach, logWatcher, start, textOf, user } from "../support/mock-llm-client.js";

closeServersAfterEach();

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

  it("sends the script's headers, its retry-after replacing the default 0s on a 429", async () => {
    const { client } = await start({
      rules: [
        { match: { lastUser: "seconds" }, status: 429, headers: { "Retry-After": "7" } },
        { match: { lastUser: "millis" }, status: 503, headers: { "retry-after-ms": "1500", "x-request-id": "req-1" } },
        { match: { lastUser: "date" }, status: 429, headers: { "retry-after": "Wed, 21 Oct 2065 07:28:00 GMT" } },
        { match: { lastUser: "other" }, status: 429, headers: { "x-ratelimit-remaining-requests": "0" } },
      ],
      default: { reply: "ok", headers: { "x-ratelimit-remaining-tokens": "42" } },
    });
    const headersOf = async (text: string) => ((await ask(client, [user(text)]).catch((e: unknown) => e)) as RateLimitError).headers;
    const seconds = await headersOf("seconds");
    expect([seconds?.get("retry-after"), seconds?.get("retry-after-ms")]).toEqual(["7", null]);
    const millis = await headersOf("millis");
    expect([millis?.get("retry-after-ms"), millis?.get("retry-after"), millis?.get("x-request-id")]).toEqual(["1500", null, "req-1"]);
    expect((await headersOf("date"))?.get("retry-after")).toBe("Wed, 21 Oct 2065 07:28:00 GMT");
    const other = await headersOf("other");
    expect([other?.get("retry-after"), other?.get("retry-after-ms"), other?.get("x-ratelimit-remaining-requests")]).toEqual([
      "0",
      "0",
      "0",
    ]);
    const { response } = await client.chat.completions.create({ model: "mock-model", messages: [user("fine")] }).withResponse();
    expect(response.headers.get("x-ratelimit-remaining-tokens")).toBe("42");
    expect(response.headers.get("content-type")).toBe("application/json");
  });

  it("answers with a scripted finish reason and refusal, plain and streamed", async () => {
    const { client } = await start({
      rules: [
        { match: { lastUser: "filter" }, reply: "Once upon a", finishReason: "content_filter" },
        { match: { lastUser: "refuse" }, refusal: "I'm sorry, I can't help with that." },
      ],
    });
    const filtered = (await ask(client, [user("filter")])).choices[0];
    expect(filtered).toMatchObject({ finish_reason: "content_filter", message: { content: "Once upon a", refusal: null } });
    const refused = (await ask(client, [user("refuse")])).choices[0];
    expect(refused).toMatchObject({ finish_reason: "stop", message: { content: null, refusal: "I'm sorry, I can't help with that." } });
    const streamed = await client.chat.completions.stream({ model: "mock-model", messages: [user("refuse")] }).finalChatCompletion();
    expect(streamed.choices[0]).toMatchObject({ finish_reason: "stop", message: { refusal: "I'm sorry, I can't help with that." } });
    const streamedFilter = await client.chat.completions.stream({ model: "mock-model", messages: [user("filter")] }).finalChatCompletion();
    expect(streamedFilter.choices[0]).toMatchObject({ finish_reason: "content_filter", message: { content: "Once upon a" } });
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

describe("mock-llm: gates", () => {
  it("holds answers at a gate until its count of requests has arrived, then answers them all; later ones pass", async () => {
    const watcher = logWatcher();
    const { client, server } = await start(
      {
        rules: [{ match: { lastUser: "gated" }, gate: { name: "g", count: 3 }, reply: "released {{lastUser}}" }],
        default: { reply: "free" },
      },
      watcher.log,
    );
    let answered = 0;
    const first = ask(client, [user("gated 1")]).then((c) => (answered++, textOf(c)));
    const second = ask(client, [user("gated 2")]).then((c) => (answered++, textOf(c)));
    await watcher.next("at gate 'g'");
    await watcher.next("at gate 'g'");
    // Two of three have arrived: neither is answered, while an ungated request is.
    expect(textOf(await ask(client, [user("other")]))).toBe("free");
    expect(answered).toBe(0);
    const third = ask(client, [user("gated 3")]).then((c) => textOf(c));
    expect(await Promise.all([first, second, third])).toEqual(["released gated 1", "released gated 2", "released gated 3"]);
    // The gate is open now.
    expect(textOf(await ask(client, [user("gated 4")]))).toBe("released gated 4");
    expect(server.requests).toHaveLength(5);
  });

  it("stops counting a request whose client went away at the gate", async () => {
    const watcher = logWatcher();
    const { client } = await start(
      { rules: [{ match: { lastUser: "gated" }, gate: { name: "g", count: 2 }, reply: "through" }], default: { reply: "free" } },
      watcher.log,
    );
    const controller = new AbortController();
    const gone = client.chat.completions.create({ model: "mock-model", messages: [user("gated a")] }, { signal: controller.signal });
    await watcher.next("at gate 'g'");
    controller.abort();
    await expect(gone).rejects.toBeInstanceOf(APIUserAbortError);
    await watcher.next("aborted by client at gate 'g'");
    // The aborted one no longer counts: one more request still waits for a second.
    let answered = false;
    const waiting = ask(client, [user("gated b")]).then((c) => ((answered = true), textOf(c)));
    await watcher.next("at gate 'g'");
    expect(textOf(await ask(client, [user("other")]))).toBe("free");
    expect(answered).toBe(false);
    expect(textOf(await ask(client, [user("gated c")]))).toBe("through");
    expect(await waiting).toBe("through");
  });
});

describe("mock-llm: HTTP surface", () => {
  async function post(server: MockLlmServer, body: string): Promise<{ status: number; json: unknown }> {
    const response = await fetch(`${server.url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
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
    const { client, server } = await start({
      rules: [
        { match: { model: "gpt-x" }, reply: "a" },
        { match: { model: "gpt-x" }, reply: "b" },
      ],
    });
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

  it("refuses header names and values HTTP cannot carry, and an empty refusal", async () => {
    const path = await scriptFile(
      "headers.json",
      JSON.stringify({
        rules: [
          { status: 429, headers: { "retry after": "1" } },
          { status: 429, headers: { "retry-after": "1\r\nx-evil: 1" } },
          { refusal: "" },
        ],
      }),
    );
    const error = await loadError(path);
    expect(error.message).toContain(`${path}: /rules/0/headers/retry after: must be an HTTP header name`);
    expect(error.message).toContain(`${path}: /rules/1/headers/retry-after: must not contain a line break`);
    expect(error.message).toContain(`${path}: /rules/2/refusal:`);
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
