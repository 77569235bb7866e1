/** `dirigent inspect --stately`: messages go through @statelyai/inspect's WebSocket inspector and its bridge server. */
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import type { InspectMessage } from "../../protocol/inspect.js";
import { startStatelyBridge } from "../../runtime/inspect-stately.js";

/** The `ws` client @statelyai/inspect itself uses (no types are installed for it). */
interface WsClient {
  on(event: "message", listener: (data: { toString(): string }) => void): void;
  on(event: "error", listener: (err: Error) => void): void;
  close(): void;
}
const WebSocket = createRequire(import.meta.url)("ws") as new (url: string) => WsClient;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

describe("Stately bridge", () => {
  it("forwards actors with their machine definition, events and snapshots to Stately's bridge server", async () => {
    const port = await freePort();
    const bridge = startStatelyBridge({ port });
    const base = { process: "h:1", role: "director" as const, taskId: "t-1", rootId: "h:1/1/x:0", at: Date.now() };
    const messages: InspectMessage[] = [
      { type: "inspect.actor", ...base, actorId: "h:1/1/x:0", machine: "task", isMachine: true, snapshot: { status: "active", value: "queued", context: { taskId: "t-1" } } },
      { type: "inspect.event", ...base, actorId: "h:1/1/x:0", event: { type: "task.start" } },
      { type: "inspect.snapshot", ...base, actorId: "h:1/1/x:0", machine: "task", isMachine: true, eventType: "task.start", snapshot: { status: "active", value: { running: "executing" } } },
    ];
    for (const m of messages) bridge.forward(m);
    const page = await (await fetch(bridge.pageUrl)).text();
    expect(page).toContain("Stately Inspector");
    const received: Array<Record<string, unknown>> = [];
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    try {
      await new Promise<void>((resolve, reject) => {
        client.on("error", reject);
        client.on("message", (data) => {
          received.push(JSON.parse(data.toString()) as Record<string, unknown>);
          if (received.some((e) => e["type"] === "@xstate.snapshot")) resolve();
        });
      });
    } finally {
      client.close();
      bridge.stop();
    }
    const actor = received.find((e) => e["type"] === "@xstate.actor");
    expect(actor).toMatchObject({ name: "task", sessionId: "h:1/1/x:0" });
    expect(String(actor?.["definition"])).toContain('"id":"task"');
    expect(received.find((e) => e["type"] === "@xstate.event")).toMatchObject({ event: { type: "task.start" }, sessionId: "h:1/1/x:0" });
    expect(received.find((e) => e["type"] === "@xstate.snapshot")).toMatchObject({ snapshot: { value: { running: "executing" } }, event: { type: "task.start" } });
  });
});
