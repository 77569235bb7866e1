/**
 * The walk of one task as the Evaluator runs it: its Handler calls (sessions, resumes, scripts) bounded by the task's
 * parallelism, numbered by occurrence so a re-run replays them, and charged to its budgets; its compile and memory
 * requests; the user's answers and the node records.
 */
import {
  encode,
  NodeAbort,
  Requests,
  xmlParseFailure,
  type CompileRequest,
  type EvaluateRequest,
  type ExecuteRequest,
  type MatchRequest,
  type ScriptRequest,
  type SessionState,
  type TaskResult,
  type TemplateTool,
  type TaskId,
} from "../../protocol/index.js";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import type { ParseOutcome, StepNode, TemplateDocument } from "../../machines/language/ast.js";
import type { ActorDeps } from "../deps.js";
import { ask, askRetrying } from "../ask.js";
import { Semaphore } from "../limit.js";
import type { TemplateLibrary } from "../library/library.js";
import { replays } from "../fork/replay.js";
import { turnKey } from "../handler/records.js";
import type { Masker } from "../secrets.js";
import { createTaskSpend, usageLine, type BudgetScope, type TaskSpend } from "./budget.js";
import { DEFAULT_TASK_PARALLELISM, MAX_DEPTH, MEMORY_TIMEOUT_MS, SCRIPT_REPLY_MARGIN_MS, type EvaluatorConfig } from "./config.js";
import { DEFAULT_INPUT_TIMEOUT_MS, taskInputs, type InputRecords } from "./input.js";
import { nodeRecorder } from "./node-records.js";
import { entryPath, inputFailure, modelIdFailure, nodeAt } from "./nodes.js";
import type { Walk, WalkActors } from "./document-walk.js";
import { settled } from "../settled.js";

/**
 * The entry node of a task's parsed template, or the failure that stops the task before anything runs: the template
 * does not parse, defines no task, or names a command the allowlist lacks (`refusal`, ./script.ts `commandCheck`;
 * absent: not checked here).
 */
export function taskEntry(
  parsed: ParseOutcome,
  refusal: ((document: TemplateDocument) => string | undefined) | undefined,
): { document: TemplateDocument; path: string; node: StepNode } | { failure: TaskResult } {
  if (!parsed.ok) {
    const { message, line, col } = parsed.error;
    return { failure: xmlParseFailure(message, line && col ? { line, col } : undefined) };
  }
  const document = parsed.document;
  const path = entryPath(document);
  const node = path === undefined ? undefined : nodeAt(document, path);
  if (path === undefined || !node) return { failure: xmlParseFailure("the template defines no task to run") };
  const refused = refusal?.(document);
  return refused === undefined ? { document, path, node } : { failure: inputFailure(refused) };
}

/** What the walk of a task needs from its Evaluator. */
export interface TaskWalkRole {
  deps: ActorDeps;
  config: EvaluatorConfig;
  /** The Evaluator's evaluation actors. */
  actors: WalkActors;
  library: TemplateLibrary;
  /** Library templates offered as tools to every atomic session (none: empty). */
  templateTools: TemplateTool[];
  /** Masks the configured secret values in node records. */
  mask: Masker;
  /** Publishes a progress report of the task `taskId`. */
  progress(taskId: TaskId, event: string, message: string, data?: Record<string, unknown>): void;
}

