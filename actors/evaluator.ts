/**
 * The Evaluator role: walks a task template ({@link evaluationMachine}); sole owner of `{{var}}` substitution.
 * Serves `<root>.evaluator.evaluate` (queue group `evaluator`); asks Handlers on `<root>.handler.execute`;
 * reports steps as progress; aborts its work when the task is cancelled.
 */
import { createActor, fromPromise, toPromise, type Actor } from "xstate";
import { evaluationMachine } from "../machines/evaluation.js";
import {
  CancelBroadcast,
  decode,
  encode,
  EvaluateRequest,
  ExecuteReply,
  Progress,
  type EvaluateReply,
  type ExecuteRequest,
  type TaskInputs,
  type TaskResult,
} from "../protocol/index.js";
import type { TaskNode } from "../protocol/index.js";
import type { ActorDeps, RoleHandle } from "./deps.js";
import { ask, serve } from "./serve.js";
import { parseTemplate } from "./template/parse.js";
import { resolvePath, substitute } from "./template/substitute.js";

/** Evaluator configuration. */
export interface EvaluatorConfig {
  /** Evaluations run at once in this process. */
  concurrency: number;
  /** Longest an atomic task may take in a Handler. */
  taskTimeoutMs: number;
}

/** The prompt-bearing fields of an atomic task, before substitution. */
function atomicFields(node: TaskNode): { prompt: string; system?: string; model?: string } {
  const prompt = [node.description, node.instructions].filter((t): t is string => !!t && t.trim() !== "").join("\n\n");
  return {
    prompt,
    ...(node.system ? { system: node.system } : {}),
    ...(node.model?.name ? { model: node.model.name.trim() } : {}),
  };
}

/** Substitutes `{{var}}` in every field (strict: a missing variable fails the task, C13). */
export function prepareAtomic(node: TaskNode, inputs: TaskInputs): { ok: true; fields: ReturnType<typeof atomicFields> } | { ok: false; result: TaskResult } {
  const fields = atomicFields(node);
  const bindings = bindInputs(node, inputs);
  const lookup = (path: string) => resolvePath(bindings, path);
  const out: Record<string, string> = {};
  const missing = new Set<string>();
  for (const [key, text] of Object.entries(fields)) {
    const done = substitute(text, lookup, "strict");
    if (done.ok) out[key] = done.text;
    else for (const name of done.missing) missing.add(name);
  }
  if (missing.size > 0) {
    const names = [...missing].map((m) => `'${m}'`).join(", ");
    return {
      ok: false,
      result: {
        content: "",
        status: "FAILED",
        notes: {},
        error: { type: "TASK_FAILURE", reason: "input_validation_failure", message: `missing required input: ${names}`, details: { missing: [...missing] } },
      },
    };
  }
  return { ok: true, fields: out as ReturnType<typeof atomicFields> };
}

/** The root environment of a node: submitted inputs, plus the node's `<inputs>` (literal values or `from` references). */
function bindInputs(node: TaskNode, inputs: TaskInputs): Record<string, unknown> {
  const bindings: Record<string, unknown> = { ...inputs };
  for (const input of node.inputs ?? []) {
    if (input.from !== undefined) {
      const found = resolvePath(inputs, input.from);
      if (found.found) bindings[input.name] = found.value;
    } else if (input.value !== undefined && input.value.trim() !== "" && !(input.name in inputs)) {
      bindings[input.name] = input.value.trim();
    }
  }
  return bindings;
}

/** Starts the Evaluator role. */
export function startEvaluator(deps: ActorDeps, config: EvaluatorConfig): RoleHandle {
  const live = new Map<string, Set<Actor<typeof evaluationMachine>>>();

  const progress = (taskId: string, event: string, message: string, data?: Record<string, unknown>) =>
    deps.bus.publish(
      deps.subjects.progress(taskId),
      encode(Progress, { type: "task.progress", taskId: taskId as Progress["taskId"], event, message, ...(data ? { data } : {}) }),
    );

  const evaluate = async (request: EvaluateRequest): Promise<EvaluateReply> => {
    const { taskId } = request;
    const reply = (result: TaskResult): EvaluateReply => ({ type: "evaluator.result", taskId, result });
    const parsed = parseTemplate(request.xml);
    if (!parsed.ok) {
      const { message, line, col } = parsed.error;
      return reply({
        content: "",
        status: "FAILED",
        notes: {},
        error: { type: "XML_PARSE_ERROR", message, ...(line && col ? { location: { line, col } } : {}) },
      });
    }
    const entry = parsed.document.entry;
    if (!entry) return reply({ content: "", status: "FAILED", notes: {}, error: { type: "XML_PARSE_ERROR", message: "the template defines no task to run" } });
    const machine = evaluationMachine.provide({
      actions: { progress: (_, p) => progress(taskId, p.event, p.message, p.data) },
      actors: {
        runAtomic: fromPromise(async ({ input, signal }) => {
          // The machine routes by path; the shell resolves the path to the typed node (only the entry, for now).
          if (entry.kind !== "task") throw new Error(`node ${input.nodePath} is not a task`);
          const prepared = prepareAtomic(entry, input.inputs);
          if (!prepared.ok) return prepared.result;
          const execute: ExecuteRequest = { type: "handler.execute", taskId, nodePath: input.nodePath, ...prepared.fields };
          const answer = await ask(deps, deps.subjects.execute, execute, ExecuteReply, { timeoutMs: config.taskTimeoutMs, signal });
          return answer.result;
        }),
      },
    });
    const actor = createActor(machine, { input: { taskId, node: entry, inputs: request.inputs } });
    const set = live.get(taskId) ?? new Set();
    live.set(taskId, set.add(actor));
    try {
      const done = toPromise(actor);
      actor.start();
      return reply(await done);
    } finally {
      set.delete(actor);
      if (set.size === 0) live.delete(taskId);
    }
  };

  const subscriptions = [
    serveEvaluate(),
    deps.bus.subscribe(deps.subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (decoded.ok) for (const actor of live.get(decoded.value.taskId) ?? []) actor.send({ type: "evaluation.cancel" });
    }),
  ];

  function serveEvaluate() {
    return serve(deps, {
      subject: deps.subjects.evaluate,
      queue: deps.subjects.queue("evaluator"),
      schema: EvaluateRequest,
      concurrency: config.concurrency,
      handle: evaluate,
    });
  }

  return {
    role: "evaluator",
    async stop() {
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
      for (const set of live.values()) for (const actor of set) actor.send({ type: "evaluation.cancel" });
    },
  };
}
