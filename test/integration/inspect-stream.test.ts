/**
 * The inspector's change stream and a client that stops reading (issue 31, finding 6): a real TCP socket asks for
 * `/api/stream` and stops reading while the cluster keeps changing. The server does not buffer for it without bound:
 * once more than its cap waits unsent, the client is dropped, told to `onClientDropped`, and the server goes on
 * serving the others.
 */
import { connect, type Socket } from "node:net";
import { setImmediate as tick } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, encode, TaskEvent } from "../../protocol/index.js";
import { startInspectServer } from "../../runtime/inspect/server.js";
import { openMemoryTransport } from "../../runtime/transport.js";

const CAP = 256 * 1024;
/** Far more than the kernel's socket buffers on both sides hold: without a cap, the rest waits in the server. */
const MOST_PUBLISHED = 96 * 1024 * 1024;

/** Opens `/api/stream` on a raw socket; resolves once the server has answered its headers. */
async function openStream(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    let head = "";
    const onData = (chunk: Buffer) => {
      head += chunk.toString();
      if (!head.includes(": connected")) return;
      socket.off("data", onData);
      resolve();
    };
    socket.on("data", onData);
    socket.write(`GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n\r\n`);
  });
  return socket;
}

describe("the inspector's change stream", () => {
  it("drops a client that stops reading once more than its cap waits for it, and serves the others", async () => {
    const transport = openMemoryTransport(silentLogger);
    const subjects = createSubjects("stream");
    const dropped: string[] = [];
    await using server = await startInspectServer({
      bus: transport.bus,
      subjects,
      port: 0,
      pushIntervalMs: 5,
      maxStreamBufferBytes: CAP,
      onClientDropped: (reason) => dropped.push(reason),
    });
    try {
      const stalled = await openStream(server.port);
      const closed = new Promise<void>((resolve) => stalled.once("close", () => resolve()));
      // Reads nothing from now on: what the server sends piles up in the kernel's buffers, then in the server.
      stalled.pause();
      const message = "x".repeat(4096);
      let published = 0;
      for (let seq = 1; dropped.length === 0 && published < MOST_PUBLISHED; seq++) {
        const event = TaskEvent.parse({
          taskId: `t${seq % 500}`,
          seq,
          type: "model.turn",
          state: "running",
          at: new Date().toISOString(),
          message,
        });
        transport.bus.publish(subjects.taskEvents(event.taskId), encode(TaskEvent, event));
        published += message.length;
        // Lets the server's pushes run between the events.
        if (seq % 64 === 0) await tick();
      }
      expect(dropped).toEqual([
        expect.stringMatching(/^inspector: dropped the change stream of 127\.0\.0\.1:\d+: it left (\d+) bytes unread, more than 262144;/),
      ]);
      const unread = Number(/left (\d+) bytes/.exec(dropped[0] ?? "")?.[1]);
      // Bounded: the cap and at most one push of changes beyond it.
      expect(unread).toBeLessThan(CAP + 2 * 1024 * 1024);
      stalled.resume();
      await closed;
      // The server goes on: another client gets the stream.
      const next = await openStream(server.port);
      next.destroy();
      expect((await fetch(new URL("/api/state", server.url))).status).toBe(200);
    } finally {
      await transport.close();
    }
  }, 60_000);
});
