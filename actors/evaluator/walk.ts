/**
 * The effects of the evaluation machines for one document: a node path is resolved to its typed AST node, its
 * `<inputs>` are bound, an atomic task is substituted and sent to a Handler, a call binds its arguments, and a
 * step of a composite is evaluated by a nested evaluation actor ({@link evaluateNode}), a child of the evaluation that
 * started it: one actor system per task. The effects find what they act for (the walk, its depth) in a map owned by
 * the Evaluator ({@link walkActors}), by the key each machine carries in its context (`scopeKey`).
 */
import { assign, createActor, fromCallback, fromPromise, toPromise } from "xstate";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import { find, type Env } from "../../machines/language/env.js";
import { directorEvaluatorMachine } from "../../machines/evaluator/loop.js";
import { boundNow, evaluationMachine, type BindOutcome, type EvalNode, type Scoped } from "../../machines/evaluator/evaluation.js";
import { START } from "../../machines/invoke-events.js";
import { reduceMachine, type ResolvedItems } from "../../machines/evaluator/reduce.js";
import { sequentialMachine } from "../../machines/evaluator/sequential.js";
import { mapMachine, type BranchCommand } from "../../machines/evaluator/map.js";
import { substitute } from "../../machines/language/substitute.js";
import type { TaskNode, TemplateDocument } from "../../machines/language/ast.js";
import { taskFailure, type TaskResult, type TaskId } from "../../protocol/index.js";
import { inSpan } from "../tracing.js";
import { settled } from "../settled.js";
import { bindInputs, bindInputsNow, resolveItems, type EvaluateInputTask } from "./bind.js";
import { bindArgs, runCond } from "./calls.js";
import { provideCheckmate } from "./checkmate.js";
import { applyOutputFormat, returnsOf } from "./context.js";
import { provideContinuationFor, type ContinuationScope } from "./continuation.js";
import { scopedWalk, type Walk, type WalkActors } from "./document-walk.js";
import { MAX_INLINE_DEPTH, type InlineCall } from "./inline.js";
import { recordedNode } from "./node-records.js";
import { criteriaText, entryPath, inputFailure, nodeAt, summarize } from "./nodes.js";
import { reparseNode } from "./reparse.js";
import { continuationsFor, runAtomicTask } from "./runners/atomic.js";
import { runBranches } from "./runners/map.js";
import { runMemoryTask } from "./runners/memory.js";
import { runScriptExecution, runScriptTask } from "./script.js";

export { argumentValue } from "./calls.js";
export { reservedOf, scopedWalk, type Walk, type WalkActors } from "./document-walk.js";

function missingNode(path: string): TaskResult {
  return taskFailure("unexpected_error", `no executable node at path ${path}`);
}

/**
 * Evaluates the node at `path` in `env` with a nested evaluation actor, a child of `walk.parent` in the task's actor
 * system (the task's root without one); aborting `signal` cancels it.
 */
export async function evaluateNode(
  walk: Walk,
  path: string,
  env: Env,
  depth: number,
  signal: AbortSignal,
  inline = 0,
  entry = false,
): Promise<TaskResult> {
  const node = nodeAt(walk.document, path);
  if (!node) return missingNode(path);
  if (depth > walk.maxDepth) {
    return taskFailure("execution_halted", `nesting deeper than ${walk.maxDepth} at ${path}`);
  }
  const summary = summarize(node);
  return inNodeSpan(walk.taskId, path, summary, () =>
    recordedNode(walk, path, node, async () => {
      const { actor, release } = walk.actors.create(walk, depth, inline, {
        input: { taskId: walk.taskId, path, node: summary, env, entry },
      });
      const cancel = () => actor.send({ type: "evaluation.cancel" });
      signal.addEventListener("abort", cancel, { once: true });
      const ended = () => {
        signal.removeEventListener("abort", cancel);
        release();
      };
      return settled(
        () => {
          const done = toPromise(actor);
          actor.start().send(START);
          return done;
        },
        ended,
        (result) => ({ result, env: actor.getSnapshot().context.env }),
      );
    }),
  );
}

