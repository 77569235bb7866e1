/**
 * The sandbox and the command allowlist end to end (NATS → Director → Evaluator → Handler): a script task whose
 * program escapes its process group fails on its own timeout and leaves nothing running; a template naming a
 * program the allowlist lacks fails before anything runs, naming the program and the setting; a FIFO in the
 * workspace is refused at once and the Handler keeps serving.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { noneRunning, pidsRunning } from "../support/process-group.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let workspace: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-sandbox-it-"));
  await writeFile(join(workspace, "notes.md"), "NOTES-CONTENT\n");
  execFileSync("mkfifo", [join(workspace, "pipe")]);
  const readPipe = { name: "read_file", arguments: { path: "pipe" } };
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // More reads of the FIFO in one turn than libuv has threads, then an ordinary file.
        { match: { lastUser: "READ-PIPE", turn: 1 }, toolCalls: Array.from({ length: 6 }, () => readPipe) },
        { match: { lastUser: "READ-PIPE", turn: 2 }, toolCalls: [{ name: "read_file", arguments: { path: "notes.md" } }] },
        { match: { lastUser: "READ-PIPE", hasToolResult: "NOTES-CONTENT" }, reply: "read the notes" },
      ],
      default: { reply: "plain answer" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  await rm(workspace, { recursive: true, force: true });
});

const stack = (config: Record<string, unknown> = {}) =>
  startStack({ url: server.url, mock, config: { workspaceRoot: workspace, reparse: false, ...config } });

describe("the sandbox of script tasks", () => {
  it("fails a script task on its own timeout when a process it started left the group, and leaves none running", async () => {
    await using s = await stack({ commands: ["sh"] });
    const xml = `<task type="script"><command>sh -c "setsid -f sleep 77; sleep 60"</command><timeout>2</timeout></task>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "execution_timeout", message: "script timed out after 2 s" });
    await noneRunning("sleep 77");
    expect(pidsRunning("sleep 77")).toEqual([]);
  });
});

describe("the command allowlist", () => {
  it("fails a task whose command names a program the allowlist lacks, before anything runs", async () => {
    await using s = await stack({ commands: ["python3"], tools: ["read_file", "list_files", "run_script"] });
    const xml = `<task type="sequential"><steps>
      <task><description>first step</description></task>
      <task type="script"><command>touch made-by-script</command></task>
    </steps></task>`;
    const before = mock.requests.length;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      reason: "input_validation_failure",
      message:
        "script task <command>: program 'touch' is not allowed for template commands (DIRIGENT_COMMANDS=python3; add it there to allow it)",
    });
    // Not even the first step ran, and run_script for the model does not open template commands.
    expect(mock.requests.length).toBe(before);
    expect(existsSync(join(workspace, "made-by-script"))).toBe(false);
  });

  it("keeps template commands off by default", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: `<task type="script"><command>sh -c "echo hi"</command></task>`, taskId: newTaskId() });
    expect(outcome.error?.message).toMatch(/template commands are off: program 'sh' may not run \(set DIRIGENT_COMMANDS/);
  });
});

describe("files", () => {
  it("refuses a FIFO at once, however often it is read, and the Handler keeps serving", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: "<task><description>READ-PIPE</description></task>", taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "read the notes" });
    const request = mock.requests.filter((r) => JSON.stringify(r.body).includes("READ-PIPE")).at(1);
    const answers = (request?.body.messages ?? []).filter((m) => m["role"] === "tool").map((m) => String(m["content"]));
    expect(answers).toEqual(
      Array.from({ length: 6 }, () => "error: 'pipe' is not a regular file but a FIFO: read_file reads regular files only"),
    );
    expect(await s.client.run({ xml: "<task><description>another task</description></task>", taskId: newTaskId() })).toMatchObject({
      status: "COMPLETE",
      content: "plain answer",
    });
  });
});
