/**
 * `dirigent run | submit | status | cancel | input | show | rerun`: the public task API from the command line. `show` prints
 * what each node of a task did, from its records: the tree with state, duration, tokens and cost per node, or one
 * node's conversation message by message with its tool calls.
 */
import type { Command } from "commander";
import { createInterface } from "node:readline/promises";
import { decode, parseTaskId, TaskEvent, TaskState, type SubmitReply, type Subjects, type TaskId } from "../../protocol/index.js";
import { DirigentClient, newTaskId, RemoteError } from "../client.js";
import { collect, commonOptions, parseInputs, readTemplate, setup, UsageError, type CommonFlags } from "./common.js";
import { budgetFields, type BudgetFlags } from "./budget.js";
import { taskSource } from "./compile.js";
import { placeClient } from "../nats/connect.js";
import { natsAuth } from "../nats/auth.js";
import { embeddedRuntime } from "./embedded-runtime.js";
import { counted, createEventPrinter, formatNode, formatOutcome, formatTree } from "./output.js";
import { connectNats, NatsBus } from "../nats/bus.js";
import type { NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_NATS_URL } from "../nats/connect.js";
import { listStoredTasks, readStoredTask, type ListedTask } from "../inspect/replay.js";
import { messageOf } from "../../protocol/errors.js";

interface RunFlags extends CommonFlags, BudgetFlags {
  prompt?: string;
  input?: string[];
  taskId?: string;
  json?: boolean;
  quiet?: boolean;
}

function taskIdFlag(value: string | undefined): TaskId | undefined {
  if (value === undefined) return undefined;
  const taskId = parseTaskId(value);
  if (taskId === undefined) throw new UsageError(`--task-id '${value}': must be 1–64 characters of [A-Za-z0-9_-]`);
  return taskId;
}

interface ListFlags extends CommonFlags {
  state?: string;
  since?: string;
  limit: string;
  json?: boolean;
}