/**
 * Runs the evaluation of one node in its span (`evaluate <type>`, docs/traces.md); the actors it starts (its steps,
 * its requests) run inside it.
 */
export function inNodeSpan(taskId: TaskId, path: string, node: EvalNode, evaluate: () => Promise<TaskResult>): Promise<TaskResult> {
  const type = node.type ?? node.kind;
  const attributes = { "dirigent.task_id": taskId, "dirigent.node_path": path, "dirigent.node.type": type };
  return inSpan(`evaluate ${type}`, { attributes }, async (span) => {
    const result = await evaluate();
    span.span.setAttribute("dirigent.result.status", result.status);
    return result;
  });
}

/** Evaluates the entry node of another document (a library template) as the document's entry, in `env`. */
export function evaluateDocument(
  walk: Walk,
  document: TemplateDocument,
  env: Env,
  depth: number,
  signal: AbortSignal,
  scope: string,
): Promise<TaskResult> {
  const path = entryPath(document);
  if (path === undefined) return Promise.resolve(missingNode("(entry)"));
  return evaluateNode(scopedWalk(walk, document, scope), path, env, depth, signal, 0, true);
}

/** An inline call `{{f(…)}}` in the text of the node at `path`: the function template's body, one inline level deeper. */
async function callInlineAt(walk: Walk, c: InlineCall, env: Env, path: string, depth: number, inline: number, signal: AbortSignal) {
  if (inline >= MAX_INLINE_DEPTH) return inputFailure(`inline call ${c.template}() nested deeper than ${MAX_INLINE_DEPTH}`);
  const bound = await bindArgs(walk, c.template, c.args, env, depth, signal, `${path}/call:`);
  if ("result" in bound) return bound.result;
  return evaluateNode(bound.walk, `templates.${bound.template}.body`, bound.env, depth + 1, signal, inline + 1);
}

/**
 * What the effects of one node's evaluation act for: the walk (its `parent` the node's evaluation actor), its nesting
 * depth, the inline calls around it. Kept by {@link walkActors} under the key the node's machines carry (`scopeKey`).
 */
type NodeScope = { readonly walk: Walk; readonly depth: number; readonly inline: number; continuation?: ContinuationScope };

/** The effects' view of the node whose machines carry `scopeKey`. */
type ScopeOf = (scopeKey: string | undefined) => NodeScope;

/** Evaluates the nested task of an input of a node of `scope`'s walk, one level deeper. */
function inputTasksOf({ walk, depth }: NodeScope, signal: AbortSignal): EvaluateInputTask {
  return (path, env, stop) => evaluateNode(walk, path, env, depth + 1, stop ?? signal);
}

function taskAt(walk: Walk, path: string): TaskNode {
  const node = nodeAt(walk.document, path);
  if (node?.kind !== "task") throw new Error(`node ${path} is not a task`);
  return node;
}

/**
 * The evaluation actors of one Evaluator: the machine is provided once (building it is costly), and its effects act
 * for the scope their machine's `scopeKey` names, in a map this Evaluator alone owns: an entry is made with each
 * node's evaluation actor and deleted when it ends.
 */
export function walkActors(): WalkActors {
  const scopes = new Map<string, NodeScope>();
  let made = 0;
  const machine = buildWalkMachine((scopeKey) => {
    const scope = scopeKey === undefined ? undefined : scopes.get(scopeKey);
    if (scope === undefined) throw new Error("an evaluation actor runs outside a walk");
    return scope;
  });
  return {
    create(walk, depth, inline, options) {
      const scopeKey = `${walk.taskId}#${++made}`;
      // Neither object starts with a spread that is added to: such a literal gets a hidden class of its own in this
      // V8 (Node 20), about 0.3 KB more per object, held while the node is evaluated.
      const input = { scopeKey, ...options.input };
      const actor = createActor(machine, walk.parent === undefined ? { ...options, input } : { input, parent: walk.parent, id: scopeKey });
      // Set before the actor starts: its machine waits in `idle` until START, so no effect has run yet.
      scopes.set(scopeKey, { walk: Object.assign({}, walk, { parent: actor }), depth, inline });
      return { actor, release: () => scopes.delete(scopeKey) };
    },
    evaluate: evaluateNode,
  };
}