/** The files Memory matches for a node's context query (`Walk.memoryMatch`), at most `query.limit`. */
async function matchMemory(
  deps: ActorDeps,
  query: Parameters<NonNullable<Walk["memoryMatch"]>>[0],
  signal: AbortSignal,
): Promise<{ path: string; relevance?: string; score?: number }[]> {
  const match: MatchRequest = {
    type: "memory.match",
    templateDescription: query.text,
    templateType: query.templateType,
    ...(query.templateSubtype === undefined ? {} : { templateSubtype: query.templateSubtype }),
    inputs: query.inputs,
    ...(query.inheritedContext === undefined ? {} : { inheritedContext: query.inheritedContext }),
    ...(query.previousOutputs && query.previousOutputs.length > 0 ? { previousOutputs: query.previousOutputs } : {}),
  };
  // Read-only, so safe to ask again: a Memory process that dies mid-request costs the idle timeout, not all of it.
  const answer = await askRetrying(deps, Requests.memoryMatch, match, { timeoutMs: MEMORY_TIMEOUT_MS, signal });
  return answer.matches
    .slice(0, query.limit ?? answer.matches.length)
    .map((m) => ({ path: m.path, relevance: m.relevance, ...(m.score === undefined ? {} : { score: m.score }) }));
}

/**
 * The walk of the task `request` asks for, over its parsed `document`, and the task's spend (budgets and usage).
 * `wholeStop` tells whether the whole evaluation is stopping (a cancel, a takeover, a shutdown): a node aborted then
 * is not stopped in its Handler one by one, since the work is cancelled with the task or continued by the next owner.
 */