function stateFlag(value: string): TaskState {
  const parsed = TaskState.safeParse(value);
  if (!parsed.success) throw new UsageError(`--state '${value}': one of ${TaskState.options.join(", ")}`);
  return parsed.data;
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--since`: an ISO-8601 time, or a duration before `now` (`15m`); milliseconds since the epoch. */
export function sinceFlag(value: string, now: number): number {
  const ago = /^(\d+)([smhd])$/.exec(value);
  if (ago) return now - Number(ago[1]) * (UNIT_MS[ago[2] ?? "s"] ?? 1000);
  const at = Date.parse(value);
  if (Number.isNaN(at)) throw new UsageError(`--since '${value}': an ISO-8601 time or a duration such as 30s, 15m, 2h, 1d`);
  return at;
}

/** The tasks as a table: id, state, time of the last event, the last event. */
function formatTaskList(tasks: readonly ListedTask[]): string {
  if (tasks.length === 0) return "no tasks\n";
  const width = Math.max(7, ...tasks.map((t) => t.taskId.length));
  const rows = tasks.map(
    (t) =>
      `${t.taskId.padEnd(width)}  ${t.state.padEnd(19)}  ${t.at.padEnd(24)}  ${t.type}${t.message ? `  ${t.message.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?")}` : ""}`,
  );
  return [`${"TASK ID".padEnd(width)}  ${"STATE".padEnd(19)}  ${"LAST EVENT AT".padEnd(24)}  LAST EVENT`, ...rows].join("\n") + "\n";
}

function checkedId(value: string): TaskId {
  const taskId = parseTaskId(value);
  if (taskId === undefined) throw new UsageError(`task id '${value}': must be 1–64 characters of [A-Za-z0-9_-]`);
  return taskId;
}

/** Turns an error answer into the right exit: invalid input is a usage error. */
function rethrow(err: unknown): never {
  if (
    err instanceof RemoteError &&
    (err.code === "INVALID_TEMPLATE" || err.code === "INVALID_MESSAGE" || err.code === "INVALID_ID" || err.code === "PAYLOAD_TOO_LARGE")
  ) {
    throw new UsageError(`${err.code}: ${err.message}`);
  }
  if (err instanceof RemoteError && err.code === "NO_RESPONDERS") {
    throw new Error(`${err.message} (start one with 'dirigent up')`);
  }
  throw err;
}

/** Registers the task commands. */
export function registerTaskCommands(program: Command): void {
  registerRunCommand(program);
  registerSubmitCommand(program);
  registerListCommand(program);
  registerStatusCommand(program);
  registerInputCommand(program);
  registerCancelCommand(program);
  registerShowCommand(program);
  registerRerunCommand(program);
}

/** `dirigent run`: submits a task, prints its events as they happen and its result; runs an embedded runtime when none is reachable. */
function registerRunCommand(program: Command): void {
  commonOptions(
    program
      .command("run")
      .description("submit a task, print its events as they happen, then its result (runs an embedded runtime when none is reachable)")
      .argument("[file]", "task template (XML); or give --prompt")
      .option("--prompt <text>", "the task in words instead of a file: the runtime compiles it into a template first")
      .option("-i, --input <key=value>", "bind a template input (repeatable)", collect, [])
      .option("--task-id <id>", "choose the task id (idempotent submission)")
      .option("--json", "one JSON object per line: every event as it happens, then the result")
      .option("-q, --quiet", "do not print events")
      .option("--max-tokens <n>", "token budget of the task, its subtasks included")
      .option("--max-cost <usd>", "cost budget of the task (needs a price table, DIRIGENT_MODEL_PRICES)")
      .option("--stream", "stream the answer: print it as it arrives"),
  ).action(runTask);
}

/** Runs a task (`dirigent run`); with no runtime reachable, an embedded one. */
async function runTask(file: string | undefined, flags: RunFlags): Promise<void> {
  const source = { ...(await taskSource(file, flags.prompt)), ...budgetFields(flags) };
  const inputs = parseInputs(flags.input ?? []);
  const taskId = taskIdFlag(flags.taskId) ?? newTaskId();
  const { config, subjects, log } = setup(flags, "dirigent-run");
  const placement = await placeClient(config, subjects, log, "dirigent-run");
  const embedded = embeddedRuntime(config, placement, log);
  try {
    if (placement.transport.kind === "memory") await embedded.start();
    const client = new DirigentClient(placement.transport.bus, subjects);
    const { printer, onEvent, onSubmitted } = runOutput(flags, client, taskId);
    let outcome;
    try {
      outcome = await client.run({ ...source, inputs, taskId }, onEvent, { onSubmitted });
    } catch (err) {
      if (!(err instanceof RemoteError && err.code === "NO_RESPONDERS") || embedded.started) rethrow(err);
      await embedded.start();
      outcome = await client.run({ ...source, inputs, taskId }, onEvent, { onSubmitted });
    }
    printer.end();
    process.stdout.write((flags.json ? JSON.stringify(outcome) : formatOutcome(outcome, { streamed: printer.streamed() })) + "\n");
    process.exitCode = outcome.status === "COMPLETE" ? 0 : 1;
  } finally {
    await embedded.close();
  }
}

/** What `dirigent run` prints of a task: its id once submitted, its events (or none, or JSON lines), and asks its questions on a terminal. */
function runOutput(flags: RunFlags, client: DirigentClient, taskId: TaskId) {
  const printer = createEventPrinter((text) => process.stdout.write(text));
  // --json: every event as a JSON line as it happens, then the result as the last line.
  const print = flags.json
    ? (e: TaskEvent) => process.stdout.write(JSON.stringify(e) + "\n")
    : flags.quiet
      ? undefined
      : (e: TaskEvent) => printer.event(e);
  // On a terminal, a question of the task (request_user_input) is asked here and the answer sent back.
  const onEvent = (e: TaskEvent) => {
    print?.(e);
    if (e.type === "continuation.input" && process.stdin.isTTY) void askUser(client, taskId, e.message ?? "");
  };
  // The task id first, once the runtime took the task (the client reports its answer before any event): what
  // `status`, `input` and `cancel` need.
  let announced = false;
  const announce = (duplicate: boolean) => {
    if (!announced && !flags.json) process.stdout.write(`task ${taskId}${duplicate ? " (duplicate: already submitted)" : ""}\n`);
    announced = true;
  };
  const onSubmitted = (reply: SubmitReply) => announce(reply.status === "duplicate");
  return { printer, onEvent, onSubmitted };
}

/** `dirigent submit`: submits a task and prints its id. */
function registerSubmitCommand(program: Command): void {
  commonOptions(
    program
      .command("submit")
      .description("submit a task and print its id")
      .argument("[file]", "task template (XML); or give --prompt")
      .option("--prompt <text>", "the task in words instead of a file: the runtime compiles it into a template first")
      .option("-i, --input <key=value>", "bind a template input (repeatable)", collect, [])
      .option("--task-id <id>", "choose the task id (idempotent submission)")
      .option("--max-tokens <n>", "token budget of the task, its subtasks included")
      .option("--max-cost <usd>", "cost budget of the task (needs a price table, DIRIGENT_MODEL_PRICES)")
      .option("--stream", "ask for the answer as model.delta events"),
  ).action(async (file: string | undefined, flags: RunFlags) => {
    const source = { ...(await taskSource(file, flags.prompt)), ...budgetFields(flags) };
    const inputs = parseInputs(flags.input ?? []);
    const taskId = taskIdFlag(flags.taskId);
    await withClient(flags, async (client) => {
      const reply = await client.submit({ ...source, inputs, ...(taskId ? { taskId } : {}) }).catch(rethrow);
      process.stdout.write(`${reply.taskId}${reply.status === "duplicate" ? " (duplicate: already submitted)" : ""}\n`);
    });
  });
}

/** `dirigent list` (`ps`): the tasks with events in the last 24 h, from the events stream. */
function registerListCommand(program: Command): void {
  commonOptions(
    program
      .command("list")
      .alias("ps")
      .description("list the tasks with events in the last 24 h (the events stream), newest first")
      .option("--state <states>", "only tasks in these states (comma-separated: queued, running, awaiting_input, completed, failed, …)")
      .option("--since <time>", "only tasks with an event since then: an ISO-8601 time or a duration ago (30s, 15m, 2h, 1d)")
      .option("--limit <n>", "print at most n tasks", "50")
      .option("--json", "one JSON object per line"),
  ).action(async (flags: ListFlags) => {
    const states = flags.state === undefined ? undefined : new Set<string>(flags.state.split(",").map((s) => stateFlag(s.trim())));
    const since = flags.since === undefined ? undefined : sinceFlag(flags.since, Date.now());
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit '${flags.limit}': must be a positive integer`);
    const { config, subjects } = setup(flags, "dirigent-list");
    const url = config.nats ?? DEFAULT_NATS_URL;
    const nc = await connectNats({ servers: url, name: "dirigent-list", ...natsAuth(config) }).catch((err: unknown) => {
      throw new Error(`cannot reach NATS at ${url}: ${messageOf(err)} (start the runtime with 'dirigent up' or pass --nats URL)`);
    });
    try {
      const tasks = (await listStoredTasks(nc, subjects))
        .filter((t) => (states ? states.has(t.state) : true) && (since === undefined ? true : Date.parse(t.at) >= since))
        .slice(0, limit);
      process.stdout.write(flags.json ? tasks.map((t) => JSON.stringify(t) + "\n").join("") : formatTaskList(tasks));
    } finally {
      await nc.close();
    }
  });
}

