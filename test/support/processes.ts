/** Running `dirigent` as child processes in tests, waiting on their output rather than on time. */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The built CLI (`npm test` builds before testing). */
export const CLI = fileURLToPath(new URL("../../dist/runtime/cli.js", import.meta.url));

/** A `dirigent` child process. */
export interface CliProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** What was written to stdout alone (a `--json` answer, without the log lines on stderr). */
  stdout(): string;
  /** Resolves once the output matches `pattern`; rejects on exit or after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  /** SIGTERM, then waits for exit. */
  stop(): Promise<void>;
}

/** Starts `node dist/runtime/cli.js ...args`; `stdin: "pipe"` to write to it (`child.stdin`), else it reads nothing. */
export function startCli(args: string[], env: NodeJS.ProcessEnv = {}, options: { stdin?: "pipe" } = {}): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env },
    stdio: [options.stdin ?? "ignore", "pipe", "pipe"],
  });
  let text = "";
  let out = "";
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const l of listeners) l();
  };
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString();
    onData(chunk);
  });
  child.stderr?.on("data", onData);
  const exited = new Promise<number | null>((resolve) =>
    child.on("exit", (code) => {
      for (const l of listeners) l();
      resolve(code);
    }),
  );
  let done = false;
  void exited.then(() => (done = true));
  return {
    child,
    output: () => text,
    stdout: () => out,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = text.match(pattern);
          if (m) return finish(() => resolve(m));
          if (done || child.exitCode !== null)
            return finish(() => reject(new Error(`process exited (${child.exitCode}) before ${pattern}:\n${text}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for ${pattern}:\n${text}`))), timeoutMs);
        const finish = (f: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          f();
        };
        listeners.add(check);
        check();
      });
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * Starts `node script ...args` (a test's NATS service, an MCP server) and resolves once it prints "ready"; rejects with
 * its output when it exits first. Stop it with {@link stopProcess}.
 */
export async function startReadyNode(script: string, args: readonly string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("ready")) resolve();
    });
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("exit", (code) => reject(new Error(`${script} exited (${code}): ${output}`)));
  });
  return child;
}

/** Kills a child with SIGKILL and waits for its exit (at once when it has exited). */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}

/** `dirigent mock-llm` on a free port with the rules of `scriptFile`: the process and its OpenAI-compatible URL. */
export async function startMockLlmCli(scriptFile: string): Promise<{ process: CliProcess; url: string }> {
  const process = startCli(["mock-llm", "--port", "0", "--script", scriptFile, "--quiet"]);
  const [url = ""] = await process.waitFor(/http:\/\/127\.0\.0\.1:\d+\/v1/);
  return { process, url };
}

/** `dirigent inspect` on a free port for the runtime under `root`: the process and the page's URL. */
export async function startInspectorCli(natsUrl: string, root: string): Promise<{ process: CliProcess; pageUrl: string }> {
  const process = startCli(["inspect", "--port", "0", "--nats", natsUrl, "--prefix", root]);
  const [, pageUrl = ""] = await process.waitFor(/inspector on (http:\/\/127\.0\.0\.1:\d+\/)/);
  return { process, pageUrl };
}
