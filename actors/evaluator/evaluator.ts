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
  Progress,
  Requests,
  type EvaluateReply,
  type TaskResult,
  type TaskId,
} from "../../protocol/index.js";
import type { ActorDeps, RoleHandle } from "../deps.js";
import { settled } from "../settled.js";
import { inspectOption } from "../inspect-option.js";
import { START } from "../../machines/invoke-events.js";
import { publishProgress } from "../local.js";
import { summarize } from "./nodes.js";
import { inNodeSpan, walkActors } from "./walk.js";
import { recordedNode } from "./node-records.js";
import { createMasker } from "../secrets.js";
import { ENV_INPUTS_BINDING } from "./bind.js";
import { RemoteError } from "../ask.js";
import { serve } from "../serve.js";
import { createLibrary } from "../library/library.js";
import { templateToolsOf } from "../library/template-tools.js";
import { createParseCache } from "../../machines/language/parse-cache.js";
import type { EvaluatorConfig } from "./config.js";
import { commandCheck } from "./script.js";
import { taskEntry, taskWalk, type TaskWalkRole } from "./task-walk.js";

export type { EvaluatorConfig } from "./config.js";

/** Starts the Evaluator role. */
export function startEvaluator(deps: ActorDeps, config: EvaluatorConfig): RoleHandle {
  const live = new Map<TaskId, Set<Actor<typeof evaluationMachine>>>();
  /** The Director claim each live evaluation runs for. */
  const owners = new WeakMap<Actor<typeof evaluationMachine>, string>();
  /** Evaluations stopped because another owner took their task over. */
  const superseded = new WeakSet<Actor<typeof evaluationMachine>>();
  /** Tasks being cancelled whole, and whether this Evaluator is stopping: no node is aborted one by one then. */
  const cancelled = new Set<TaskId>();
  let stopped = false;
  const library = config.library ?? createLibrary([]);
  const parseCache = config.parseCache ?? createParseCache();
  const commandRefusal = config.commands === undefined ? undefined : commandCheck(config.commands);
  // This Evaluator's evaluation actors: the machine provided once, its effects acting for this Evaluator's walks only.
  const actors = walkActors();
  const limits = {
    [RESERVED.maxDepth]: config.maxSubtaskDepth ?? DEFAULT_MAX_SUBTASK_DEPTH,
    [RESERVED.maxEvaluations]: config.maxEvaluations ?? DEFAULT_MAX_EVALUATIONS,
    ...(config.envInputs ? { [ENV_INPUTS_BINDING]: config.envInputs } : {}),
  };

  const role: TaskWalkRole = {
    deps,
    config,
    actors,
    library,
    // Checked at start: a name that is no function template of the library stops the Evaluator with the names.
    templateTools: templateToolsOf(library, config.templateTools ?? []),
    mask: createMasker(config.secrets ?? []),
    progress: (taskId, event, message, data) =>
      publishProgress(deps, { type: "task.progress", taskId: taskId as Progress["taskId"], event, message, ...(data ? { data } : {}) }),
  };

  const evaluate = async (request: EvaluateRequest): Promise<EvaluateReply> => {
    const { taskId } = request;
    const reply = (result: TaskResult): EvaluateReply => ({ type: "evaluator.result", taskId, result });
    const entry = taskEntry(parseCache.parse(request.xml), commandRefusal);
    if ("failure" in entry) return reply(entry.failure);
    const { document, path, node } = entry;
    const { walk, spend } = taskWalk(role, request, document, () => stopped || superseded.has(actor) || cancelled.has(taskId));
    const { actor, release } = actors.create(walk, 0, 0, {
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
    const ended = () => {
      release();
      set.delete(actor);
      if (set.size === 0) {
        live.delete(taskId);
        cancelled.delete(taskId);
      }
    };
    return settled(
      () => {
        const done = toPromise(actor);
        return inNodeSpan(taskId, path, summarize(node), () =>
          recordedNode(walk, path, node, async () => {
            actor.start().send(START);
            return done.then((result) => ({ result, env: actor.getSnapshot().context.env }));
          }),
        );
      },
      ended,
      (result) => {
        // Stopped for a newer owner: not an outcome of the task. Should the sender still hold the task, it asks again.
        if (superseded.has(actor))
          throw new RemoteError("UNAVAILABLE", `the evaluation of task '${taskId}' was superseded by a newer owner`);
        return reply(spend.withTotals(result));
      },
    );
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