/** `dirigent status`: a task's state and result, with its question when it waits for input. */
function registerStatusCommand(program: Command): void {
  commonOptions(program.command("status").description("print a task's state and result as JSON").argument("<id>", "task id")).action(
    async (id: string, flags: CommonFlags) => {
      await withClient(flags, async (client, nc, subjects) => {
        const taskId = checkedId(id);
        const reply = await client.get(taskId).catch(rethrow);
        // A task waiting for input: its question, from its last `continuation.input` event (the events stream).
        const question = reply.state === "awaiting_input" ? await pendingQuestion(nc, subjects, taskId) : undefined;
        process.stdout.write(JSON.stringify(question === undefined ? reply : { ...reply, question }, null, 2) + "\n");
      });
    },
  );
}

/** `dirigent input`: answers a task that waits for user input. */
function registerInputCommand(program: Command): void {
  commonOptions(
    program
      .command("input")
      .description("answer a task that waits for user input (request_user_input)")
      .argument("<id>", "task id")
      .argument("<text>", "the answer"),
  ).action(async (id: string, text: string, flags: CommonFlags) => {
    await withClient(flags, async (client) => {
      const reply = await client.input(checkedId(id), text).catch(async (err: unknown) => {
        if (!(err instanceof RemoteError && err.code === "NO_RESPONDERS")) return rethrow(err);
        // Nobody waits for an answer: say whether the task exists at all.
        const status = await client.get(id).catch(rethrow);
        throw new Error(`task ${id} is ${status.state}, not waiting for input`);
      });
      process.stdout.write(JSON.stringify(reply) + "\n");
    });
  });
}

