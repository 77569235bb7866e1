/**
 * The Evaluator role: walks a task template ({@link evaluationMachine}); sole owner of `{{var}}` substitution.
 * Serves `<root>.evaluator.evaluate` (queue group `evaluator`); asks Handlers on `<root>.handler.execute`;
 * reports steps as progress; aborts its work when the task is cancelled.
 */
import { toPromise, type Actor } from "xstate";
import { DEFAULT_MAX_EVALUATIONS, DEFAULT_MAX_SUBTASK_DEPTH, RESERVED } from "../../machines/evaluator/continuation.js";
import { extend, rootEnv } from "../../machines/language/env.js";
import type { evaluationMachine } from "../../machines/evaluator/evaluation.js";
import {
  CancelBroadcast,
  Superseded,
  decode,
  encode,
  EvaluateRequest,
  NodeAbort,
  type ContinuationKind,
  type CompileRequest,
  type MatchRequest,
  Progress,
  Requests,
  type EvaluateReply,
  type ExecuteRequest,
  type ScriptRequest,
  type TaskResult,
} from "../../protocol/index.js";
import type { ActorDeps, RoleHandle } from "../deps.js";
import type { TaskStore } from "../bus.js";
import { inspectOption } from "../inspect-option.js";
import { START } from "../../machines/invoke-events.js";
import { publishProgress } from "../local.js";
import { createTaskSpend, usageLine } from "./budget.js";
import { DEFAULT_INPUT_TIMEOUT_MS, taskInputs, type InputRecords } from "./input.js";
import { entryPath, inputFailure, modelIdFailure, nodeAt, summarize } from "./nodes.js";
import { templateCommandRefusal } from "./script.js";
import { inNodeSpan, walkActors, type Walk } from "./walk.js";
import { nodeRecorder, recordedNode } from "./node-records.js";
import { replays } from "../fork/replay.js";
import { turnKey } from "../handler/records.js";
import { createMasker } from "../secrets.js";
import { ENV_INPUTS_BINDING, type EnvInputs } from "./bind.js";
import { ask, askRetrying, RemoteError } from "../ask.js";
import { Semaphore } from "../limit.js";
import { serve } from "../serve.js";
import { createLibrary, type TemplateLibrary } from "../library/library.js";
import { templateToolsOf } from "../library/template-tools.js";
import { createParseCache, type ParseCache } from "../../machines/language/parse-cache.js";

/** Deepest nesting of evaluations (steps, calls, nested inputs) in one task; guards against recursive templates. */
export const MAX_DEPTH = 32;

/** Handler calls of one task at once when the configuration does not say (`DIRIGENT_TASK_PARALLELISM`). */
export const DEFAULT_TASK_PARALLELISM = 64;

/** Longest the Evaluator waits for a `memory.match` answer. */
const MEMORY_TIMEOUT_MS = 30_000;

/** Time beyond a script's timeout the Evaluator waits for the Handler's answer. */
const SCRIPT_REPLY_MARGIN_MS = 15_000;

/** Evaluator configuration. */
export interface EvaluatorConfig {
  /** Evaluations run at once in this process. */
  concurrency: number;
  /** Longest an atomic task may take in a Handler. */
  taskTimeoutMs: number;
  /** `{{var}}` substitution: `strict` (default) fails on an unbound variable, `lenient` inserts `{{undefined:name}}`. */
  substitution?: "strict" | "lenient";
  /** Templates subtasks and evaluations are chosen from; an empty library by default. */
  library?: TemplateLibrary;
  /** Deepest subtask nesting. Default 5. */
  maxSubtaskDepth?: number;
  /** The process environment variables templates may read with `from="env:NAME"` (`DIRIGENT_ENV_INPUTS`); none by default. */
  envInputs?: EnvInputs;
  /** Handler calls (sessions, scripts) of one task running at once, whatever branch they belong to. Default 64. */
  taskParallelism?: number;
  /** Evaluations one director session may ask for. Default 5. */
  maxEvaluations?: number;
  /** Function templates of the library offered to atomic sessions as tools (`DIRIGENT_TEMPLATE_TOOLS`). None by default. */
  templateTools?: readonly string[];
  /** Continuation tools offered to atomic sessions. Default `subtask` and `input` (`spawn` costs prompt tokens: opt in). */
  continuationTools?: readonly ContinuationKind[];
  /** Longest wait for the answer to `request_user_input`. Default 10 minutes. */
  inputTimeoutMs?: number;
  /** Decompose a task that ran out of a resource through the Compiler. Default true. */
  reparse?: boolean;
  /**
   * The command allowlist (`DIRIGENT_COMMANDS`): a template whose commands name another program fails before
   * anything runs. Absent: not checked here (the Handler still checks each command it runs).
   */
  commands?: readonly string[];
  /** Templates parsed before, shared with the other roles of the system; absent: this Evaluator's own. */
  parseCache?: ParseCache;
  /**
   * The turns bucket: where the outcomes of waits for the user's input are recorded, so a re-run does not ask again, and
   * each node's record is written (actors/evaluator/node-records.ts).
   */
  records?: TaskStore | undefined;
  /** Secret values masked in node records and `node.finished` events (the API keys, the NATS password, …). */
  secrets?: readonly string[];
}

