/**
 * Liveness with every role in its own process: `dirigent health` lists them and exits 0, and exits 1 naming a role
 * whose process was killed; a Handler dropped by the server as a slow consumer (its event loop stopped, the server's
 * write deadline exceeded) reconnects and serves again; processes the server cuts off for good (a changed password,
 * the server gone past the reconnect budget) exit 1 with the reason on stderr, and `dirigent health` shows them gone;
 * SIGTERM ends a process whose server is gone.
 */
import { writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, decode, PingReply } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { openNatsTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";

const ROLES = ["memory", "handler", "evaluator", "director"] as const;
const root = randomRoot();
const subjects = createSubjects(root);
/** Workers log in as `worker`; the test and `dirigent health` as `op`, whose password never changes. */
const serverConfig = (workerPassword: string) =>
  [
    // Short, so that a process whose event loop stops is dropped as a slow consumer within a second.
    'write_deadline: "500ms"',
    'jetstream { store_dir: ".dirigent/jetstream" }',
    `authorization { users = [ { user: worker, password: "${workerPassword}" }, { user: op, password: "op-pass" } ] }`,
  ].join("\n") + "\n";

let server: TestNatsServer;
let mock: MockLlmServer;
let op: NatsConnection;
const workers = new Map<string, CliProcess>();
const others: CliProcess[] = [];

const workerEnv = () => ({
  NATS_USER: "worker",
  NATS_PASSWORD: "worker-1",
  OPENAI_BASE_URL: mock.url,
  OPENAI_API_KEY: "test",
  DIRIGENT_MODEL_MAX_RETRIES: "0",
  DIRIGENT_LOG_LEVEL: "warn",
});

function startWorker(role: string): CliProcess {
  const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], workerEnv());
  workers.set(role, p);
  return p;
}

/** Runs `dirigent health` as `op`; resolves with its exit code and output. */
async function health(...args: string[]): Promise<{ code: number | null; output: string }> {
  const p = startCli(["health", "--nats", server.url, "--prefix", root, "--nats-user", "op", ...args], { NATS_PASSWORD: "op-pass" });
  others.push(p);
  const code = await p.exited;
  return { code, output: p.output() };
}

/** Pings until a process with `pid` answers (it reconnected), or gives up after `timeoutMs`. */
async function untilAnswers(pid: number, timeoutMs: number): Promise<PingReply> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answers = await op.requestMany(subjects.ping, "", { strategy: "timer", maxWait: 500 });
    for await (const m of answers) {
      const reply = decode(PingReply, m.data);
      if (reply.ok && reply.value.pid === pid) return reply.value;
    }
  }
  throw new Error(`process ${pid} never answered a ping`);
}

