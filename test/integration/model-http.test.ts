/**
 * The model client's own HTTP clients (runtime/model/http1.ts, the default, and runtime/model/http-fetch.ts over
 * `node:http`) against real servers on loopback: a bare `node:http` server for what `fetch` must keep (bodies,
 * headers, statuses, compression, aborts, refused connections), and the real `openai` SDK through each against
 * `dirigent mock-llm`, plain and streamed, with retries. The framing of HTTP/1.1 answers as servers write them, byte
 * by byte, is model-http1.test.ts.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHttpFetch } from "../../runtime/model/http-fetch.js";
import { createHttp1Fetch } from "../../runtime/model/http1.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { createModelClient } from "../../runtime/model/openai.js";

let server: Server;
let base: string;
const connections = new Set<string>();

const bodyOf = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let text = "";
    req.on("data", (c: Buffer) => (text += c.toString()));
    req.on("end", () => resolve(text));
  });

beforeAll(async () => {
  server = createServer(async (req, res) => {
    connections.add(`${req.socket.remotePort}`);
    const body = await bodyOf(req);
    if (req.url === "/echo") {
      res.writeHead(201, { "content-type": "application/json", "x-reply": "yes" });
      res.end(JSON.stringify({ method: req.method, body, auth: req.headers.authorization, length: req.headers["content-length"] }));
    } else if (req.url === "/gzip") {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(JSON.stringify({ zipped: true })));
    } else if (req.url === "/hang") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
    } else if (req.url === "/empty") {
      res.writeHead(204);
      res.end();
    } else {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("no such path");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe.each([
  { name: "createHttp1Fetch", create: createHttp1Fetch },
  { name: "createHttpFetch", create: createHttpFetch },
])("$name", ({ create }) => {
  const httpFetch = create();

  it("sends the method, headers and body, and answers with the status, headers and body, on kept-alive sockets", async () => {
    connections.clear();
    for (let i = 0; i < 3; i++) {
      const res = await httpFetch(`${base}/echo`, {
        method: "POST",
        headers: new Headers({ authorization: "Bearer k", "content-type": "application/json" }),
        body: JSON.stringify({ n: i, text: "é" }),
      });
      expect(res.status).toBe(201);
      expect(res.headers.get("x-reply")).toBe("yes");
      expect(await res.json()).toEqual({ method: "POST", body: `{"n":${i},"text":"é"}`, auth: "Bearer k", length: "19" });
    }
    expect(connections.size).toBe(1);
  });

  it("answers a whole body as fetch would: read once, cloned before, as a stream when asked, with the request's URL", async () => {
    const post = () => httpFetch(`${base}/echo`, { method: "POST", body: "b" });
    const res = await post();
    expect([res.url, res.ok, res.bodyUsed]).toEqual([`${base}/echo`, true, false]);
    const copy = res.clone();
    expect(await res.text()).toContain('"body":"b"');
    expect(res.bodyUsed).toBe(true);
    await expect(res.json()).rejects.toThrow(TypeError);
    expect(() => res.clone()).toThrow(TypeError);
    expect(await copy.json()).toMatchObject({ method: "POST", body: "b" });
    const streamed = await post();
    const chunks: Uint8Array[] = [];
    for await (const chunk of streamed.body!) chunks.push(chunk);
    expect(JSON.parse(Buffer.concat(chunks).toString())).toMatchObject({ body: "b" });
    expect(streamed.bodyUsed).toBe(true);
    await expect(streamed.text()).rejects.toThrow(TypeError);
    // Asking for the stream does not use the body; reading it does.
    const looked = await post();
    expect(looked.body).not.toBeNull();
    expect(looked.bodyUsed).toBe(false);
    expect(new Uint8Array(await looked.arrayBuffer())[0]).toBe("{".charCodeAt(0));
    expect(looked.bodyUsed).toBe(true);
  });

  it("decodes a gzip body and drops its content-encoding", async () => {
    const res = await httpFetch(`${base}/gzip`);
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(await res.json()).toEqual({ zipped: true });
  });

  it("answers 204 and 404 as fetch does", async () => {
    const empty = await httpFetch(`${base}/empty`, { method: "DELETE" });
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe("");
    const missing = await httpFetch(`${base}/missing`);
    expect([missing.status, missing.ok, await missing.text()]).toEqual([404, false, "no such path"]);
  });

  it("streams an event stream as it comes and stops it on abort", async () => {
    const controller = new AbortController();
    const res = await httpFetch(`${base}/hang`, { signal: controller.signal });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("data: first\n\n");
    controller.abort();
    await expect(reader.read()).rejects.toThrow();
  });

  it("rejects with an AbortError when aborted before the answer, and on a refused connection", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(httpFetch(`${base}/echo`, { method: "POST", body: "x", signal: controller.signal })).rejects.toMatchObject({
      name: "AbortError",
    });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(httpFetch(`http://127.0.0.1:${port}/`)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("sends a request again on a new socket when the kept-alive socket it reused is closed before any answer", async () => {
    // The server closes a kept-alive socket as its next request comes (as one whose idle timeout ran out just then
    // would): the request never reached a handler.
    const seen = new Map<object, number>();
    let handled = 0;
    const closing = createServer((req, res) => {
      const n = (seen.get(req.socket) ?? 0) + 1;
      seen.set(req.socket, n);
      if (n > 1) return void req.socket.destroy();
      handled++;
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ n: handled }));
    });
    await new Promise<void>((resolve) => closing.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(closing.address() as AddressInfo).port}/`;
    try {
      const own = create();
      expect(await (await own(url, { method: "POST", body: "first" })).json()).toEqual({ n: 1 });
      expect(await (await own(url, { method: "POST", body: "second" })).json()).toEqual({ n: 2 });
      // Each answer came on its own socket, and the second request was handled once.
      expect(seen.size).toBe(2);
      expect(handled).toBe(2);
    } finally {
      closing.closeAllConnections();
      await new Promise((resolve) => closing.close(resolve));
    }
  });

  it("leaves what it does not cover to fetch: a Request object", async () => {
    const res = await httpFetch(new Request(`${base}/echo`, { method: "PUT", body: "req" }));
    expect(await res.json()).toMatchObject({ method: "PUT", body: "req" });
  });
});

describe.each(["http1", "node"] as const)("the openai SDK through the %s client", (http) => {
  let mock: MockLlmServer;

  beforeAll(async () => {
    mock = await startMockLlm({
      script: {
        rules: [
          { match: { lastUser: "busy" }, status: 503, error: "overloaded", times: 1 },
          { match: { lastUser: "busy" }, reply: "now free" },
        ],
        default: { reply: "hello {{lastUser}}" },
      },
    });
  });

  afterAll(async () => {
    await mock.close();
  });

  const client = () => createModelClient({ baseURL: mock.url, apiKey: "test-key", timeoutMs: 10_000, maxRetries: 2, retryBaseMs: 1, http });
  const request = (text: string) => ({ model: "m", messages: [{ role: "user" as const, content: text }] });

  it("answers a chat completion, sending the key", async () => {
    const reply = await client()(request("there"), new AbortController().signal);
    expect(reply.content).toBe("hello there");
    expect(mock.requests.at(-1)?.headers.authorization).toBe("Bearer test-key");
  });

  it("streams the deltas of a streamed answer", async () => {
    const deltas: string[] = [];
    const reply = await client()(request("stream"), new AbortController().signal, { onDelta: (d) => deltas.push(d) });
    expect(reply.content).toBe("hello stream");
    expect(deltas.join("")).toBe("hello stream");
  });

  it("is the client the model client takes by default only when it is the HTTP/1.1 one", async () => {
    // node:http's agent names its kept connections in a `connection: keep-alive` header; the HTTP/1.1 client sends
    // none (a kept connection is HTTP/1.1's default).
    const byDefault = createModelClient({ baseURL: mock.url, apiKey: "test-key", timeoutMs: 10_000, maxRetries: 0 });
    await byDefault(request("default"), new AbortController().signal);
    const sentByDefault = mock.requests.at(-1)?.headers.connection;
    await client()(request("chosen"), new AbortController().signal);
    const sentByThis = mock.requests.at(-1)?.headers.connection;
    expect(sentByThis === sentByDefault).toBe(http === "http1");
    expect(sentByThis).toBe(http === "node" ? "keep-alive" : undefined);
  });

  it("retries a 503 and reports it", async () => {
    const retries: number[] = [];
    const reply = await client()(request("busy"), new AbortController().signal, { onRetry: (r) => retries.push(r.status ?? 0) });
    expect([reply.content, retries]).toEqual(["now free", [503]]);
  });
});