export function taskWalk(
  role: TaskWalkRole,
  request: EvaluateRequest,
  document: TemplateDocument,
  wholeStop: () => boolean,
): { walk: Walk & InputRecords; spend: TaskSpend } {
  const { deps, config, actors, library, mask } = role;
  const { taskId } = request;
  const progress = (event: string, message: string, data?: Record<string, unknown>) => role.progress(taskId, event, message, data);
  const offered = role.templateTools.length > 0 ? { templateTools: role.templateTools } : {};
  // Every Handler call of the task is charged to it and sent what is left of its budgets.
  const spend = createTaskSpend(request.budget, (spent) => progress("task.usage", usageLine(spent), { ...spent }));
  const stream = request.stream === undefined ? {} : { stream: request.stream };
  // The task's own bound on Handler calls at once: its map branches, nested inputs and spawned subtasks share it.
  const calls = new Semaphore(config.taskParallelism ?? DEFAULT_TASK_PARALLELISM);
  /**
   * A Handler call of the node at `nodePath`, at most `taskParallelism` of the task at once. Aborted on its own (a
   * cancelled branch), it tells the Handler to stop; not when the whole evaluation stops for a cancel, a takeover
   * or a shutdown, where the work is cancelled with the task or continued by the next owner.
   */
  const handlerCall = <T>(nodePath: string, signal: AbortSignal, call: () => Promise<T>): Promise<T> =>
    calls.run(() => {
      const abort = () => {
        if (!wholeStop()) deps.bus.publish(deps.subjects.nodeAbort, encode(NodeAbort, { type: "node.abort", taskId, nodePath }));
      };
      signal.addEventListener("abort", abort, { once: true });
      const ended = () => signal.removeEventListener("abort", abort);
      return settled(call, ended);
    });
  // The walk is deterministic given the answers it gets, so the nth call of a node is the same call on a re-run:
  // the Handler keys its records by it and replays them instead of calling the model again.
  const occurrences = new Map<string, number>();
  const occurrence = (key: string) => {
    const n = (occurrences.get(key) ?? 0) + 1;
    occurrences.set(key, n);
    return n;
  };
  // The user's answers are recorded too, so a re-run asks no question again (actors/evaluator/input.ts).
  const inputs = taskInputs(deps, taskId, config.inputTimeoutMs ?? DEFAULT_INPUT_TIMEOUT_MS, config.records);
  const records = nodeRecorder({
    taskId,
    store: config.records,
    log: deps.log,
    now: deps.now,
    mask,
    progress,
    ...(request.replay
      ? {
          replays: replays(request.replay, {
            taskId,
            store: config.records,
            log: deps.log,
            now: deps.now,
            progress,
          }),
        }
      : {}),
  });
  /**
   * A Handler session of the node at `nodePath` (`execute`, each attempt's request `body`): asked again when the
   * Handler goes silent (died, NATS restarted), the same occurrence continuing from its record; its answer recorded
   * and charged to the task. `resumed`: the suspended session it continues.
   */
  const session = (
    nodePath: string,
    signal: AbortSignal,
    execute: ExecuteRequest,
    body: (attempt: number) => ExecuteRequest,
    budgets: readonly BudgetScope[],
    resumed?: SessionState,
  ): Promise<SuspendedResult> =>
    // A promise callback, not an await, takes the answer: a suspended frame would be held while the model runs.
    handlerCall(nodePath, signal, () => askRetrying(deps, Requests.execute, body, { timeoutMs: config.taskTimeoutMs, signal })).then(
      (answer) => {
        const result = answer.session ? { ...answer.result, session: answer.session } : answer.result;
        records.session(nodePath, config.records ? turnKey(execute) : undefined, result, resumed);
        return spend.charge(nodePath, result, budgets, resumed);
      },
    );
  // What the walk sends out waits for the node records sent before it (actors/evaluator/node-records.ts).
  const walk: Walk & InputRecords = records.gate({
    actors,
    inspect: deps.inspect,
    taskId,
    document,
    records,
    maxDepth: MAX_DEPTH,
    substitution: config.substitution ?? "strict",
    memoryMatch: (query, signal) => matchMemory(deps, query, signal),
    progress,
    library,
    reserve: spend.reserve,
    ...offered,
    continuationTools: config.continuationTools ?? ["subtask", "input"],
    ...(config.reparse === false
      ? {}
      : {
          // Recorded by the Compiler like a session: the nth decomposition of a node is the same one on a re-run.
          compile: async (compile: CompileRequest, signal: AbortSignal) =>
            ask(
              deps,
              Requests.compile,
              { ...compile, occurrence: occurrence(`c:${compile.nodePath ?? ""}`) },
              { timeoutMs: config.taskTimeoutMs, signal },
            ),
        }),
    execute: async (nodePath, fields, signal, budgets = []) => {
      // The one way from a template (and its inputs) to a Handler's model: its ids are checked here.
      const badModel = modelIdFailure(fields);
      if (badModel) return badModel;
      const execute: ExecuteRequest = {
        type: "handler.execute",
        taskId,
        nodePath,
        ...fields,
        ...stream,
        ...spend.remaining(budgets),
        occurrence: occurrence(`x:${nodePath}`),
      };
      // Object.assign: a literal `{ ...execute, fresh }` gets a hidden class of its own in this V8 (Node 20).
      const body = (attempt: number): ExecuteRequest =>
        request.fresh === true && attempt === 1 ? Object.assign({}, execute, { fresh: true }) : execute;
      return session(nodePath, signal, execute, body, budgets);
    },
    waitForInput: (_nodePath, input, signal) => inputs.wait(input, signal),
    inputRecorded: inputs.inputRecorded,
    resume: async (nodePath, suspended, answer, signal, continuations) => {
      const budgets = spend.scopesOfSession(nodePath, suspended);
      const execute: ExecuteRequest = {
        type: "handler.execute",
        taskId,
        nodePath,
        prompt: "",
        resume: { session: suspended, answer },
        ...(continuations === undefined ? {} : { continuations }),
        ...offered,
        ...stream,
        ...spend.remaining(budgets),
        occurrence: occurrence(`r:${nodePath}`),
      };
      return session(nodePath, signal, execute, () => execute, budgets, suspended);
    },
    script: async (nodePath, command, signal) => {
      const request: ScriptRequest = { type: "handler.script", taskId, nodePath, ...command, occurrence: occurrence(`s:${nodePath}`) };
      // The Handler enforces the script's own timeout; the margin covers its kill grace and the round trip.
      return calls.run(() =>
        askRetrying(deps, Requests.script, request, { timeoutMs: command.timeoutMs + SCRIPT_REPLY_MARGIN_MS, signal }),
      );
    },
  });
  return { walk, spend };
}
