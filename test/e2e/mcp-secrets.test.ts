/**
 * A stdio MCP server gets none of its Handler's secrets (issue 31, finding 5): a real server process
 * (test/support/mcp-environ-server.mjs) reads its parent's `/proc/<ppid>/environ`, as any program of the same user
 * can, under a `dirigent worker --role handler` started with an API key and a NATS password in its environment, and
 * under `dirigent tools list`; it finds neither, nor the token its own configuration got through `${VAR}`. What its
 * tool description quotes is masked where `dirigent tools list --json` prints it.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

const SERVER = fileURLToPath(new URL("../support/mcp-environ-server.mjs", import.meta.url));
const API_KEY = `sk-test-${randomBytes(12).toString("hex")}`;
const NATS_PASSWORD = `pw-${randomBytes(12).toString("hex")}`;
const TOKEN = `tok-${randomBytes(12).toString("hex")}`;
const dir = mkdtempSync(join(tmpdir(), "dirigent-mcp-secrets-"));

let server: TestNatsServer;
const processes: CliProcess[] = [];

/** An MCP configuration whose server writes what it read of its parent's environment to `out`. */
function mcpConfig(out: string): string {
  const file = join(dir, `mcp-${randomBytes(4).toString("hex")}.json`);
  const env = { ENVIRON_OUT: out, LEAK_TOKEN: "${SEARCH_TOKEN}" };
  writeFileSync(file, JSON.stringify({ mcpServers: { environ: { command: process.execPath, args: [SERVER], env } } }));
  return file;
}

/** What a process of the same user reads of `pid`'s initial environment. */
const environOf = (pid: number | undefined) => readFileSync(`/proc/${pid}/environ`, "utf8");

beforeAll(async () => {
  server = await startTestNatsServer({
    config: `jetstream { store_dir: ".dirigent/jetstream" }\nauthorization { users: [{ user: "handler", password: "${NATS_PASSWORD}" }] }`,
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a stdio MCP server and its Handler's secrets", () => {
  it("finds neither the API key, the NATS password nor its own token in its Handler process's environment", async () => {
    const out = join(dir, "handler-environ");
    const worker = startCli(["worker", "--role", "handler", "--nats", server.url, "--prefix", randomRoot()], {
      NATS_USER: "handler",
      NATS_PASSWORD,
      OPENAI_API_KEY: API_KEY,
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      SEARCH_TOKEN: TOKEN,
      DIRIGENT_MCP_CONFIG: mcpConfig(out),
    });
    processes.push(worker);
    await worker.waitFor(/dirigent: ready/, 30_000);
    const read = readFileSync(out, "utf8");
    // It did read its parent's environment: the secrets' names are there, blanked; their values are not.
    expect(read).toMatch(/(^|\0)PATH=/);
    expect(read).toMatch(/(^|\0)OPENAI_API_KEY=\0/);
    for (const secret of [API_KEY, NATS_PASSWORD, TOKEN]) {
      expect(read).not.toContain(secret);
      expect(environOf(worker.child.pid)).not.toContain(secret);
    }
    expect(worker.output()).not.toMatch(/secrets may be readable/);
  }, 60_000);

  it("finds none under `dirigent tools list`, whose JSON masks what the server's description quotes", async () => {
    const out = join(dir, "list-environ");
    const list = startCli(["tools", "list", "--json", "--mcp-config", mcpConfig(out)], {
      OPENAI_API_KEY: API_KEY,
      NATS_PASSWORD,
      SEARCH_TOKEN: TOKEN,
    });
    processes.push(list);
    expect(await list.exited).toBe(0);
    const read = readFileSync(out, "utf8");
    expect(read).toMatch(/(^|\0)PATH=/);
    for (const secret of [API_KEY, NATS_PASSWORD, TOKEN]) expect(read).not.toContain(secret);
    const { tools } = JSON.parse(list.stdout()) as { tools: Array<{ name: string; description: string }> };
    const peek = tools.find((t) => t.name === "environ__peek");
    expect(peek?.description).toMatch(/^Token \[redacted\]; my parent's environment: /);
    expect(list.stdout()).not.toContain(TOKEN);
  }, 60_000);
});
