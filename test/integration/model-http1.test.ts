/**
 * The model client's HTTP/1.1 client (runtime/model/http1.ts) against servers that write their answers byte for byte
 * on loopback sockets: every framing an answer may have, which connections are kept, what fails and how, the limit of
 * connections per origin, and TLS with the server's certificate checked (in a child process trusting the test's
 * self-signed certificate, which also shows that a kept connection keeps no process alive).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import net, { type AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createHttp1Fetch } from "../../runtime/model/http1.js";

/** A request as the raw server read it. */
interface Asked {
  readonly head: string;
  readonly body: string;
  /** Which connection it came on (1, 2, … in the order they opened). */
  readonly connection: number;
}

type Answer = (socket: net.Socket, asked: Asked) => void;

const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();

afterEach(async () => {
  // The client keeps its connections: the servers end them.
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

/** A server that reads each request (head and content-length body) and lets `answer` write whatever bytes it likes. */
async function rawServer(answer: Answer): Promise<{ url: string; asked: Asked[]; connections: () => number }> {
  const asked: Asked[] = [];
  let connections = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const connection = ++connections;
    let pending = Buffer.alloc(0);
    socket.on("error", () => undefined);
    socket.on("data", (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = pending.toString("latin1", 0, end);
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        const request = { head, body: pending.toString("utf8", end + 4, end + 4 + length), connection };
        pending = pending.subarray(end + 4 + length);
        asked.push(request);
        answer(socket, request);
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat`, asked, connections: () => connections };
}

const json = (text: string) =>
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;

describe("createHttp1Fetch against raw HTTP/1.1 servers", () => {
  it("writes one request head with the host, the body's length and the caller's headers, and keeps the connection", async () => {
    const server = await rawServer((socket) => socket.write(json('{"ok":true}')));
    const httpFetch = createHttp1Fetch();
    for (let i = 0; i < 3; i++) {
      const res = await httpFetch(`${server.url}?n=${i}`, {
        method: "POST",
        headers: { Authorization: "Bearer k", "x-n": String(i) },
        body: "é",
      });
      expect(await res.json()).toEqual({ ok: true });
    }
    expect(server.connections()).toBe(1);
    const [line, ...headers] = server.asked[2]!.head.split("\r\n");
    expect(line).toBe("POST /v1/chat?n=2 HTTP/1.1");
    expect(headers).toEqual(
      expect.arrayContaining([`host: ${new URL(server.url).host}`, "content-length: 2", "authorization: Bearer k", "x-n: 2"]),
    );
    expect(server.asked[2]!.body).toBe("é");
  });

  it("reads a chunked answer written in pieces, with extensions and trailers, and keeps the connection", async () => {
    const pieces = [
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\n",
      '{"a":',
      "\r\n",
      "3\r\n",
      '"b"',
      "\r\n1\r\n}\r\n0\r\nx-trailer: t\r\n\r\n",
    ];
    const server = await rawServer((socket) => {
      // Each piece in its own write, each after the one before has left.
      const next = (i: number): void => void (i < pieces.length && socket.write(pieces[i]!, () => setImmediate(next, i + 1)));
      next(0);
    });
    const httpFetch = createHttp1Fetch();
    expect(await (await httpFetch(server.url, { method: "POST", body: "1" })).json()).toEqual({ a: "b" });
    expect(await (await httpFetch(server.url, { method: "POST", body: "2" })).json()).toEqual({ a: "b" });
    expect(server.connections()).toBe(1);
  });

  it("reads an answer that ends with its connection, and does not reuse that connection", async () => {
    const server = await rawServer((socket, asked) =>
      socket.end(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nanswer ${asked.body}`),
    );
    const httpFetch = createHttp1Fetch();
    expect(await (await httpFetch(server.url, { method: "POST", body: "1" })).text()).toBe("answer 1");
    expect(await (await httpFetch(server.url, { method: "POST", body: "2" })).text()).toBe("answer 2");
    expect(server.connections()).toBe(2);
  });

  it("skips informational heads, and closes a connection that carried bytes past the answer", async () => {
    const server = await rawServer((socket) =>
      socket.write(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n${json('{"n":1}')}HTTP/1.1 200 OK\r\n`),
    );
    const httpFetch = createHttp1Fetch();
    const res = await httpFetch(server.url, { method: "POST", body: "x" });
    expect([res.status, res.headers.get("link"), await res.json()]).toEqual([200, null, { n: 1 }]);
    await httpFetch(server.url, { method: "POST", body: "y" });
    expect(server.connections()).toBe(2);
  });

  it("answers a HEAD, a 204 and a 304 with no body, and keeps the connection", async () => {
    const server = await rawServer((socket, asked) => {
      const status = asked.head.startsWith("HEAD") ? "200 OK" : asked.body === "a" ? "204 No Content" : "304 Not Modified";
      socket.write(`HTTP/1.1 ${status}\r\ncontent-length: 0\r\n\r\n`);
    });
    const httpFetch = createHttp1Fetch();
    const head = await httpFetch(server.url, { method: "HEAD" });
    const none = await httpFetch(server.url, { method: "POST", body: "a" });
    const same = await httpFetch(server.url, { method: "POST", body: "b" });
    expect([head.status, none.status, same.status]).toEqual([200, 204, 304]);
    expect([await head.text(), await none.text(), await same.text()]).toEqual(["", "", ""]);
    expect(server.connections()).toBe(1);
  });

  it("fails a request whose answer it cannot read, saying why, and goes on with the next on a new connection", async () => {
    const answers = [
      "HTTP/2 200 OK\r\n\r\n",
      "HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\n\r\n",
      "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
      "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
      `HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(70_000)}\r\n\r\n`,
      "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n",
      "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc",
    ];
    let n = 0;
    const server = await rawServer((socket) => {
      const answer = answers[n++];
      if (answer === undefined) return void socket.write(json('{"fine":true}'));
      socket.write(answer, () => answer.endsWith("abc") && socket.end());
    });
    const httpFetch = createHttp1Fetch();
    const failure = async () => {
      try {
        await httpFetch(server.url, { method: "POST", body: "x" });
      } catch (error) {
        return (error as Error).message;
      }
      return "answered";
    };
    const messages: string[] = [];
    for (let i = 0; i < answers.length; i++) messages.push(await failure());
    expect(messages).toEqual([
      expect.stringMatching(/cannot be read: not an HTTP\/1.x status line/),
      "the model server's answer cannot be read: a folded header line",
      expect.stringMatching(/cannot be read: an invalid content-length/),
      expect.stringMatching(/cannot be read: a chunk size line/),
      "the model server's answer has a head over 65536 bytes",
      "the model server switched protocols (101), which this client does not do",
      "the model server closed the connection before the end of its answer",
    ]);
    expect(await (await httpFetch(server.url, { method: "POST", body: "x" })).json()).toEqual({ fine: true });
    expect(server.connections()).toBe(answers.length + 1);
  });

  it("refuses a header that would break the request's framing, before anything is sent", async () => {
    const server = await rawServer((socket) => socket.write(json("{}")));
    const httpFetch = createHttp1Fetch();
    // A line break is refused by the Headers the client reads the headers into; a control character Headers lets
    // through, by the client's own check, as node:http refuses it.
    await expect(httpFetch(server.url, { method: "POST", headers: { "x-a": "1\r\nx-injected: yes" }, body: "x" })).rejects.toThrow();
    await expect(httpFetch(server.url, { method: "POST", headers: { "x-a": "1\u0001" }, body: "x" })).rejects.toMatchObject({
      code: "ERR_INVALID_CHAR",
    });
    await expect(httpFetch(server.url, { method: "GET / HTTP/1.1\r\nx: y", body: "x" })).rejects.toThrow(/invalid HTTP method/);
    expect(server.asked).toEqual([]);
  });

  it("sends a request again on a new connection when the server closed its kept one before answering", async () => {
    const server = await rawServer((socket, asked) => {
      if (asked.body === "second" && asked.connection === 1) return void socket.destroy();
      socket.write(json(JSON.stringify({ body: asked.body, connection: asked.connection })));
    });
    const httpFetch = createHttp1Fetch();
    expect(await (await httpFetch(server.url, { method: "POST", body: "first" })).json()).toEqual({ body: "first", connection: 1 });
    expect(await (await httpFetch(server.url, { method: "POST", body: "second" })).json()).toEqual({ body: "second", connection: 2 });
    // And a connection the server closed while it was idle is left for a new one.
    const idle = createHttp1Fetch();
    const closing = await rawServer((socket, asked) =>
      socket.end(json(JSON.stringify({ connection: asked.connection })).replace("OK\r\n", "OK\r\nconnection: keep-alive\r\n")),
    );
    expect(await (await idle(closing.url, { method: "POST", body: "a" })).json()).toEqual({ connection: 1 });
    expect(await (await idle(closing.url, { method: "POST", body: "b" })).json()).toEqual({ connection: 2 });
  });

  it("closes an idle connection a second before the idle time the server names, and keeps none it names under a second", async () => {
    const closed = new Map<number, Promise<void>>();
    const server = await rawServer((socket, asked) => {
      closed.set(asked.connection, new Promise<void>((resolve) => socket.once("close", () => resolve())));
      const hint = asked.body === "short" ? "timeout=1" : "timeout=2, max=100";
      socket.write(json(JSON.stringify({ connection: asked.connection })).replace("OK\r\n", `OK\r\nkeep-alive: ${hint}\r\n`));
    });
    const httpFetch = createHttp1Fetch();
    const opened = Date.now();
    expect(await (await httpFetch(server.url, { method: "POST", body: "a" })).json()).toEqual({ connection: 1 });
    // The client closes it (the server never would), a second before the 2 s the server named.
    await closed.get(1);
    expect(Date.now() - opened).toBeGreaterThanOrEqual(900);
    // Named under a second: not kept at all.
    expect(await (await httpFetch(server.url, { method: "POST", body: "short" })).json()).toEqual({ connection: 2 });
    await closed.get(2);
    expect(await (await httpFetch(server.url, { method: "POST", body: "b" })).json()).toEqual({ connection: 3 });
  });

  it("aborts a request waiting for its answer, closing its connection", async () => {
    let closed!: () => void;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    const server = await rawServer((socket) => {
      socket.on("close", closed);
      socket.write("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc");
    });
    const controller = new AbortController();
    const pending = createHttp1Fetch()(server.url, { method: "POST", body: "x", signal: controller.signal });
    await new Promise((resolve) => setImmediate(resolve));
    while (server.asked.length === 0) await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    await gone;
  });

  it("streams an event stream as it comes, and closes its connection when the reader cancels it", async () => {
    let closed!: () => void;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    const server = await rawServer((socket) => {
      socket.on("close", closed);
      socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nd\r\ndata: first\n\n\r\n");
    });
    const res = await createHttp1Fetch()(server.url, { method: "POST", body: "x" });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("data: first\n\n");
    await reader.cancel();
    await gone;
  });

  it("opens at most maxSockets connections to an origin; more requests wait for one", async () => {
    const server = await rawServer((socket, asked) => setImmediate(() => socket.write(json(JSON.stringify({ body: asked.body })))));
    const httpFetch = createHttp1Fetch({ maxSockets: 2 });
    const answers = await Promise.all(
      Array.from(
        { length: 7 },
        async (_, i) => (await (await httpFetch(server.url, { method: "POST", body: String(i) })).json()) as { body: string },
      ),
    );
    expect(answers.map((a) => a.body)).toEqual(["0", "1", "2", "3", "4", "5", "6"]);
    expect(server.connections()).toBe(2);
    // A request waiting for a connection ends when it is aborted, and takes none.
    const slow = await rawServer(() => undefined);
    const one = createHttp1Fetch({ maxSockets: 1 });
    void one(slow.url, { method: "POST", body: "holds the connection" }).catch(() => undefined);
    const controller = new AbortController();
    const waiting = one(slow.url, { method: "POST", body: "waits", signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ name: "AbortError" });
    expect(slow.connections()).toBeLessThanOrEqual(1);
  });
});

describe("createHttp1Fetch over TLS", () => {
  const tlsDir = fileURLToPath(new URL("../support/tls/", import.meta.url));
  const key = readFileSync(`${tlsDir}loopback.key`);
  const cert = readFileSync(`${tlsDir}loopback.crt`);

  async function httpsServer() {
    const server = createHttpsServer({ key, cert }, (req, res) => {
      sockets.add(req.socket);
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ secure: true, remotePort: req.socket.remotePort }));
      });
    });
    // Idle connections stay open until the test ends them: the child must end with one still open.
    server.keepAliveTimeout = 600_000;
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  }

  it("refuses a server whose certificate it cannot check", async () => {
    const url = await httpsServer();
    await expect(createHttp1Fetch()(url, { method: "POST", body: "x" })).rejects.toMatchObject({ code: "DEPTH_ZERO_SELF_SIGNED_CERT" });
  });

  it("answers over TLS on one kept connection when the certificate is trusted, and the process ends by itself after", async () => {
    const url = await httpsServer();
    const module = new URL("../../dist/runtime/model/http1.js", import.meta.url).href;
    const script = `
      const { createHttp1Fetch } = await import(${JSON.stringify(module)});
      const f = createHttp1Fetch();
      const a = await (await f(${JSON.stringify(url)}, { method: "POST", body: "1" })).json();
      const b = await (await f(${JSON.stringify(url)}, { method: "POST", body: "2" })).json();
      console.log(JSON.stringify([a, b]));`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: `${tlsDir}loopback.crt` },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    // The child ends on its own: its kept connection does not hold its event loop open (one that did not end in 30 s
    // is killed, and its exit code is then null).
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const bound = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const code = await exited;
    clearTimeout(bound);
    expect({ code, err }).toEqual({ code: 0, err: "" });
    const [a, b] = JSON.parse(out) as Array<{ secure: boolean; remotePort: number }>;
    expect([a!.secure, b!.secure]).toEqual([true, true]);
    expect(a!.remotePort).toBe(b!.remotePort);
  });
});
