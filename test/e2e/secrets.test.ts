/**
 * Secrets out of reach of the programs a Handler runs: a `dirigent worker --role handler` process started with an
 * API key, a NATS password in its environment and the same password in a file, against a real nats-server with
 * per-role users, runs a submitted `script` task that reads every `/proc/<pid>/environ` and `cmdline` it can see,
 * the password file and the data directory. None of the secrets comes back, and none is in the worker's log.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { loadConfig } from "../../runtime/config.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { natsUser } from "../../runtime/nats/conf/permissions.js";
import { startSystem, type SystemHandle } from "../../runtime/system.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { newTaskId } from "../support/stack.js";
import { accountsConfig, natsSetup, rootUsers } from "../support/permissions-stack.js";

const root = randomRoot();
const subjects = createSubjects(root);
const users = rootUsers(root);
const { passwords } = users;
const API_KEY = `sk-test-${randomBytes(16).toString("hex")}`;
const dir = mkdtempSync(join(tmpdir(), "dirigent-secrets-"));
const workspace = join(dir, "workspace");
const passwordFile = join(dir, "handler.pass");
const dataDir = join(dir, "data");

let server: TestNatsServer;
let mock: MockLlmServer;
let worker: CliProcess;
const transports: OpenTransport[] = [];
const systems: SystemHandle[] = [];

beforeAll(async () => {
  for (const path of [workspace, dataDir]) mkdirSync(path);
  writeFileSync(passwordFile, `${passwords.handler}\n`, { mode: 0o600 });
  writeFileSync(join(dataDir, "state"), `data ${passwords.handler}\n`);
  server = await startTestNatsServer({ config: accountsConfig([users]) });
  await natsSetup(server.url, root, users.as("admin"));
  mock = await startMockLlm({ port: 0, script: { rules: [], default: { reply: "unused" } } });
  const config = { ...loadConfig({}, {}), prefix: root, openaiBaseUrl: mock.url, openaiApiKey: "other-key", commands: ["sh"] };
  for (const role of ["memory", "evaluator", "director"] as const) {
    const transport = await openNatsTransport(server.url, subjects, {
      name: `secrets-${role}`,
      log: silentLogger,
      auth: { user: natsUser(root, role), pass: passwords[role] },
      roles: [role],
    });
    transports.push(transport);
    systems.push(await startSystem({ config, transport, roles: [role] }));
  }
  worker = startCli(["worker", "--role", "handler", "--nats", server.url, "--prefix", root], {
    NATS_USER: natsUser(root, "handler"),
    NATS_PASSWORD: passwords.handler,
    NATS_PASSWORD_FILE: passwordFile,
    OPENAI_API_KEY: API_KEY,
    OPENAI_BASE_URL: mock.url,
    DIRIGENT_COMMANDS: "sh",
    DIRIGENT_WORKSPACE_ROOT: workspace,
    DIRIGENT_DATA_DIR: dataDir,
    DIRIGENT_SCRIPT_ENV: "PATH,HOME,OPENAI_API_KEY,NATS_PASSWORD",
    DIRIGENT_LOG_LEVEL: "debug",
  });
  await worker.waitFor(/ready/);
});

afterAll(async () => {
  await worker?.stop();
  for (const system of systems.reverse()) await system.stop();
  for (const transport of transports) await transport.close();
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const xmlText = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

describe("a script task in a Handler started with secrets", () => {
  it("sees none of them: not in any /proc it can read, not in the password file, not in the data directory", async () => {
    const client = await openNatsTransport(server.url, subjects, {
      name: "secrets-submitter",
      log: silentLogger,
      auth: { user: natsUser(root, "submitter"), pass: passwords.submitter },
      roles: [],
    });
    transports.push(client);
    const snoop = [
      "echo SCRIPT-RAN",
      "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done",
      "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done",
      "env",
      `cat ${passwordFile}`,
      `cat ${dataDir}/state`,
      "cat /proc/$PPID/environ /proc/1/environ",
    ].join("; ");
    const xml = `<task type="script" fail_on_nonzero="false"><command>sh -c "${xmlText(snoop)}"</command><timeout>20</timeout></task>`;
    const outcome = await new DirigentClient(client.bus, subjects).run({ taskId: newTaskId(), xml });
    expect(outcome.status).toBe("COMPLETE");
    const seen = JSON.stringify(outcome);
    // It ran, and read what it could: its own environment, from the allowlist minus the secrets.
    expect(outcome.content).toContain("SCRIPT-RAN");
    expect(outcome.content).toContain("PATH=");
    expect(seen).not.toContain(API_KEY);
    expect(seen).not.toContain(passwords.handler);
    expect(seen).not.toContain("OPENAI_API_KEY=");
    expect(seen).not.toContain("NATS_PASSWORD=");
    expect(worker.output()).not.toContain(API_KEY);
    expect(worker.output()).not.toContain(passwords.handler);
  });
});
