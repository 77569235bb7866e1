/**
 * The inspector's commands as a user runs them (`node dist/runtime/cli.js`): `dirigent machines export --out DIR`
 * writes one chart per machine, and `dirigent inspect --stately` starts the Stately bridge and relays the cluster's
 * inspection messages, read from a real nats-server, to a WebSocket client of the bridge.
 */
import { connect } from "@nats-io/transport-node";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import type { InspectMessage } from "../../protocol/inspect.js";
import { exportFiles } from "../../runtime/cli/machines.js";
import { machines } from "../../runtime/charts/registry.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";

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

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "dirigent-inspect-cli-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("dirigent machines export --out DIR", () => {
  it("writes one Mermaid chart per machine, and with --format json one graph per machine", async () => {
    const out = join(dir, "charts");
    const mermaid = startCli(["machines", "export", "--out", out]);
    expect(await mermaid.exited, mermaid.output()).toBe(0);
    const expected = exportFiles("mermaid");
    expect(readdirSync(out).sort()).toEqual(machines.map((m) => `${m.name}.mmd`).sort());
    for (const [file, text] of Object.entries(expected)) expect(readFileSync(join(out, file), "utf8"), file).toBe(text);

    const jsonOut = join(dir, "json");
    const json = startCli(["machines", "export", "--format", "json", "--out", jsonOut]);
    expect(await json.exited, json.output()).toBe(0);
    expect(readdirSync(jsonOut).sort()).toEqual(machines.map((m) => `${m.name}.json`).sort());
    expect(JSON.parse(readFileSync(join(jsonOut, "task.json"), "utf8"))).toMatchObject({ id: "task" });
  });
});

describe("dirigent inspect --host, --allowed-host", () => {
  let nats: TestNatsServer;
  beforeAll(async () => {
    nats = await startTestNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  const status = (url: string, host: string) =>
    new Promise<number>((resolve, reject) => {
      const { port } = new URL(url);
      request({ host: "127.0.0.1", port, path: "/api/state", headers: { host } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on("error", reject)
        .end();
    });

  it("refuses a malformed allowed host or listening address with a usage error", async () => {
    for (const [flag, value, text] of [
      ["--allowed-host", "http://inspect.example", "--allowed-host: allowed host 'http://inspect.example': expected NAME or NAME:PORT"],
      ["--allowed-host", "*.example", "not a valid host name"],
      ["--host", "example.com", "--host 'example.com': expected an IP address"],
      ["--stately-host", "nowhere", "--stately-host 'nowhere': expected an IP address"],
    ] as const) {
      const cli = startCli(["inspect", "--port", "0", flag, value, "--nats", nats.url]);
      expect(await cli.exited, cli.output()).toBe(2);
      expect(cli.output()).toContain(text);
    }
  });

  it("warns loudly when listening beyond loopback, and answers only the allowed host names", async () => {
    const root = randomRoot();
    const cli = startCli([
      "inspect",
      "--port",
      "0",
      "--host",
      "0.0.0.0",
      "--allowed-host",
      "inspect.example",
      "--stately",
      "--stately-port",
      "0",
      "--stately-host",
      "0.0.0.0",
      "--nats",
      nats.url,
      "--prefix",
      root,
    ]);
    try {
      const [, pageUrl = ""] = await cli.waitFor(/inspector on (http:\/\/\S+)/);
      const [, bridgeUrl = ""] = await cli.waitFor(/Stately bridge on (http:\/\/\S+)/);
      await cli.waitFor(/WARNING: the Stately bridge listens on 0\.0\.0\.0/);
      expect(cli.output()).toMatch(
        /WARNING: the inspector listens on 0\.0\.0\.0, not on loopback: anyone who can reach this address sees every task's content; it answers only requests for that address, and for inspect\.example/,
      );
      for (const url of [pageUrl, bridgeUrl]) {
        const port = new URL(url).port;
        expect(await status(url, "inspect.example"), url).toBe(pageUrl === url ? 200 : 404);
        expect(await status(url, `localhost:${port}`), url).toBe(pageUrl === url ? 200 : 404);
        expect(await status(url, `attacker.example:${port}`), url).toBe(421);
      }
    } finally {
      await cli.stop();
    }
  });
});

describe("dirigent inspect --stately", () => {
  let nats: TestNatsServer;
  beforeAll(async () => {
    nats = await startTestNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it("starts the bridge and relays an actor published on NATS to the bridge's WebSocket clients", async () => {
    const root = randomRoot();
    const statelyPort = await freePort();
    const inspector = startCli([
      "inspect",
      "--port",
      "0",
      "--stately",
      "--stately-port",
      String(statelyPort),
      "--nats",
      nats.url,
      "--prefix",
      root,
    ]);
    const nc = await connect({ servers: nats.url, name: "inspect-cli-test" });
    try {
      const [, pageUrl] = (await inspector.waitFor(/Stately bridge on (http:\/\/\S+)/)) as unknown as [string, string];
      expect(await (await fetch(pageUrl)).text()).toContain("Stately Inspector");
      const actorId = "test:1/1/x:0";
      const message: InspectMessage = {
        type: "inspect.actor",
        process: "test:1",
        role: "director",
        taskId: "t-cli",
        actorId,
        rootId: actorId,
        at: Date.now(),
        machine: "task",
        isMachine: true,
        snapshot: { status: "active", value: "queued" },
      };
      nc.publish(createSubjects(root).inspect("director", "actor"), JSON.stringify(message));
      await nc.flush();
      const client = new WebSocket(`ws://127.0.0.1:${statelyPort}`);
      try {
        const actor = await new Promise<Record<string, unknown>>((resolve, reject) => {
          client.on("error", reject);
          client.on("message", (data) => {
            const event = JSON.parse(data.toString()) as Record<string, unknown>;
            if (event["type"] === "@xstate.actor" && event["sessionId"] === actorId) resolve(event);
          });
        });
        expect(actor).toMatchObject({ name: "task" });
        expect(String(actor["definition"])).toContain('"id":"task"');
      } finally {
        client.close();
      }
    } finally {
      await nc.close();
      await inspector.stop();
    }
  });
});
