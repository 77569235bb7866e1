/**
 * An atomic task in a walk: its prompt substituted (`{{var}}` and inline calls), its context worked out, one Handler
 * session run with the continuation tools it is offered, and its answer put in its `<output_format>` (a
 * `type="evaluator"` task's read as an evaluation).
 */
import type { SuspendedResult } from "../../../machines/evaluator/continuation.js";
import type { Env } from "../../../machines/language/env.js";
import type { TaskNode } from "../../../machines/language/ast.js";
import type { ContinuationKind, TaskResult } from "../../../protocol/index.js";
import { budgetScopes } from "../budget.js";
import { applyOutputFormat, atomicContext, contextFields, returnsOf, walkContextDeps, withContextNotes } from "../context.js";
import type { InlineCall } from "../inline.js";
import { asEvaluation, prepareAtomic } from "../nodes.js";
import type { Walk } from "../document-walk.js";

/**
 * Continuation tools offered to an atomic task: the configured ones (`run_subtask`: past the depth limit a call
 * fails the task with subtask_failure, so the limit is visible; `request_user_input`), plus
 * `request_evaluation` for subtype `director`.
 */
export function continuationsFor(walk: Pick<Walk, "continuationTools">, node: TaskNode): ContinuationKind[] {
  const kinds = walk.continuationTools.filter((k) => k !== "evaluation");
  // `type="director"` is an atomic director, so templates written with that type (before the subtype) still direct.
  return node.subtype === "director" || node.type === "director" ? [...kinds, "evaluation"] : kinds;
}

/** Runs the atomic task `node` at `path` in `env`; `callInline` evaluates an inline call of its text. */
export async function runAtomicTask(
  walk: Walk,
  node: TaskNode,
  path: string,
  env: Env,
  callInline: (c: InlineCall) => Promise<TaskResult>,
  signal: AbortSignal,
): Promise<SuspendedResult> {
  const prepared = await prepareAtomic(node, env, callInline, walk.substitution);
  if (!prepared.ok) return prepared.result;
  const context = await atomicContext(walkContextDeps(walk, path), node, env, prepared.fields.prompt, signal);
  if (!context.ok) return context.result;
  // A promise callback, not an await, takes the result: a suspended frame would be held while the model runs.
  return walk
    .execute(
      path,
      // Object.assign, not a literal that starts with a spread: in this V8 (Node 20) such a literal gets a hidden class
      // of its own, about 0.3 KB more for each call held. The keys come out in the same order.
      Object.assign({}, prepared.fields, contextFields(context.value), {
        continuations: continuationsFor(walk, node),
        ...(walk.templateTools?.length ? { templateTools: [...walk.templateTools] } : {}),
      }),
      signal,
      budgetScopes(env),
    )
    .then((result) => {
      const formatted = applyOutputFormat(node, withContextNotes(result, context.value), returnsOf(walk.document, path));
      return node.type === "evaluator" ? asEvaluation(formatted) : formatted;
    });
}
