/**
 * A client of the public task API, over any {@link Bus}: submit, follow events, await the result, get, cancel.
 */
import { randomUUID } from "node:crypto";
import type { Bus, BusSubscription } from "../actors/bus.js";
import { RemoteError, ask } from "../actors/ask.js";
import { silentLogger } from "../actors/deps.js";
import {
  CancelReply,
  CompileReply,
  decode,
  FINAL_STATES,
  InvalidSubjectError,
  parseTaskId,
  Requests,
  SubmitReply,
  TaskEvent,
  TaskOutcome,
  TaskStatusReply,
  UserInputReply,
  type CompileRequest,
  type NodeDetailReply,
  type NodeGetRequest,
  type NodeListReply,
  type RerunReply,
  type UserInput,
  type Subjects,
  type TaskBudget,
  type TaskId,
  type TaskInputs,
} from "../protocol/index.js";
import { firstComing } from "./event-repeats.js";

/** First pause before {@link DirigentClient.run} reads a task's record in case its result was missed. */
const RESULT_POLL_FIRST_MS = 3000;
/** Longest pause between those reads. */
const RESULT_POLL_MAX_MS = 30_000;
/**
 * How long {@link DirigentClient.run} still waits for the live result once the record shows one. A Director stores
 * the result, then publishes the task's last events (each acknowledged by the events stream, in order), then the
 * result: a read in between finds the result before the last events have come, and returning then would lose them.
 */
const LIVE_RESULT_GRACE_MS = 5000;
/**
 * How long {@link DirigentClient.run} waits, once the result came, for the task's final event (`task.completed`,
 * `task.failed`, `task.cancelled`) when it has not come before it. A Director publishes it before the result, but an
 * event stored again after a lost connection comes after later ones (docs/deploy.md), so the order is not certain.
 */
const FINAL_EVENT_GRACE_MS = 2000;

/**
 * A task id a user of the client passed, checked once as it comes in: an illegal one fails as its subject would have
 * before the client checked it ({@link InvalidSubjectError}, protocol/subjects.ts).
 */
function checkedTaskId(taskId: string): TaskId {
  const id = parseTaskId(taskId);
  if (id === undefined) throw new InvalidSubjectError(`illegal task id token '${taskId}'`, taskId);
  return id;
}

/** A new task id: a UUID, 36 characters of hex digits and '-', is a valid one. */
export const newTaskId = (): TaskId => randomUUID() as TaskId;

/** What to submit. */
export interface SubmitInput {
  /** The template; or give `prompt`. */
  xml?: string;
  /** The task in words, compiled into a template by the runtime before it runs. */
  prompt?: string;
  inputs?: TaskInputs;
  taskId?: string;
  /** Token and cost limits of the task, its subtasks included. */
  budget?: TaskBudget;
  /** Stream the answers as `model.delta` events. */
  stream?: boolean;
}

/** A task being followed: its events as they arrive and its result. */
export interface TaskWatch {
  readonly taskId: TaskId;
  /** Resolves with the task's outcome. */
  readonly result: Promise<TaskOutcome>;
  /** Stops following. */
  close(): Promise<void>;
}

/** Options of {@link DirigentClient.run}. */
export interface RunOptions {
  /**
   * Called with the runtime's answer to the submission (`accepted` or `duplicate`, and the task id), before any event
   * and any result: events that arrive before the answer are held until it has been reported.
   */
  onSubmitted?: (reply: SubmitReply) => void;
}

/** What a client needs to ask the runtime: the bus, the subjects, no logging. */
export function clientDeps(bus: Bus, subjects: Subjects) {
  return { bus, subjects, log: silentLogger, now: () => new Date(), newId: () => randomUUID() };
}

/** A fork of a task ({@link DirigentClient.rerun}): the body of `tasks.<id>.rerun` (protocol/rerun.ts). */
export interface RerunInput {
  /** The node to run live from; optional when `xml` or `inputs` change something (then the first node they change). */
  from?: string;
  /** The fork's id; a new one when absent. */
  taskId?: string;
  /** Inputs replacing the original's of the same name. */
  inputs?: TaskInputs;
  /** A changed template. */
  xml?: string;
}

/** Client of the public API. */
export class DirigentClient {
  constructor(
    private readonly bus: Bus,
    private readonly subjects: Subjects,
    private readonly timeoutMs = 10_000,
  ) {}

  private deps() {
    return clientDeps(this.bus, this.subjects);
  }

  /**
   * Submits a task.
   * @throws {RemoteError} with the error code of the answer (`INVALID_TEMPLATE`, `NO_RESPONDERS`, …).
   */
  submit(input: SubmitInput): Promise<SubmitReply> {
    const body = input.prompt === undefined ? { xml: input.xml } : { prompt: input.prompt };
    return ask(
      this.deps(),
      Requests.submit,
      {
        ...body,
        inputs: input.inputs ?? {},
        ...(input.taskId ? { taskId: input.taskId } : {}),
        ...(input.budget ? { budget: input.budget } : {}),
        ...(input.stream === undefined ? {} : { stream: input.stream }),
      },
      {
        timeoutMs: this.timeoutMs,
      },
    );
  }