function continuationScope(scope: NodeScope): ContinuationScope {
  const { walk, depth } = scope;
  return (scope.continuation ??= {
    walk: {
      library: walk.library,
      script: walk.script,
      // The resumed session is offered the continuation tools its first request had: it may ask again.
      resume: (path, session, answer, signal) => walk.resume(path, session, answer, signal, continuationsFor(walk, taskAt(walk, path))),
      waitForInput: walk.waitForInput,
      progress: walk.progress,
      evaluateDocument: (document, env, signal, docScope) => evaluateDocument(walk, document, env, depth + 1, signal, docScope),
      // Already substituted strictly before the session ran (prepareAtomic), so lenient here cannot differ.
      criteria: (path, env) => {
        const text = criteriaText(taskAt(walk, path));
        const done = text === undefined ? undefined : substitute(text, (p) => find(env, p), "lenient");
        return done?.ok ? done.text : text;
      },
    },
    applyFormat: (path, result) =>
      result.status === "COMPLETE" ? applyOutputFormat(taskAt(walk, path), result, returnsOf(walk.document, path)) : result,
  });
}

function buildWalkMachine(scopeOf: ScopeOf) {
  const progress = (
    { context }: { context: { scopeKey?: string | undefined } },
    p: { event: string; message: string; data?: Record<string, unknown> },
  ) => scopeOf(context.scopeKey).walk.progress(p.event, p.message, p.data);
  const runStep = fromPromise<TaskResult, { path: string; env: Env } & Scoped>(({ input, signal }) => {
    const { walk, depth, inline } = scopeOf(input.scopeKey);
    return evaluateNode(walk, input.path, input.env, depth + 1, signal, inline);
  });
  return evaluationMachine.provide({
    actions: {
      progress,
      bindNow: assign(({ context }) => {
        const { walk } = scopeOf(context.scopeKey);
        return boundNow(() => bindInputsNow(taskAt(walk, context.path), context.env, context.entry));
      }),
    },
    actors: {
      bindInputs: fromPromise<BindOutcome, { path: string; env: Env; entry: boolean } & Scoped>(({ input, signal }) => {
        const { walk } = scopeOf(input.scopeKey);
        return bindInputs(
          inputTasksOf(scopeOf(input.scopeKey), signal),
          taskAt(walk, input.path),
          input.path,
          input.env,
          input.entry,
          signal,
        );
      }),
      runAtomic: fromPromise<SuspendedResult, { path: string; env: Env } & Scoped>(async ({ input, signal }) => {
        const { walk, depth, inline } = scopeOf(input.scopeKey);
        const callInline = (c: InlineCall) => callInlineAt(walk, c, input.env, input.path, depth, inline, signal);
        return runAtomicTask(walk, taskAt(walk, input.path), input.path, input.env, callInline, signal);
      }),
      reparse: fromPromise<TaskResult, { path: string; env: Env; result: TaskResult } & Scoped>(async ({ input, signal }) => {
        const { walk, depth } = scopeOf(input.scopeKey);
        const compile = walk.compile;
        if (!compile) return input.result;
        const reparseWalk = {
          ...walk,
          compile,
          evaluateDocument: (document: TemplateDocument, env: Env, s: AbortSignal, scope: string) =>
            evaluateDocument(walk, document, env, depth + 1, s, scope),
        };
        return reparseNode(reparseWalk, taskAt(walk, input.path), input.path, input.env, input.result, signal);
      }),
      runRef: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async ({ input, signal }) => {
        const { walk, depth } = scopeOf(input.scopeKey);
        const ref = taskAt(walk, input.path).ref ?? "";
        const template = walk.library.get(ref);
        if (!template) return inputFailure(`no template named '${ref}' in the template library (--templates)`, { ref });
        const result = await evaluateDocument(walk, template.document, input.env, depth + 1, signal, `${input.path}/ref:`);
        return { ...result, notes: { ...result.notes, template_used: template.name } };
      }),
      runCall: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async ({ input, signal }) => {
        const { walk, depth, inline } = scopeOf(input.scopeKey);
        const node = nodeAt(walk.document, input.path);
        if (node?.kind !== "call") return missingNode(input.path);
        const args = node.args.map((arg, i) => ({
          ...(arg.name ? { name: arg.name } : {}),
          ...(typeof arg.value === "string" ? { text: arg.value } : { nodePath: `${input.path}.args.${i}.value` }),
        }));
        const bound = await bindArgs(walk, node.templateName, args, input.env, depth, signal, `${input.path}/call:`);
        if ("result" in bound) return bound.result;
        return evaluateNode(bound.walk, `templates.${bound.template}.body`, bound.env, depth + 1, signal, inline);
      }),
      runCond: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async ({ input, signal }) => {
        const { walk, depth } = scopeOf(input.scopeKey);
        const node = nodeAt(walk.document, input.path);
        if (node?.kind !== "cond") return missingNode(input.path);
        return runCond(walk, node, input.path, input.env, depth, signal);
      }),
      runMemory: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(({ input, signal }) => {
        const { walk, depth, inline } = scopeOf(input.scopeKey);
        const call = (c: InlineCall) => callInlineAt(walk, c, input.env, input.path, depth, inline, signal);
        return runMemoryTask(taskAt(walk, input.path), input.env, walk.memoryMatch, call, walk.substitution ?? "strict", signal);
      }),
      runScript: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(({ input, signal }) => {
        const { walk } = scopeOf(input.scopeKey);
        return runScriptTask(walk.script, taskAt(walk, input.path), input.path, input.env, signal);
      }),
      continuation: provideContinuationFor((scopeKey) => continuationScope(scopeOf(scopeKey))),
      sequential: sequentialMachine.provide({ actions: { progress }, actors: { runStep } }),
      map: mapMachine.provide({
        actions: { progress },
        actors: {
          branches: fromCallback<BranchCommand, Scoped>(({ receive, sendBack, input }) => {
            const { walk, depth, inline } = scopeOf(input.scopeKey);
            return runBranches(
              receive,
              sendBack,
              (path, env, signal, scope) =>
                evaluateNode(scope === undefined ? walk : scopedWalk(walk, walk.document, scope), path, env, depth + 1, signal, inline),
              walk.reserve,
            );
          }),
        },
      }),
      directorEvaluator: directorEvaluatorMachine.provide({
        actions: { progress },
        actors: {
          runStep,
          runScript: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async ({ input, signal }) => {
            const { walk, depth, inline } = scopeOf(input.scopeKey);
            const loopPath = input.path.replace(/\.scriptExecution$/, "");
            const se = taskAt(walk, loopPath).scriptExecution;
            if (!se) return inputFailure("the loop has no <script_execution>");
            const evaluate = (path: string, env: Env) => evaluateNode(walk, path, env, depth + 1, signal, inline);
            return runScriptExecution(walk.script, evaluate, se, input.path, input.env, signal);
          }),
        },
      }),
      checkmate: provideCheckmate((scopeKey) => scopeOf(scopeKey).walk, taskAt),
      reduce: reduceMachine.provide({
        actions: { progress },
        actors: {
          runStep,
          resolveItems: fromPromise<ResolvedItems, { path: string; env: Env } & Scoped>(({ input, signal }) => {
            const { walk } = scopeOf(input.scopeKey);
            return resolveItems(inputTasksOf(scopeOf(input.scopeKey), signal), taskAt(walk, input.path), input.path, input.env, signal);
          }),
        },
      }),
    },
  });
}
