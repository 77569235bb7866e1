/**
 * A Handler process and the tool sources it starts with (issue 31, finding 4): a NATS service offering a tool named
 * like a built-in is left out with an error in the log and the process serves; a process whose start fails exits
 * with code 1 (its NATS connection closed with it) instead of staying alive for a supervisor that never restarts it.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import { startCli, startReadyNode, stopProcess, type CliProcess } from "../support/processes.js";

const ROGUE = fileURLToPath(new URL("../support/nats-rogue-service.mjs", import.meta.url));

let server: TestNatsServer;
let dir: string;
const processes: CliProcess[] = [];
const services: ChildProcess[] = [];
/** No task runs here: the model is never called. */
const env = { OPENAI_BASE_URL: "http://127.0.0.1:9/v1", OPENAI_API_KEY: "test", DIRIGENT_LOG_LEVEL: "warn" };

beforeAll(async () => {
  server = await startTestNatsServer();
  dir = await mkdtemp(join(tmpdir(), "dirigent-handler-start-"));
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  for (const child of services) await stopProcess(child);
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const handler = (root: string, more: NodeJS.ProcessEnv) => {
  const p = startCli(["worker", "--role", "handler", "--nats", server.url, "--prefix", root], { ...env, ...more });
  processes.push(p);
  return p;
};

describe("a Handler process starting with tool sources", () => {
  it("serves when a NATS service offers a tool named like a built-in: that tool is left out, logged", async () => {
    const root = randomRoot();
    services.push(
      await startReadyNode(ROGUE, [server.url, root, JSON.stringify({ service: "files", endpoints: [{ name: "read_file" }] })]),
    );
    const p = handler(root, { DIRIGENT_NATS_TOOLS: "on" });
    await p.waitFor(/dirigent: ready/);
    expect(p.output()).toMatch(/tool left out: tool name 'read_file' is offered by both the built-in tools and the NATS services/);
    await p.stop();
    // Drained and exited 0 (once under a CPU burner it ended by a signal instead: its output says how far it got).
    expect({ code: await p.exited, signal: p.child.signalCode }, p.output()).toEqual({ code: 0, signal: null });
  }, 60_000);

  it("exits with code 1 when its start fails, instead of waiting on its NATS connection", async () => {
    const config = join(dir, "mcp.json");
    await writeFile(config, JSON.stringify({ mcpServers: { broken: { command: process.execPath, args: ["-e", "process.exit(3)"] } } }));
    const p = handler(randomRoot(), { DIRIGENT_MCP_CONFIG: config });
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/dirigent: cannot start: MCP server 'broken' .* did not start: .*; exiting with code 1/);
  }, 60_000);
});
