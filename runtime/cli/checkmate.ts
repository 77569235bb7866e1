/**
 * `dirigent checkmate "TASK"`: a checkmate judge loop (a worker's output judged against acceptance criteria until it
 * passes) as a `<task type="judge_loop">`, submitted and watched like `dirigent run` (an embedded runtime when none is
 * reachable). Prints `[checkmate: iteration n/max]` and each verdict as they happen, then the output (PASS) or the
 * best attempt with the final judge report.
 * `--resume ID` re-attaches to task ID, or submits it again under the same id: the runtime replays its finished
 * worker and judge calls from the Handler's records, and the answers already given.
 * `--interactive` makes the loop's human gates ask (criteria approval, go/cancel/edit, continue/redirect/stop): each
 * question is printed and its answer read from stdin, one line each (a terminal or a pipe); `--gate-timeout`: how
 * long a gate waits before its default.
 */
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import { parseTaskId, type TaskEvent, type TaskId, type TaskOutcome } from "../../protocol/index.js";
import { DirigentClient, newTaskId, RemoteError } from "../client.js";
import { commonOptions, setup, UsageError, type CommonFlags } from "./common.js";
import { mapProgressText } from "./output.js";
import { placeClient } from "../nats/connect.js";
import { embeddedRuntime } from "./embedded-runtime.js";
import { messageOf } from "../../protocol/errors.js";

interface CheckmateFlags extends CommonFlags {
  maxIter?: string;
  criteria?: string;
  workerTimeout?: string;
  judgeTimeout?: string;
  resume?: string;
  taskId?: string;
  json?: boolean;
  interactive?: boolean;
  gateTimeout?: string;
}

/** Settings of a judge_loop template. */
export interface CheckmateOptions {
  maxIterations?: number;
  hasCriteria?: boolean;
  workerTimeoutS?: number;
  judgeTimeoutS?: number;
  interactive?: boolean;
  gateTimeoutS?: number;
}

/**
 * The judge_loop template `dirigent checkmate` submits. The task and criteria travel as the inputs
 * `checkmate_task` and `checkmate_criteria`, so their text is never parsed as XML nor scanned for `{{…}}`.
 */
export function checkmateXml(options: CheckmateOptions): string {
  const attrs = [
    ...(options.workerTimeoutS === undefined ? [] : [`worker_timeout="${options.workerTimeoutS}"`]),
    ...(options.judgeTimeoutS === undefined ? [] : [`judge_timeout="${options.judgeTimeoutS}"`]),
    ...(options.interactive ? ['interactive="true"'] : []),
    ...(options.gateTimeoutS === undefined ? [] : [`gate_timeout="${options.gateTimeoutS}"`]),
  ];
  return [
    `<task type="judge_loop"${attrs.map((a) => ` ${a}`).join("")}>`,
    "  <description>{{checkmate_task}}</description>",
    ...(options.hasCriteria ? ["  <criteria>{{checkmate_criteria}}</criteria>"] : []),
    ...(options.maxIterations === undefined ? [] : [`  <max_iterations>${options.maxIterations}</max_iterations>`]),
    "</task>",
  ].join("\n");
}

function positive(flag: string, value: string | undefined, integer: boolean): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
    throw new UsageError(`${flag} '${value}': must be a positive ${integer ? "integer" : "number"}`);
  return n;
}

/** The line printed for an event of the loop, or undefined. */
export function checkmateLine(event: TaskEvent): string | undefined {
  if (event.type.startsWith("checkmate.") && event.type !== "checkmate.intake") return event.message ?? event.type;
  if (event.type === "checkmate.intake") return event.message;
  if (event.type === "continuation.input") return `? ${event.message ?? ""}\n  (answer here, or with: dirigent input ${event.taskId} "…")`;
  // A map in the worker's template: how far it is (`map 5/8 done`), not each branch's start.
  if (event.type === "branch.finished") return mapProgressText(event);
  return undefined;
}

/** The result block: the output, or the best attempt and the final judge report. */
export function formatCheckmate(outcome: TaskOutcome): string {
  const notes = outcome.notes;
  const lines: string[] = [];
  if (outcome.status === "COMPLETE") {
    lines.push(`checkmate: PASS after ${String(notes["iterations_completed"] ?? "?")} iteration(s)`, "", outcome.content);
  } else if (notes["termination_reason"] === "max_iterations_reached" || notes["termination_reason"] === "user_stopped") {
    const how = notes["termination_reason"] === "user_stopped" ? "stopped" : "exhausted";
    lines.push(`checkmate: ${how} — ${outcome.error?.message ?? ""}`);
    lines.push("", `best attempt (iteration ${String(notes["best_iteration"] ?? "none")}):`, outcome.content);
    lines.push("", "final judge report:", JSON.stringify(notes["final_verdict"] ?? null, null, 2));
  } else {
    const e = outcome.error;
    lines.push(
      `checkmate: ${outcome.status}`,
      ...(e ? [`error: ${e.type}${e.type === "TASK_FAILURE" ? ` (${e.reason})` : ""}: ${e.message}`] : []),
    );
  }
  return lines.join("\n");
}

/**
 * Answers the task's questions from stdin, one line each (`--interactive`, or any terminal): lines typed or piped
 * ahead are kept for the next question. At the end of stdin nothing more is answered (the gates take their defaults).
 */