  /**
   * Asks the Compiler for a validated template (or, in `decompose` mode, a sub-tree).
   * @throws {RemoteError} `INVALID_TEMPLATE` when no model answer was valid, `NO_RESPONDERS` without a Compiler.
   */
  compile(request: Omit<CompileRequest, "type">, options: { timeoutMs?: number } = {}): Promise<CompileReply> {
    return ask(this.deps(), Requests.compile, { type: "compiler.compile", ...request }, { timeoutMs: options.timeoutMs ?? 300_000 });
  }

  /**
   * Follows a task's events and result. Subscribe before submitting, so nothing is missed. An event that comes again
   * (a write sent again around a lost connection or a leader loss) is reported once (./event-repeats.ts).
   */
  watch(taskId: string, onEvent: (event: TaskEvent) => void = () => undefined): TaskWatch {
    return this.watching(checkedTaskId(taskId), onEvent);
  }

  /** {@link watch} of a checked task id. */
  private watching(taskId: TaskId, onEvent: (event: TaskEvent) => void): TaskWatch {
    const subs: BusSubscription[] = [];
    let resolve!: (outcome: TaskOutcome) => void;
    const result = new Promise<TaskOutcome>((r) => (resolve = r));
    const fresh = firstComing();
    subs.push(
      this.bus.subscribe(this.subjects.taskEvents(taskId), (msg) => {
        const decoded = decode(TaskEvent, msg.data);
        if (decoded.ok && fresh(decoded.value)) onEvent(decoded.value);
      }),
      this.bus.subscribe(this.subjects.taskResult(taskId), (msg) => {
        const decoded = decode(TaskOutcome, msg.data);
        if (decoded.ok) resolve(decoded.value);
      }),
    );
    return {
      taskId,
      result,
      close: async () => {
        await Promise.all(subs.map((s) => s.unsubscribe()));
      },
    };
  }

  /**
   * Submits and waits for the result, reporting events on the way: `options.onSubmitted` first, then the events in the
   * order they came (a task's first events can overtake the submission's answer; they are held until it came). A
   * refused submission reports no event. The result subscription is core NATS, which
   * misses a result published while the connection is down: so the task's record is also read after each reconnect,
   * and every few seconds (growing to {@link RESULT_POLL_MAX_MS}) in case a loss went unnoticed.
   */
  async run(input: SubmitInput, onEvent?: (event: TaskEvent) => void, options: RunOptions = {}): Promise<TaskOutcome> {
    const taskId = input.taskId === undefined ? newTaskId() : checkedTaskId(input.taskId);
    return this.follow(taskId, () => this.submit({ ...input, taskId }), onEvent, options);
  }

  /**
   * Forks task `taskId` (`dirigent rerun`): a new task whose nodes before `request.from` are answered from the
   * original's records and the rest run live, with the request's inputs and template. `CONFLICT` for a task not ended,
   * `NOT_FOUND` for an unknown task or node, `EXPIRED` once its records are gone (docs/protocol.md).
   */
  async rerun(taskId: string, request: RerunInput): Promise<RerunReply> {
    return this.fork(checkedTaskId(taskId), request);
  }

  /** {@link rerun} of a checked task id. */
  private fork(taskId: TaskId, request: RerunInput): Promise<RerunReply> {
    return ask(this.deps(), Requests.taskRerun.at(taskId), request, { timeoutMs: this.timeoutMs });
  }

  /** {@link rerun}, then waits for the fork's result, reporting its events on the way (as {@link run}). */
  async runFork(
    taskId: string,
    request: RerunInput,
    onEvent?: (event: TaskEvent) => void,
    options: { onSubmitted?: (reply: RerunReply) => void } = {},
  ): Promise<TaskOutcome> {
    const original = checkedTaskId(taskId);
    const fork = request.taskId === undefined ? newTaskId() : checkedTaskId(request.taskId);
    return this.follow(
      fork,
      async () => {
        const reply = await this.fork(original, { ...request, taskId: fork });
        options.onSubmitted?.(reply);
        return reply;
      },
      onEvent,
    );
  }

