/**
 * A client of the public task API, over any {@link Bus}: submit, follow events, await the result, get, cancel.
 */
import { randomUUID } from "node:crypto";
import type { Bus, BusSubscription } from "../actors/bus.js";
import { RemoteError, ask } from "../actors/serve.js";
import { silentLogger } from "../actors/deps.js";
import {
  CancelReply,
  CompileReply,
  decode,
  SubmitReply,
  TaskEvent,
  TaskOutcome,
  TaskStatusReply,
  UserInputReply,
  type CompileRequest,
  type UserInput,
  type Subjects,
  type TaskBudget,
  type TaskInputs,
} from "../protocol/index.js";

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
  readonly taskId: string;
  /** Resolves with the task's outcome. */
  readonly result: Promise<TaskOutcome>;
  /** Stops following. */
  close(): Promise<void>;
}

/** Client of the public API. */
export class DirigentClient {
  constructor(
    private readonly bus: Bus,
    private readonly subjects: Subjects,
    private readonly timeoutMs = 10_000,
  ) {}

  private deps() {
    return { bus: this.bus, subjects: this.subjects, log: silentLogger, now: () => new Date(), newId: () => randomUUID() };
  }

  /**
   * Submits a task.
   * @throws {RemoteError} with the error code of the answer (`INVALID_TEMPLATE`, `NO_RESPONDERS`, …).
   */
  submit(input: SubmitInput): Promise<SubmitReply> {
    const body = input.prompt === undefined ? { xml: input.xml } : { prompt: input.prompt };
    return ask(this.deps(), this.subjects.submit, {
        ...body,
        inputs: input.inputs ?? {},
        ...(input.taskId ? { taskId: input.taskId } : {}),
        ...(input.budget ? { budget: input.budget } : {}),
        ...(input.stream === undefined ? {} : { stream: input.stream }),
      }, SubmitReply, {
      timeoutMs: this.timeoutMs,
    });
  }

  /**
   * Asks the Compiler for a validated template (or, in `decompose` mode, a sub-tree).
   * @throws {RemoteError} `INVALID_TEMPLATE` when no model answer was valid, `NO_RESPONDERS` without a Compiler.
   */
  compile(request: Omit<CompileRequest, "type">, options: { timeoutMs?: number } = {}): Promise<CompileReply> {
    return ask(this.deps(), this.subjects.compile, { type: "compiler.compile", ...request }, CompileReply, { timeoutMs: options.timeoutMs ?? 300_000 });
  }

  /** Follows a task's events and result. Subscribe before submitting, so nothing is missed. */
  watch(taskId: string, onEvent: (event: TaskEvent) => void = () => undefined): TaskWatch {
    const subs: BusSubscription[] = [];
    let resolve!: (outcome: TaskOutcome) => void;
    const result = new Promise<TaskOutcome>((r) => (resolve = r));
    subs.push(
      this.bus.subscribe(this.subjects.taskEvents(taskId), (msg) => {
        const decoded = decode(TaskEvent, msg.data);
        if (decoded.ok) onEvent(decoded.value);
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

  /** Submits and waits for the result, reporting events on the way. */
  async run(input: SubmitInput, onEvent?: (event: TaskEvent) => void): Promise<TaskOutcome> {
    const taskId = input.taskId ?? randomUUID();
    const watch = this.watch(taskId, onEvent);
    try {
      await this.bus.flush();
      const reply = await this.submit({ ...input, taskId });
      if (reply.status === "duplicate") {
        const status = await this.get(taskId);
        if (status.result) return status.result;
      }
      return await watch.result;
    } finally {
      await watch.close();
    }
  }

  /** The state and result of a task. */
  get(taskId: string): Promise<TaskStatusReply> {
    return ask(this.deps(), this.subjects.taskGet(taskId), {}, TaskStatusReply, { timeoutMs: this.timeoutMs });
  }

  /** Asks for a task to be cancelled. */
  cancel(taskId: string): Promise<CancelReply> {
    return ask(this.deps(), this.subjects.taskCancel(taskId), {}, CancelReply, { timeoutMs: this.timeoutMs });
  }

  /** Answers a task's pending `request_user_input`; NO_RESPONDERS when the task waits for no answer. */
  input(taskId: string, text: string): Promise<UserInputReply> {
    const body: UserInput = { text };
    return ask(this.deps(), this.subjects.taskInput(taskId), body, UserInputReply, { timeoutMs: this.timeoutMs });
  }
}

export { RemoteError };