beforeAll(async () => {
  server = await startTestNatsServer({ config: serverConfig("worker-1") });
  mock = await startMockLlm({ port: 0, script: { rules: [], default: { reply: "alive" } } });
  op = await connect({ servers: server.url, user: "op", pass: "op-pass", maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  for (const role of ROLES) await startWorker(role).waitFor(/ready/);
});

afterAll(async () => {
  await Promise.all([...workers.values(), ...others].map((p) => p.stop()));
  await op?.close();
  await mock?.close();
  await server?.stop();
});

describe("dirigent health", () => {
  it("exits 0 and lists each role's process when all are up", async () => {
    const { code, output } = await health();
    expect(code, output).toBe(0);
    for (const role of ROLES) {
      const pid = workers.get(role)?.child.pid;
      expect(output).toMatch(new RegExp(`^${role}\\s+\\S+:${pid}:\\S+\\s+\\S+\\s+${pid}\\s`, "m"));
    }
    expect(output).toMatch(/^ok: director, evaluator, handler, memory answer \(4 processes\)$/m);
    const json = await health("--json", "--timeout", "500");
    expect(json.code).toBe(0);
    const report = JSON.parse(json.output) as { ok: boolean; processes: PingReply[] };
    expect(report.ok).toBe(true);
    expect(
      report.processes
        .map((p) => p.roles)
        .flat()
        .sort(),
    ).toEqual([...ROLES].sort());
    // One machine's processes only: all four here, none on another host.
    expect((await health("--host", hostname(), "--timeout", "500")).code).toBe(0);
    const elsewhere = await health("--host", "no-such-host", "--roles", "handler", "--timeout", "500");
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.output).toMatch(/no process answered\nmissing: handler/);
  });

  it("refuses a bad flag with exit 2", async () => {
    const { code, output } = await health("--roles", "director,conductor");
    expect(code).toBe(2);
    expect(output).toMatch(/'conductor' is not a role/);
  });
});

describe("a Handler dropped as a slow consumer", () => {
  it("reconnects with its subscriptions and serves again", async () => {
    const handler = workers.get("handler");
    const pid = handler?.child.pid;
    if (handler === undefined || pid === undefined) throw new Error("no handler process");
    const dropped = () => /:dirigent-handler" - Slow Consumer Detected/.test(server.stderr());
    handler.child.kill("SIGSTOP");
    try {
      // Cancel broadcasts of no task reach every Handler: with its event loop stopped, the socket fills up and the
      // server's writes to it block past the write deadline.
      const body = JSON.stringify({ type: "task.cancel", taskId: "nobody", pad: "x".repeat(400_000) });
      for (let round = 0; round < 40 && !dropped(); round++) {
        for (let i = 0; i < 10; i++) op.publish(subjects.cancelBroadcast, body);
        await op.flush();
      }
      expect(dropped(), "the server never dropped the Handler as a slow consumer").toBe(true);
    } finally {
      handler.child.kill("SIGCONT");
    }
    expect((await untilAnswers(pid, 20_000)).roles).toEqual(["handler"]);
    const client = await openNatsTransport(server.url, subjects, {
      name: "health-submitter",
      log: silentLogger,
      auth: { user: "op", pass: "op-pass" },
      roles: [],
    });
    try {
      const outcome = await new DirigentClient(client.bus, subjects).run({ xml: "<task><description>Still serving?</description></task>" });
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "alive" });
    } finally {
      await client.close();
    }
    expect(handler.child.exitCode).toBeNull();
  });
});

describe("a killed process", () => {
  it("is missing from dirigent health, which exits 1 naming its role; --roles without it exits 0", async () => {
    const memory = workers.get("memory");
    memory?.child.kill("SIGKILL");
    await memory?.exited;
    const { code, output } = await health();
    expect(code).toBe(1);
    expect(output).toMatch(/^missing: memory \(no process of this role answered\)$/m);
    expect(output).not.toMatch(/^memory\s/m);
    expect((await health("--roles", "director,handler,evaluator")).code).toBe(0);
    await startWorker("memory").waitFor(/ready/);
    expect((await health()).code).toBe(0);
  });
});

describe("processes the server cuts off", () => {
  it("exit 1 naming the authorization violation when the server comes back with another password, and are gone from health", async () => {
    await writeFile(join(server.dir, "nats.conf"), serverConfig("worker-2"));
    await server.restart();
    const exits = await Promise.all([...workers.values()].map((p) => p.exited));
    expect(exits).toEqual([1, 1, 1, 1]);
    for (const p of workers.values()) {
      expect(p.output()).toMatch(/dirigent: fatal: the connection to NATS closed: .*authorization violation.*; exiting with code 1/i);
    }
    const { code, output } = await health();
    expect(code).toBe(1);
    expect(output).toMatch(/no process answered\nmissing: director, evaluator, handler, memory/);
  });
});

describe("a server gone for good", () => {
  it("ends a process with a reconnect budget (exit 1, with the reason), and SIGTERM ends one that reconnects forever", async () => {
    await using gone = await startTestNatsServer();
    const env = { OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "test", DIRIGENT_DRAIN_GRACE_MS: "1000" };
    const budget = startCli(["worker", "--role", "memory", "--nats", gone.url, "--prefix", root], {
      ...env,
      DIRIGENT_NATS_MAX_RECONNECTS: "2",
    });
    const forever = startCli(["worker", "--role", "memory", "--nats", gone.url, "--prefix", root], env);
    others.push(budget, forever);
    await Promise.all([budget.waitFor(/ready/), forever.waitFor(/ready/)]);
    await gone.stop();
    expect(await budget.exited).toBe(1);
    expect(budget.output()).toMatch(/dirigent: fatal: the connection to NATS closed: .+; exiting with code 1/);
    // Still reconnecting: its drain cannot reach the server, the grace period ends it.
    expect(forever.child.exitCode).toBeNull();
    forever.child.kill("SIGTERM");
    expect(await forever.exited).toBe(0);
    expect(forever.output()).toMatch(/SIGTERM: draining[\s\S]*(grace period over|drained)/);
  });
});