/** Starts the Evaluator role. */
export function startEvaluator(deps: ActorDeps, config: EvaluatorConfig): RoleHandle {
  const live = new Map<string, Set<Actor<typeof evaluationMachine>>>();
  /** The Director claim each live evaluation runs for. */
  const owners = new WeakMap<Actor<typeof evaluationMachine>, string>();
  /** Evaluations stopped because another owner took their task over. */
  const superseded = new WeakSet<Actor<typeof evaluationMachine>>();
  /** Tasks being cancelled whole, and whether this Evaluator is stopping: no node is aborted one by one then. */
  const cancelled = new Set<string>();
  let stopped = false;
  const library = config.library ?? createLibrary([]);
  // Checked at start: a name that is no function template of the library stops the Evaluator with the names.
  const templateTools = templateToolsOf(library, config.templateTools ?? []);
  const offered = templateTools.length > 0 ? { templateTools } : {};
  const parseCache = config.parseCache ?? createParseCache();
  // This Evaluator's evaluation actors: the machine provided once, its effects acting for this Evaluator's walks only.
  const actors = walkActors();
  const limits = {
    [RESERVED.maxDepth]: config.maxSubtaskDepth ?? DEFAULT_MAX_SUBTASK_DEPTH,
    [RESERVED.maxEvaluations]: config.maxEvaluations ?? DEFAULT_MAX_EVALUATIONS,
    ...(config.envInputs ? { [ENV_INPUTS_BINDING]: config.envInputs } : {}),
  };

  const mask = createMasker(config.secrets ?? []);
  const progress = (taskId: string, event: string, message: string, data?: Record<string, unknown>) =>
    publishProgress(deps, { type: "task.progress", taskId: taskId as Progress["taskId"], event, message, ...(data ? { data } : {}) });

  const evaluate = async (request: EvaluateRequest): Promise<EvaluateReply> => {
    const { taskId } = request;
    const reply = (result: TaskResult): EvaluateReply => ({ type: "evaluator.result", taskId, result });
    const parsed = parseCache.parse(request.xml);
    if (!parsed.ok) {
      const { message, line, col } = parsed.error;
      return reply({
        content: "",
        status: "FAILED",
        notes: {},
        error: { type: "XML_PARSE_ERROR", message, ...(line && col ? { location: { line, col } } : {}) },
      });
    }
    const document = parsed.document;
    const path = entryPath(document);
    const node = path === undefined ? undefined : nodeAt(document, path);
    if (path === undefined || !node)
      return reply({
        content: "",
        status: "FAILED",
        notes: {},
        error: { type: "XML_PARSE_ERROR", message: "the template defines no task to run" },
      });
    const refused = config.commands === undefined ? undefined : templateCommandRefusal(document, config.commands);
    if (refused !== undefined) return reply(inputFailure(refused));
    // Every Handler call of the task is charged to it and sent what is left of its budgets.
    const spend = createTaskSpend(request.budget, (spent) => progress(taskId, "task.usage", usageLine(spent), { ...spent }));
    const stream = request.stream === undefined ? {} : { stream: request.stream };
    // The task's own bound on Handler calls at once: its map branches, nested inputs and spawned subtasks share it.
    const calls = new Semaphore(config.taskParallelism ?? DEFAULT_TASK_PARALLELISM);
    /**
     * A Handler call of the node at `nodePath`, at most `taskParallelism` of the task at once. Aborted on its own (a
     * cancelled branch), it tells the Handler to stop; not when the whole evaluation stops for a cancel, a takeover
     * or a shutdown, where the work is cancelled with the task or continued by the next owner.
     */
    const handlerCall = <T>(nodePath: string, signal: AbortSignal, call: () => Promise<T>): Promise<T> =>
      calls.run(async () => {
        const abort = () => {
          if (!stopped && !superseded.has(actor) && !cancelled.has(taskId))
            deps.bus.publish(deps.subjects.nodeAbort, encode(NodeAbort, { type: "node.abort", taskId, nodePath }));
        };
        signal.addEventListener("abort", abort, { once: true });
        try {
          return await call();
        } finally {
          signal.removeEventListener("abort", abort);
        }
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
      progress: (event, message, data) => progress(taskId, event, message, data),
      ...(request.replay
        ? {
            replays: replays(request.replay, {
              taskId,
              store: config.records,
              log: deps.log,
              now: deps.now,
              progress: (event, message, data) => progress(taskId, event, message, data),
            }),
          }
        : {}),
    });
    // What the walk sends out waits for the node records sent before it (actors/evaluator/node-records.ts).
    const walk: Walk & InputRecords = records.gate({
      actors,
      inspect: deps.inspect,
      taskId,
      document,
      records,
      maxDepth: MAX_DEPTH,
      substitution: config.substitution ?? "strict",
      memoryMatch: async (query, signal) => {
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
      },
      progress: (event, message, data) => progress(taskId, event, message, data),
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
        // Asked again when the Handler goes silent (died, NATS restarted): the same occurrence continues from its record.
        const body = (attempt: number): ExecuteRequest => (request.fresh === true && attempt === 1 ? { ...execute, fresh: true } : execute);
        const answer = await handlerCall(nodePath, signal, () =>
          askRetrying(deps, Requests.execute, body, { timeoutMs: config.taskTimeoutMs, signal }),
        );
        records.session(nodePath, config.records ? turnKey(execute) : undefined, answer.result);
        return spend.charge(nodePath, answer.session ? { ...answer.result, session: answer.session } : answer.result, budgets);
      },
      waitForInput: (_nodePath, input, signal) => inputs.wait(input, signal),
      inputRecorded: inputs.inputRecorded,
      resume: async (nodePath, session, answer, signal, continuations) => {
        const budgets = spend.scopesOfSession(nodePath, session);
        const execute: ExecuteRequest = {
          type: "handler.execute",
          taskId,
          nodePath,
          prompt: "",
          resume: { session, answer },
          ...(continuations === undefined ? {} : { continuations }),
          ...offered,
          ...stream,
          ...spend.remaining(budgets),
          occurrence: occurrence(`r:${nodePath}`),
        };
        const reply = await handlerCall(nodePath, signal, () =>
          askRetrying(deps, Requests.execute, execute, { timeoutMs: config.taskTimeoutMs, signal }),
        );
        records.session(nodePath, config.records ? turnKey(execute) : undefined, reply.result);
        return spend.charge(nodePath, reply.session ? { ...reply.result, session: reply.session } : reply.result, budgets, session);
      },
      script: async (nodePath, command, signal) => {
        const request: ScriptRequest = { type: "handler.script", taskId, nodePath, ...command, occurrence: occurrence(`s:${nodePath}`) };
        // The Handler enforces the script's own timeout; the margin covers its kill grace and the round trip.
        return calls.run(() =>
          askRetrying(deps, Requests.script, request, { timeoutMs: command.timeoutMs + SCRIPT_REPLY_MARGIN_MS, signal }),
        );
      },
    });
    const actor = actors.create(walk, 0, 0, {
      ...inspectOption(deps, "evaluator", taskId),
      input: { taskId, path, node: summarize(node), env: extend(rootEnv(limits), request.inputs ?? {}), entry: true },
    });
    const set = live.get(taskId) ?? new Set();
    live.set(taskId, set.add(actor));
    if (request.owner !== undefined) {
      owners.set(actor, request.owner);
      // Another Director took the task over: an evaluation still running for the old owner (here or in another
      // Evaluator) stops, so two walks never advance one task. A fresh task has no older evaluation.
      if (request.fresh !== true)
        deps.bus.publish(deps.subjects.superseded, encode(Superseded, { type: "task.superseded", taskId, owner: request.owner }));
    }
    try {
      const done = toPromise(actor);
      const result = await inNodeSpan(taskId, path, summarize(node), () =>
        recordedNode(walk, path, node, async () => {
          actor.start().send(START);
          return { result: await done, env: actor.getSnapshot().context.env };
        }),
      );
      // Stopped for a newer owner: not an outcome of the task. Should the sender still hold the task, it asks again.
      if (superseded.has(actor)) throw new RemoteError("UNAVAILABLE", `the evaluation of task '${taskId}' was superseded by a newer owner`);
      return reply(spend.withTotals(result));
    } finally {
      set.delete(actor);
      if (set.size === 0) {
        live.delete(taskId);
        cancelled.delete(taskId);
      }
    }
  };

  const subscriptions = [
    serveEvaluate(),
    deps.bus.subscribe(deps.subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (!decoded.ok) return;
      const taskId = decoded.value.taskId;
      if (!live.has(taskId)) return;
      // Kept until the task's last evaluation here ends: aborts reaching its calls later are part of the cancel too.
      cancelled.add(taskId);
      for (const actor of live.get(taskId) ?? []) actor.send({ type: "evaluation.cancel" });
    }),
    deps.bus.subscribe(deps.subjects.superseded, (msg) => {
      const decoded = decode(Superseded, msg.data);
      if (!decoded.ok) return;
      for (const actor of live.get(decoded.value.taskId) ?? []) {
        const owner = owners.get(actor);
        if (owner !== undefined && owner !== decoded.value.owner) {
          deps.log.info({ taskId: decoded.value.taskId, owner, newOwner: decoded.value.owner }, "evaluation superseded: stopping it");
          superseded.add(actor);
          actor.send({ type: "evaluation.cancel" });
        }
      }
    }),
  ];

  function serveEvaluate() {
    return serve(deps, Requests.evaluate, {
      queue: deps.subjects.queue("evaluator"),
      concurrency: config.concurrency,
      local: true,
      handle: evaluate,
    });
  }

  return {
    role: "evaluator",
    async stop() {
      stopped = true;
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
      for (const set of live.values()) for (const actor of set) actor.send({ type: "evaluation.cancel" });
    },
  };
}
