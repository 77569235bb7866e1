/**
 * `dirigent inspect --stately`: messages go through @statelyai/inspect's `createInspector` to the bridge's own
 * WebSocket server, which listens on 127.0.0.1, answers only its own host names, accepts upgrades only from the
 * Stately inspector's origin and loopback pages (or clients that send no Origin), and never relays what a viewer sends.
 */
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import type { InspectMessage } from "../../protocol/inspect.js";
import { startStatelyBridge } from "../../runtime/inspect/stately.js";

/** The `ws` client @statelyai/inspect itself uses (no types are installed for it). */
interface WsClient {
  on(event: "message", listener: (data: { toString(): string }) => void): void;
  on(event: "error", listener: (err: Error) => void): void;
  once(event: "open" | "pong" | "close", listener: () => void): void;
  send(data: string): void;
  ping(): void;
  close(): void;
}
const WebSocket = createRequire(import.meta.url)("ws") as new (url: string, options?: { origin?: string }) => WsClient;

const base = { process: "h:1", role: "director" as const, taskId: "t-1", rootId: "h:1/1/x:0", at: Date.now() };
const actorMessage: InspectMessage = {
  type: "inspect.actor",
  ...base,
  actorId: "h:1/1/x:0",
  machine: "task",
  isMachine: true,
  snapshot: { status: "active", value: "queued", context: { taskId: "t-1" } },
};

/** A raw WebSocket upgrade request: resolves with the answer's status (101 when accepted) and body. */
function upgrade(port: number, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path: "/",
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": randomBytes(16).toString("base64"),
        ...headers,
      },
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: "" });
    });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Opens a viewer; resolves once connected, with every frame it receives collected. */
async function viewer(
  url: string,
  origin?: string,
): Promise<{ client: WsClient; received: string[]; next: (test: (frame: string) => boolean) => Promise<string> }> {
  const client = new WebSocket(url, origin ? { origin } : {});
  const received: string[] = [];
  const waiting = new Set<() => void>();
  client.on("message", (data) => {
    received.push(data.toString());
    for (const w of waiting) w();
  });
  await new Promise<void>((resolve, reject) => {
    client.on("error", reject);
    client.once("open", resolve);
  });
  const next = (test: (frame: string) => boolean) =>
    new Promise<string>((resolve) => {
      const check = () => {
        const found = received.find(test);
        if (found === undefined) return;
        waiting.delete(check);
        resolve(found);
      };
      waiting.add(check);
      check();
    });
  return { client, received, next };
}