function stdinAnswers(client: DirigentClient, taskId: TaskId) {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  let asking = Promise.resolve();
  return {
    ask() {
      asking = asking.then(async () => {
        process.stderr.write("> ");
        const line = await lines.next();
        if (line.done === true) return;
        await client.input(taskId, line.value).catch((err: unknown) => {
          process.stderr.write(`dirigent: could not send the answer: ${messageOf(err)}\n`);
        });
      });
    },
    close: () => rl.close(),
  };
}

/** Re-attaches to a task: its result when it has one, else its events until it ends. */
async function attach(client: DirigentClient, taskId: TaskId, onEvent: (e: TaskEvent) => void): Promise<TaskOutcome | undefined> {
  const watch = client.watch(taskId, onEvent);
  try {
    const status = await client.get(taskId).catch((err: unknown) => {
      if (err instanceof RemoteError && err.code !== "NO_RESPONDERS") return undefined;
      throw err;
    });
    if (!status) return undefined;
    return status.result ?? (await watch.result);
  } finally {
    await watch.close();
  }
}

/** Registers `dirigent checkmate`. */
export function registerCheckmateCommand(program: Command): void {
  commonOptions(
    program
      .command("checkmate")
      .description(
        "run a checkmate loop: intake → worker → judge until PASS or max iterations (runs an embedded runtime when none is reachable)",
      )
      .argument("[task]", "the task, in words")
      .option("--max-iter <n>", "most iterations (default 5)")
      .option("--criteria <file>", "acceptance criteria (skips the intake)")
      .option("--worker-timeout <s>", "longest a worker call may take, in seconds")
      .option("--judge-timeout <s>", "longest a judge call may take, in seconds")
      .option("--resume <id>", "re-attach to task ID, or submit TASK again under that id (finished calls are replayed)")
      .option(
        "--interactive",
        "human gates: approve the criteria, go/cancel/edit before the first worker, continue/redirect/stop after a FAIL (answers read from stdin)",
      )
      .option("--gate-timeout <s>", "how long a gate waits for an answer before its default (go, continue), in seconds")
      .option("--task-id <id>", "choose the task id")
      .option("--json", "print only the result, as JSON"),
  ).action(async (task: string | undefined, flags: CheckmateFlags) => {
    const chosen = flags.resume ?? flags.taskId;
    const taskId = chosen === undefined ? newTaskId() : parseTaskId(chosen);
    if (taskId === undefined) throw new UsageError(`task id '${chosen ?? ""}': must be 1–64 characters of [A-Za-z0-9_-]`);
    if ((task === undefined || task.trim() === "") && flags.resume === undefined)
      throw new UsageError('give the task: dirigent checkmate "TASK" (or --resume ID)');
    const criteria =
      flags.criteria === undefined
        ? undefined
        : await readFile(flags.criteria, "utf8").catch(() => {
            throw new UsageError(`--criteria: cannot read ${flags.criteria ?? ""}`);
          });
    const options: CheckmateOptions = {
      ...(positive("--max-iter", flags.maxIter, true) === undefined ? {} : { maxIterations: Number(flags.maxIter) }),
      ...(criteria !== undefined && criteria.trim() !== "" ? { hasCriteria: true } : {}),
      ...(positive("--worker-timeout", flags.workerTimeout, false) === undefined ? {} : { workerTimeoutS: Number(flags.workerTimeout) }),
      ...(positive("--judge-timeout", flags.judgeTimeout, false) === undefined ? {} : { judgeTimeoutS: Number(flags.judgeTimeout) }),
      ...(flags.interactive ? { interactive: true } : {}),
      ...(positive("--gate-timeout", flags.gateTimeout, false) === undefined ? {} : { gateTimeoutS: Number(flags.gateTimeout) }),
    };
    const { config, subjects, log } = setup(flags, "dirigent-checkmate");
    const placement = await placeClient(config, subjects, log, "dirigent-checkmate");
    const embedded = embeddedRuntime(config, placement, log);
    let answers: ReturnType<typeof stdinAnswers> | undefined;
    try {
      if (placement.transport.kind === "memory") await embedded.start();
      const client = new DirigentClient(placement.transport.bus, subjects);
      if (!flags.json) process.stderr.write(`dirigent: checkmate task ${taskId} (resume with --resume ${taskId})\n`);
      const onEvent = (e: TaskEvent) => {
        const line = flags.json ? undefined : checkmateLine(e);
        if (line !== undefined) process.stdout.write(`${line}\n`);
        if (e.type === "continuation.input" && (flags.interactive === true || process.stdin.isTTY)) {
          answers ??= stdinAnswers(client, taskId);
          answers.ask();
        }
      };
      const submit = () => {
        if (task === undefined || task.trim() === "")
          throw new UsageError(`no task ${taskId} to resume: give the task too, to submit it under that id`);
        const inputs = { checkmate_task: task, ...(options.hasCriteria ? { checkmate_criteria: criteria } : {}) };
        return client.run({ xml: checkmateXml(options), inputs, taskId }, onEvent);
      };
      const run = async () => (flags.resume === undefined ? undefined : await attach(client, taskId, onEvent)) ?? (await submit());
      let outcome: TaskOutcome;
      try {
        outcome = await run();
      } catch (err) {
        if (!(err instanceof RemoteError && err.code === "NO_RESPONDERS") || embedded.started) throw err;
        await embedded.start();
        outcome = await run();
      }
      process.stdout.write((flags.json ? JSON.stringify(outcome, null, 2) : formatCheckmate(outcome)) + "\n");
      process.exitCode = outcome.status === "COMPLETE" ? 0 : 1;
    } finally {
      answers?.close();
      await embedded.close();
    }
  });
}