/** `dirigent cancel`: cancels a task. */
function registerCancelCommand(program: Command): void {
  commonOptions(program.command("cancel").description("cancel a task").argument("<id>", "task id")).action(
    async (id: string, flags: CommonFlags) => {
      await withClient(flags, async (client) => {
        const reply = await client.cancel(checkedId(id)).catch(rethrow);
        process.stdout.write(JSON.stringify(reply, null, 2) + "\n");
        process.exitCode = reply.cancelled ? 0 : 1;
      });
    },
  );
}

interface RerunFlags extends CommonFlags {
  from?: string;
  input?: string[];
  template?: string;
  taskId?: string;
  json?: boolean;
  quiet?: boolean;
}

/** Registers `dirigent rerun`: fork a finished task from one of its nodes and follow the fork. */
function registerRerunCommand(program: Command): void {
  commonOptions(
    program
      .command("rerun")
      .description(
        "fork an ended task: a new task whose nodes before --from are answered from the original's records (no model call), the rest run live",
      )
      .argument("<id>", "the task to fork (completed, failed or cancelled)")
      .option("--from <path>", "the node to run live from (paths as 'dirigent show' lists them); optional with --template or -i")
      .option("-i, --input <key=value>", "replace an input of the original (repeatable)", collect, [])
      .option("--template <file>", "a changed template: unchanged nodes before the fork point are replayed")
      .option("--task-id <id>", "choose the fork's id")
      .option("--json", "one JSON object per line: the fork's answer, every event, then the result")
      .option("-q, --quiet", "do not print events"),
  ).action(async (id: string, flags: RerunFlags) => {
    const taskId = checkedId(id);
    const inputs = parseInputs(flags.input ?? []);
    const xml = flags.template === undefined ? undefined : await readTemplate(flags.template);
    if (flags.from === undefined && xml === undefined && Object.keys(inputs).length === 0)
      throw new UsageError("give the node to run from (--from PATH), or a changed template (--template FILE) or input (-i k=v)");
    const request = {
      ...(flags.from === undefined ? {} : { from: flags.from }),
      ...(Object.keys(inputs).length > 0 ? { inputs } : {}),
      ...(xml === undefined ? {} : { xml }),
      taskId: taskIdFlag(flags.taskId) ?? newTaskId(),
    };
    await withClient(flags, async (client) => {
      const printer = createEventPrinter((text) => process.stdout.write(text));
      const line = (value: unknown) => process.stdout.write(JSON.stringify(value) + "\n");
      const onEvent = flags.json ? line : flags.quiet ? undefined : (e: TaskEvent) => printer.event(e);
      const outcome = await client
        .runFork(taskId, request, onEvent, {
          onSubmitted: (reply) =>
            flags.json
              ? line(reply)
              : process.stdout.write(
                  `task ${reply.taskId} (fork of ${taskId} from ${reply.forkOf.from}; ${counted(reply.replayed, "node")} replayed)\n`,
                ),
        })
        .catch(rethrow);
      printer.end();
      process.stdout.write((flags.json ? JSON.stringify(outcome) : formatOutcome(outcome, { streamed: printer.streamed() })) + "\n");
      process.exitCode = outcome.status === "COMPLETE" ? 0 : 1;
    });
  });
}