  /** Subscribes to task `taskId`, submits it by `submit`, and waits for its result. */
  private async follow(
    taskId: TaskId,
    submit: () => Promise<SubmitReply>,
    onEvent?: (event: TaskEvent) => void,
    options: RunOptions = {},
  ): Promise<TaskOutcome> {
    // The events that came before the submission's answer; undefined once it came.
    let held: TaskEvent[] | undefined = [];
    // Resolved by the task's final event: reported before `run` returns, should it come just after the result.
    let ended!: () => void;
    const final = new Promise<void>((resolve) => (ended = resolve));
    const watch = this.watching(taskId, (event) => {
      if (held) held.push(event);
      else onEvent?.(event);
      if (FINAL_STATES.has(event.state) && event.type === `task.${event.state}`) ended();
    });
    const stop = new AbortController();
    try {
      await this.bus.flush();
      const reply = await submit();
      options.onSubmitted?.(reply);
      const early = held;
      held = undefined;
      for (const event of early) onEvent?.(event);
      if (reply.status === "duplicate") {
        const status = await this.status(taskId);
        if (status.result) return status.result;
      }
      let grace: ReturnType<typeof setTimeout> | undefined;
      const stored = this.storedResult(taskId, stop.signal).then(
        // Found in the record: the live result (after the task's last events) normally follows within moments; it
        // is waited for a while, so the events are not cut off, unless it was lost (a reconnect, a Director gone).
        (outcome) => new Promise<TaskOutcome>((resolve) => (grace = setTimeout(() => resolve(outcome), LIVE_RESULT_GRACE_MS))),
      );
      let waited: ReturnType<typeof setTimeout> | undefined;
      try {
        const outcome = await Promise.race([watch.result, stored]);
        if (onEvent !== undefined)
          await Promise.race([final, new Promise<void>((resolve) => (waited = setTimeout(resolve, FINAL_EVENT_GRACE_MS)))]);
        return outcome;
      } finally {
        clearTimeout(grace);
        clearTimeout(waited);
      }
    } finally {
      stop.abort();
      await watch.close();
    }
  }

  /** Resolves with the task's stored result once it has one, looking after each reconnect and with a growing pause. */
  private async storedResult(taskId: TaskId, signal: AbortSignal): Promise<TaskOutcome> {
    // Settles at the next reconnect (or the end of `run`); renewed after each.
    let reconnect!: () => void;
    let reconnected = new Promise<"reconnected">((resolve) => (reconnect = () => resolve("reconnected")));
    const ended = new Promise<"ended">((resolve) => signal.addEventListener("abort", () => resolve("ended"), { once: true }));
    const removeListener = this.bus.onReconnect?.(() => reconnect());
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      let pause = RESULT_POLL_FIRST_MS;
      let next: "read" | "wait" = "wait";
      while (!signal.aborted) {
        if (next === "wait") {
          const slept = new Promise<"slept">((resolve) => (timer = setTimeout(() => resolve("slept"), pause)));
          const woke = await Promise.race([slept, reconnected, ended]);
          clearTimeout(timer);
          if (woke === "ended") break;
          if (woke === "slept") pause = Math.min(pause * 2, RESULT_POLL_MAX_MS);
        }
        if (signal.aborted) break;
        reconnected = new Promise((resolve) => (reconnect = () => resolve("reconnected")));
        // A read in flight when the connection comes back may have been lost with it: read again at once.
        const read = await Promise.race([this.status(taskId).catch(() => undefined), reconnected, ended]);
        if (read === "ended") break;
        if (read === "reconnected") {
          next = "read";
          continue;
        }
        if (read?.result && FINAL_STATES.has(read.state)) return read.result;
        next = "wait";
      }
    } finally {
      clearTimeout(timer);
      removeListener?.();
    }
    // Aborted: the watch delivered the result; this promise is no longer raced.
    return new Promise<TaskOutcome>(() => undefined);
  }

  /** The state and result of a task. */
  async get(taskId: string): Promise<TaskStatusReply> {
    return this.status(checkedTaskId(taskId));
  }

  /** {@link get} of a checked task id. */
  private status(taskId: TaskId): Promise<TaskStatusReply> {
    return ask(this.deps(), Requests.taskGet.at(taskId), {}, { timeoutMs: this.timeoutMs });
  }

  /** Asks for a task to be cancelled. */
  async cancel(taskId: string): Promise<CancelReply> {
    return ask(this.deps(), Requests.taskCancel.at(checkedTaskId(taskId)), {}, { timeoutMs: this.timeoutMs });
  }

  /**
   * The records of a task's nodes that have ended, in the order they started: path, name, kind, state, times, own
   * usage and cost. `NOT_FOUND` for an unknown task, `EXPIRED` once its records are gone (docs/protocol.md).
   */
  async nodes(taskId: string): Promise<NodeListReply> {
    return ask(this.deps(), Requests.taskNodes.at(checkedTaskId(taskId)), {}, { timeoutMs: this.timeoutMs });
  }

  /**
   * One node's record (its last evaluation, or `occurrence`) with the conversations of its sessions: the messages
   * as sent, each model call's usage, each tool call's arguments and result.
   */
  async node(taskId: string, path: string, occurrence?: number): Promise<NodeDetailReply> {
    const body: NodeGetRequest = { path, ...(occurrence === undefined ? {} : { occurrence }) };
    return ask(this.deps(), Requests.taskNode.at(checkedTaskId(taskId)), body, { timeoutMs: this.timeoutMs });
  }

  /** Answers a task's pending `request_user_input`; NO_RESPONDERS when the task waits for no answer. */
  async input(taskId: string, text: string): Promise<UserInputReply> {
    const body: UserInput = { text };
    return ask(this.deps(), Requests.taskInput.at(checkedTaskId(taskId)), body, { timeoutMs: this.timeoutMs });
  }
}

export { RemoteError };
