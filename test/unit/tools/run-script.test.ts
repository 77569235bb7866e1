import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runScript as run, scriptEnvironment, type ScriptLimits, type ScriptOutcome } from "../../../runtime/tools/run-script.js";
import { createSandbox, type Sandbox } from "../../../runtime/tools/sandbox.js";
import { openWorkspace, type Workspace } from "../../../runtime/tools/workspace.js";

let dir: string;
let ws: Workspace;
let sandbox: Sandbox;
let unsandboxed: Sandbox;
/** Runs in the bubblewrap sandbox (the default of every Handler). */
const runScript = (w: Workspace, l: ScriptLimits, args: Parameters<typeof run>[2], signal: AbortSignal): Promise<ScriptOutcome> =>
  run(w, l, args, signal, sandbox);
const limits: ScriptLimits = { scriptTimeoutMs: 10_000, scriptKillGraceMs: 200, scriptOutputMaxBytes: 1000, scriptEnv: ["PATH"] };
const never = new AbortController().signal;

/** Alive and not a zombie: a killed orphan stays a zombie until its new parent reaps it. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true;
  }
}

/** Polls with a deadline: the kernel reaps an orphan asynchronously, there is no event to await. */
async function gone(pid: number, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/** Host pids whose command line is `command` (argv joined by spaces), not zombies. */
function pidsOf(command: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim() === command && alive(Number(name)))
        found.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Polls until no process runs `command`: the kernel tears a PID namespace down asynchronously. */
async function noneLeft(command: string, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (pidsOf(command).length > 0) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

async function waitForFile(path: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`${path} did not appear`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dirigent-script-"));
  ws = await openWorkspace(dir);
  sandbox = await createSandbox({ mode: "bwrap", network: false, readOnly: [], hidden: [] });
  unsandboxed = await createSandbox({ mode: "unsandboxed", network: false, readOnly: [], hidden: [] });
  expect(sandbox.unavailable).toBeUndefined();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("run_script", () => {
  it("runs an argv array without a shell, in the workspace", async () => {
    const out = await runScript(ws, limits, { argv: ["sh", "-c", "pwd; echo $0", "a b; echo injected"] }, never);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.split("\n")).toEqual([ws.root, "a b; echo injected", ""]);
    const literal = await runScript(ws, limits, { argv: ["echo", "$(id)", ";", "ls"] }, never);
    expect(literal.stdout).toBe("$(id) ; ls\n");
  });

  it("refuses a cwd outside the workspace", async () => {
    await expect(runScript(ws, limits, { argv: ["true"], cwd: ".." }, never)).rejects.toThrow(/outside the workspace/);
  });

  it("kills a sandboxed script that ignores SIGTERM, with everything it started, at the timeout", async () => {
    const script = 'trap "" TERM; sleep 7101 & wait; wait';
    const out = await runScript(ws, { ...limits, scriptTimeoutMs: 300 }, { argv: ["sh", "-c", script] }, never);
    expect(out.timedOut).toBe(true);
    expect(out.exitCode).toBeNull();
    expect(await noneLeft("sleep 7101")).toBe(true);
    expect(out.pid !== undefined && (await gone(out.pid))).toBe(true);
  });

  it("kills the sandbox when cancelled", async () => {
    const controller = new AbortController();
    const running = runScript(ws, limits, { argv: ["sh", "-c", "sleep 7102 & echo started > cancel.flag; wait"] }, controller.signal);
    await waitForFile(join(dir, "cancel.flag"));
    controller.abort();
    const out = await running;
    expect(out.signal).toBe("SIGTERM");
    expect(await noneLeft("sleep 7102")).toBe(true);
  });

  it("leaves no process behind that left the process group (setsid), and ends on its own timeout", async () => {
    const out = await runScript(ws, { ...limits, scriptTimeoutMs: 2000 }, { argv: ["sh", "-c", "setsid -f sleep 7103; sleep 60"] }, never);
    expect(out.timedOut).toBe(true);
    expect(await noneLeft("sleep 7103")).toBe(true);
  });

  it("unsandboxed, still ends on its own timeout when an escaped process holds the pipes, and kills the group", async () => {
    const out = await run(
      ws,
      { ...limits, scriptTimeoutMs: 1000 },
      { argv: ["sh", "-c", 'trap "" TERM; setsid -f sleep 7104; sleep 1000 & echo $!; wait; wait'] },
      never,
      unsandboxed,
    );
    try {
      expect(out.timedOut).toBe(true);
      expect(out.signal).toBe("SIGKILL");
      expect(await gone(Number(out.stdout.trim()))).toBe(true);
      // The escaped process is out of reach without a sandbox: only the Handler stopped waiting for it.
      expect(pidsOf("sleep 7104").length).toBeGreaterThan(0);
    } finally {
      for (const pid of pidsOf("sleep 7104")) process.kill(pid, "SIGKILL");
    }
  });

  it("caps stdout and stderr with a note", async () => {
    const out = await runScript(
      ws,
      { ...limits, scriptOutputMaxBytes: 10 },
      { argv: ["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x; echo err-err-err-err >&2"] },
      never,
    );
    expect(out.stdout).toBe(`${"x".repeat(10)}\n[truncated: 4990 more bytes dropped]`);
    expect(out.stderr).toBe("err-err-er\n[truncated: 6 more bytes dropped]");
  });

  it("passes only allowlisted variables, never the API key", async () => {
    const previous = process.env["OPENAI_API_KEY"];
    process.env["OPENAI_API_KEY"] = "sk-must-not-leak";
    process.env["DIRIGENT_TEST_VISIBLE"] = "visible-value";
    process.env["DIRIGENT_TEST_HIDDEN"] = "hidden-value";
    try {
      const allow = ["PATH", "DIRIGENT_TEST_VISIBLE", "OPENAI_API_KEY"];
      const out = await runScript(ws, { ...limits, scriptEnv: allow }, { argv: ["env"] }, never);
      expect(out.stdout).toContain("DIRIGENT_TEST_VISIBLE=visible-value");
      expect(out.stdout).not.toContain("hidden-value");
      expect(out.stdout).not.toContain("sk-must-not-leak");
      expect(Object.keys(scriptEnvironment(allow, process.env)).sort()).toEqual(["DIRIGENT_TEST_VISIBLE", "PATH"]);
    } finally {
      if (previous === undefined) delete process.env["OPENAI_API_KEY"];
      else process.env["OPENAI_API_KEY"] = previous;
      delete process.env["DIRIGENT_TEST_VISIBLE"];
      delete process.env["DIRIGENT_TEST_HIDDEN"];
    }
  });

  it("reports a program that does not exist", async () => {
    await expect(runScript(ws, limits, { argv: ["/nonexistent/program"] }, never)).rejects.toThrow(/cannot run '\/nonexistent\/program'/);
  });
});