interface ShowFlags extends CommonFlags {
  node?: string;
  occurrence?: string;
  json?: boolean;
}

/** Registers `dirigent show`. */
function registerShowCommand(program: Command): void {
  commonOptions(
    program
      .command("show")
      .description("print what each node of a task did: the tree with state, duration, tokens and cost, or one node's conversation")
      .argument("<id>", "task id")
      .option("--node <path>", "print this node's record and conversation (paths as the tree lists them)")
      .option("--occurrence <n>", "which evaluation of the node (a loop runs a node once per iteration); the last by default")
      .option("--json", "print the answer as JSON"),
  ).action(async (id: string, flags: ShowFlags) => {
    const taskId = checkedId(id);
    await withClient(flags, async (client) => {
      if (flags.node === undefined) {
        const reply = await client.nodes(taskId).catch(rethrow);
        process.stdout.write(flags.json ? `${JSON.stringify(reply, null, 2)}\n` : formatTree(reply));
        return;
      }
      const occurrence = flags.occurrence === undefined ? undefined : Number(flags.occurrence);
      const reply = await client.node(taskId, flags.node, occurrence).catch(rethrow);
      process.stdout.write(flags.json ? `${JSON.stringify(reply, null, 2)}\n` : formatNode(reply));
    });
  });
}

/** Asks the user a task's question on the terminal and sends the answer. */
async function askUser(client: DirigentClient, taskId: TaskId, question: string): Promise<void> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`? ${question}\n> `);
    await client.input(taskId, answer);
  } catch (err) {
    process.stderr.write(`dirigent: could not send the answer: ${messageOf(err)}\n`);
  } finally {
    rl.close();
  }
}

/** Connects to a running runtime (never an embedded one: it would end with this command). */
async function withClient(
  flags: CommonFlags,
  fn: (client: DirigentClient, nc: NatsConnection | undefined, subjects: Subjects) => Promise<void>,
): Promise<void> {
  const { config, subjects, log } = setup(flags, "dirigent-client");
  const placement = await placeClient(config, subjects, log, "dirigent-client");
  try {
    if (placement.transport.kind === "memory")
      throw new Error("no NATS server reachable: start the runtime with 'dirigent up' or pass --nats URL");
    const bus = placement.transport.bus;
    await fn(new DirigentClient(bus, subjects), bus instanceof NatsBus ? bus.connection : undefined, subjects);
  } finally {
    await placement.close();
  }
}

/** The question of a task's last `continuation.input` event, read from the events stream; undefined when unreadable. */
async function pendingQuestion(nc: NatsConnection | undefined, subjects: Subjects, taskId: TaskId): Promise<string | undefined> {
  if (nc === undefined) return undefined;
  const stored = await readStoredTask(nc, subjects, taskId).catch(() => []);
  let question: string | undefined;
  for (const m of stored) {
    const event = m.subject === subjects.taskEvents(taskId) ? decode(TaskEvent, m.data) : undefined;
    if (event?.ok && event.value.type === "continuation.input") question = event.value.message ?? "";
  }
  return question;
}
