/**
 * The inspector page's server refuses what a page of another site could send it: a request naming another host (DNS
 * rebinding) gets 421, a request from another origin 403, on every path (the page, its files, the API and the event
 * stream), while the loopback names work; every answer carries the security headers. Over a real nats-server, with a
 * task the server knows, so a leak would show.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { request, type IncomingHttpHeaders } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { startInspectServer, type InspectServer } from "../../runtime/inspect/server.js";
import { NatsBus } from "../../runtime/nats/bus.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A GET with the given headers (fetch cannot set `Host`); for the event stream, stops after the first chunk. */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
        if (res.headers["content-type"] === "text/event-stream") {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
          req.destroy();
        }
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

const PATHS = [
  "/",
  "/app.js",
  "/dom.js",
  "/task-tree.js",
  "/app.css",
  "/api/machines",
  "/api/state",
  "/api/state?task=sec",
  "/api/tasks/sec-task-1",
  "/api/stream",
  "/nothing",
];
const TASK = "sec-task-1";

function expectSecurityHeaders(answer: Answer): void {
  const csp = String(answer.headers["content-security-policy"]);
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).not.toContain("unsafe-inline");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(answer.headers["x-content-type-options"]).toBe("nosniff");
  expect(answer.headers["referrer-policy"]).toBe("no-referrer");
  expect(answer.headers["x-frame-options"]).toBe("DENY");
}

describe("inspector server: Host and Origin checks", () => {
  let nats: TestNatsServer;
  let nc: NatsConnection;
  let bus: NatsBus;
  let server: InspectServer;

  beforeAll(async () => {
    nats = await startTestNatsServer();
    nc = await connect({ servers: nats.url, name: "inspect-security-test" });
    bus = new NatsBus(nc, { onError: () => undefined });
    const subjects = createSubjects(randomRoot());
    server = await startInspectServer({ bus, subjects, port: 0 });
    const event = { taskId: TASK, seq: 1, type: "task.queued", state: "queued", at: new Date().toISOString(), message: "secret plan" };
    nc.publish(subjects.taskEvents(TASK), JSON.stringify(event));
    await nc.flush();
    // The task is known before the checks run, so a refused request that leaked it would show it.
    while (!(await get(server.port, "/api/state", { host: `127.0.0.1:${server.port}` })).body.includes(TASK)) await nc.flush();
  });

  afterAll(async () => {
    await server?.close();
    await bus?.close();
    await nats?.stop();
  });

  it("answers the loopback names with the port, on every path", async () => {
    for (const host of [`127.0.0.1:${server.port}`, `localhost:${server.port}`, `[::1]:${server.port}`, `LOCALHOST:${server.port}`]) {
      for (const path of PATHS) {
        const answer = await get(server.port, path, { host });
        expect(answer.status, `${host} ${path}`).toBe(path === "/nothing" ? 404 : 200);
        expectSecurityHeaders(answer);
      }
    }
    expect((await get(server.port, "/api/state", { host: `localhost:${server.port}` })).body).toContain(TASK);
    expect((await get(server.port, "/api/stream", { host: `localhost:${server.port}` })).headers["content-type"]).toBe("text/event-stream");
  });

  it("refuses another host with 421 on every path, the event stream and the files included, and shows nothing", async () => {
    for (const host of [
      `attacker.example:${server.port}`,
      "attacker.example",
      `127.0.0.1:${server.port + 1}`,
      `localhost`,
      `127.0.0.1.attacker.example:${server.port}`,
    ]) {
      for (const path of PATHS) {
        const answer = await get(server.port, path, { host });
        expect(answer.status, `${host} ${path}`).toBe(421);
        expect(answer.headers["content-type"]).toBe("text/plain; charset=utf-8");
        expect(answer.body).toMatch(/^misdirected request: this server does not answer for host/);
        expect(answer.body).not.toContain(TASK);
        expectSecurityHeaders(answer);
      }
    }
  });

  it("refuses a request from another origin with 403, and accepts its own origin", async () => {
    const host = `127.0.0.1:${server.port}`;
    for (const origin of [
      "http://attacker.example",
      `http://attacker.example:${server.port}`,
      `http://localhost:${server.port}`,
      "null",
      `https://127.0.0.1:${server.port + 1}`,
    ]) {
      for (const path of PATHS) {
        const answer = await get(server.port, path, { host, origin });
        expect(answer.status, `${origin} ${path}`).toBe(403);
        expect(answer.body).toMatch(/^forbidden: requests from origin/);
        expect(answer.body).not.toContain(TASK);
        expectSecurityHeaders(answer);
      }
    }
    const own = await get(server.port, "/api/state", { host, origin: `http://${host}` });
    expect(own.status).toBe(200);
    expect(own.body).toContain(TASK);
    expect((await get(server.port, "/api/stream", { host, origin: `http://${host}` })).status).toBe(200);
  });

  it("answers an operator-given host name, and refuses a malformed one at start", async () => {
    const subjects = createSubjects(randomRoot());
    await using named = await startInspectServer({ bus, subjects, port: 0, allowedHosts: ["Inspect.Example", "proxy.example:8443"] });
    for (const host of ["inspect.example", `inspect.example:${named.port}`, "proxy.example:8443"]) {
      expect((await get(named.port, "/api/state", { host })).status, host).toBe(200);
    }
    for (const host of ["other.example", "proxy.example", `proxy.example:${named.port}`])
      expect((await get(named.port, "/api/state", { host })).status, host).toBe(421);
    expect((await get(named.port, "/api/state", { host: "inspect.example", origin: "https://inspect.example" })).status).toBe(200);
    for (const bad of [
      "http://inspect.example",
      "*.example",
      "inspect.example/path",
      "user@inspect.example",
      "inspect.example:99999",
      "",
    ]) {
      await expect(startInspectServer({ bus, subjects, port: 0, allowedHosts: [bad] }), bad).rejects.toThrow(`allowed host '${bad}'`);
    }
  });
});
