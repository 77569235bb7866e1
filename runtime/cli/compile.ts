/** `dirigent compile "TEXT"`: a request in words → a validated task template through the model (and `--run` it). */
import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { MAX_COMPILE_ATTEMPTS, parseTaskId, type CompileReply, type TaskEvent } from "../../protocol/index.js";
import { DirigentClient, newTaskId, RemoteError } from "../client.js";
import { collect, commonOptions, parseInputs, readTemplate, setup, UsageError, type CommonFlags } from "./common.js";
import { placeClient } from "../nats/connect.js";
import { embeddedModel } from "../model/embedded.js";
import { formatEvent, formatOutcome } from "./output.js";
import { ROLES, startSystem, type Role, type SystemHandle } from "../system.js";

interface CompileFlags extends CommonFlags {
  out?: string;
  run?: boolean;
  maxAttempts?: string;
  input?: string[];
  taskId?: string;
  json?: boolean;
  quiet?: boolean;
}

function attemptsFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_COMPILE_ATTEMPTS)
    throw new UsageError(`--max-attempts '${value}': must be an integer from 1 to ${MAX_COMPILE_ATTEMPTS}`);
  return n;
}

/** Invalid requests are usage errors (exit 2); a model that never wrote a valid template is a failure (exit 1). */
function rethrow(err: unknown): never {
  if (err instanceof RemoteError && (err.code === "INVALID_MESSAGE" || err.code === "INVALID_ID"))
    throw new UsageError(`${err.code}: ${err.message}`);
  if (err instanceof RemoteError) throw new Error(`${err.code}: ${err.message}`, { cause: err });
  throw err;
}

/**
 * Runs `fn` with a client of the runtime at `--nats`, or of an embedded runtime of `roles` when none is reachable
 * or none answers (the same rule as `dirigent run`).
 */
async function withRuntime<T>(
  flags: CommonFlags,
  name: string,
  roles: readonly Role[],
  fn: (client: DirigentClient, timeoutMs: number) => Promise<T>,
): Promise<T> {
  const { config, subjects, log } = setup(flags, name);
  const placement = await placeClient(config, subjects, log, name);
  let system: SystemHandle | undefined;
  let stopModel: (() => Promise<void>) | undefined;
  const startEmbedded = async () => {
    const model = await embeddedModel(config);
    stopModel = model.stop;
    if (model.note) process.stderr.write(`dirigent: ${model.note}\n`);
    process.stderr.write(`dirigent: no runtime reachable; running an embedded one on ${placement.note}\n`);
    system = await startSystem({ config: model.config, transport: placement.transport, log, roles, metrics: false });
  };
  try {
    if (placement.transport.kind === "memory") await startEmbedded();
    const client = new DirigentClient(placement.transport.bus, subjects);
    try {
      return await fn(client, config.taskTimeoutMs);
    } catch (err) {
      if (!(err instanceof RemoteError && err.code === "NO_RESPONDERS") || system) throw err;
      await startEmbedded();
      return await fn(client, config.taskTimeoutMs);
    }
  } finally {
    await system?.stop();
    await placement.close();
    await stopModel?.();
  }
}

/** Registers `dirigent compile`. */
export function registerCompileCommand(program: Command): void {
  commonOptions(
    program
      .command("compile")
      .description("turn a request in words into a validated task template through the model; --run also runs it")
      .argument("<text>", "what the task should do, in words")
      .option("-o, --out <file>", "write the template to FILE instead of printing it")
      .option("--max-attempts <n>", `model answers to try, each told the errors of the one before (1–${MAX_COMPILE_ATTEMPTS}, default 3)`)
      .option("--run", "then run the template like 'dirigent run': print its events and its result")
      .option("-i, --input <key=value>", "with --run: bind a template input (repeatable)", collect, [])
      .option("--task-id <id>", "with --run: choose the task id")
      .option("--json", "print the compile reply as JSON; with --run, only the task's result as JSON")
      .option("-q, --quiet", "with --run: do not print events"),
  ).action(async (text: string, flags: CompileFlags) => {
    const maxAttempts = attemptsFlag(flags.maxAttempts);
    const inputs = parseInputs(flags.input ?? []);
    const taskId = flags.taskId === undefined ? undefined : parseTaskId(flags.taskId);
    if (flags.taskId !== undefined && taskId === undefined)
      throw new UsageError(`--task-id '${flags.taskId}': must be 1–64 characters of [A-Za-z0-9_-]`);
    if (text.trim() === "") throw new UsageError("the request text is empty");
    // Compiling alone needs only the Compiler, which runs with the Handler role.
    const roles: readonly Role[] = flags.run ? ROLES : ["handler"];
    await withRuntime(flags, "dirigent-compile", roles, async (client, timeoutMs) => {
      const inputNames = Object.keys(inputs);
      const reply: CompileReply = await client.compile(
        { prompt: text, ...(maxAttempts ? { maxAttempts } : {}), ...(inputNames.length > 0 ? { inputNames } : {}) },
        { timeoutMs },
      );
      if (reply.attempts > 1)
        process.stderr.write(`dirigent: valid after ${reply.attempts} attempts; fixed: ${(reply.errors ?? []).join("; ")}\n`);
      if (flags.out !== undefined) {
        await writeFile(flags.out, reply.xml.endsWith("\n") ? reply.xml : `${reply.xml}\n`);
        process.stderr.write(`dirigent: wrote ${flags.out}\n`);
      } else if (!flags.json) process.stdout.write(`${reply.xml}\n`);
      if (!flags.run) {
        if (flags.json) process.stdout.write(`${JSON.stringify(reply, null, 2)}\n`);
        return;
      }
      const onEvent = flags.json || flags.quiet ? undefined : (e: TaskEvent) => process.stdout.write(formatEvent(e) + "\n");
      const outcome = await client.run({ xml: reply.xml, inputs, taskId: taskId ?? newTaskId() }, onEvent);
      process.stdout.write((flags.json ? JSON.stringify(outcome, null, 2) : formatOutcome(outcome)) + "\n");
      process.exitCode = outcome.status === "COMPLETE" ? 0 : 1;
    }).catch(rethrow);
  });
}

/** What `dirigent run` and `submit` send: a template FILE, or `--prompt TEXT` for the runtime to compile. */
export async function taskSource(file: string | undefined, prompt: string | undefined): Promise<{ xml: string } | { prompt: string }> {
  if (prompt !== undefined && file !== undefined) throw new UsageError("give a template FILE or --prompt TEXT, not both");
  if (prompt !== undefined) {
    if (prompt.trim() === "") throw new UsageError("--prompt: the text is empty");
    return { prompt };
  }
  if (file === undefined) throw new UsageError("missing the template FILE (or give --prompt TEXT)");
  return { xml: await readTemplate(file) };
}