describe("Stately bridge", () => {
  it("forwards actors with their machine definition, events and snapshots to the bridge's viewers", async () => {
    const bridge = await startStatelyBridge({ port: 0 });
    const messages: InspectMessage[] = [
      actorMessage,
      { type: "inspect.event", ...base, actorId: "h:1/1/x:0", event: { type: "task.start" } },
      {
        type: "inspect.snapshot",
        ...base,
        actorId: "h:1/1/x:0",
        machine: "task",
        isMachine: true,
        eventType: "task.start",
        snapshot: { status: "active", value: { running: "executing" } },
      },
    ];
    for (const m of messages) bridge.forward(m);
    const page = await fetch(bridge.pageUrl);
    expect(await page.text()).toContain("Stately Inspector");
    expect(page.headers.get("content-security-policy")).toContain("frame-src https://stately.ai;");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self';");
    expect(await (await fetch(new URL("/bridge.js", bridge.pageUrl))).text()).toContain("postMessage(data, target)");
    const { client, received, next } = await viewer(`ws://127.0.0.1:${bridge.address.port}`);
    try {
      await next((f) => f.includes('"@xstate.snapshot"'));
    } finally {
      client.close();
      await bridge.stop();
    }
    const events = received.map((f) => JSON.parse(f) as Record<string, unknown>);
    const actor = events.find((e) => e["type"] === "@xstate.actor");
    expect(actor).toMatchObject({ name: "task", sessionId: "h:1/1/x:0" });
    expect(String(actor?.["definition"])).toContain('"id":"task"');
    expect(events.find((e) => e["type"] === "@xstate.event")).toMatchObject({ event: { type: "task.start" }, sessionId: "h:1/1/x:0" });
    expect(events.find((e) => e["type"] === "@xstate.snapshot")).toMatchObject({
      snapshot: { value: { running: "executing" } },
      event: { type: "task.start" },
    });
  });

  it("listens on 127.0.0.1 only, unless told otherwise", async () => {
    const bridge = await startStatelyBridge({ port: 0 });
    try {
      expect(bridge.address.address).toBe("127.0.0.1");
      expect(bridge.pageUrl).toBe(`http://127.0.0.1:${bridge.address.port}/`);
    } finally {
      await bridge.stop();
    }
  });

  it("refuses WebSocket upgrades and pages from another origin or for another host, and accepts Stately's and loopback origins", async () => {
    const bridge = await startStatelyBridge({ port: 0 });
    const port = bridge.address.port;
    const host = `127.0.0.1:${port}`;
    try {
      bridge.forward(actorMessage);
      for (const origin of [
        "https://attacker.example",
        "http://stately.ai",
        "https://stately.ai.attacker.example",
        "null",
        `http://attacker.example:${port}`,
      ]) {
        const answer = await upgrade(port, { host, origin });
        expect(answer.status, origin).toBe(403);
        expect(answer.body).toMatch(/^forbidden: requests from origin/);
        expect(answer.body).not.toContain("h:1/1/x:0");
      }
      for (const other of [`attacker.example:${port}`, "attacker.example"]) {
        expect((await upgrade(port, { host: other })).status, other).toBe(421);
        expect((await upgrade(port, { host: other, origin: "https://stately.ai" })).status, other).toBe(421);
      }
      const page = await new Promise<number>((resolve, reject) =>
        request({ host: "127.0.0.1", port, path: "/", headers: { host: `attacker.example:${port}` } }, (res) =>
          resolve(res.statusCode ?? 0),
        )
          .on("error", reject)
          .end(),
      );
      expect(page).toBe(421);
      for (const origin of ["https://stately.ai", "http://localhost:5173", `http://127.0.0.1:${port}`, "http://[::1]:3000"]) {
        expect((await upgrade(port, { host, origin })).status, origin).toBe(101);
      }
      expect((await upgrade(port, { host: `localhost:${port}` })).status).toBe(101);
      // A browser always sends Origin on an upgrade; a ws client of the Stately origin receives the events.
      const { client, next } = await viewer(`ws://127.0.0.1:${port}`, "https://stately.ai");
      await next((f) => f.includes('"@xstate.actor"'));
      client.close();
    } finally {
      await bridge.stop();
    }
  });

  it("does not relay what a viewer sends to the other viewers, nor keep it for later ones", async () => {
    const bridge = await startStatelyBridge({ port: 0 });
    const url = `ws://127.0.0.1:${bridge.address.port}`;
    const sender = await viewer(url, "https://stately.ai");
    const watcher = await viewer(url, "http://localhost:8080");
    try {
      const forged = JSON.stringify({ type: "@xstate.snapshot", sessionId: "forged-by-a-viewer", snapshot: { value: "pwned" } });
      sender.client.send(forged);
      // The bridge answers a ping after it has read every frame sent before it.
      await new Promise<void>((resolve) => {
        sender.client.once("pong", resolve);
        sender.client.ping();
      });
      bridge.forward(actorMessage);
      await watcher.next((f) => f.includes('"@xstate.actor"'));
      await sender.next((f) => f.includes('"@xstate.actor"'));
      const late = await viewer(url);
      await late.next((f) => f.includes('"@xstate.actor"'));
      for (const v of [sender, watcher, late]) {
        expect(v.received.length).toBe(1);
        expect(v.received.join("\n")).not.toContain("forged-by-a-viewer");
      }
      late.client.close();
    } finally {
      sender.client.close();
      watcher.client.close();
      await bridge.stop();
    }
  });
});
