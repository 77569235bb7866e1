/**
 * The effects of the evaluation machines for one document: a node path is resolved to its typed AST node, its
 * `<inputs>` are bound, an atomic task is substituted and sent to a Handler, a call binds its arguments, and a
 * step of a composite is evaluated by a nested evaluation actor ({@link evaluateNode}).
 */
import { assign, createActor, fromPromise, toPromise, type Actor, type InspectionEvent } from "xstate";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import { extend, find, flatten, type Env } from "../../machines/language/env.js";
import { directorEvaluatorMachine } from "../../machines/evaluator/loop.js";
import { boundNow, evaluationMachine, type BindOutcome, type EvaluationInput } from "../../machines/evaluator/evaluation.js";
import { reduceMachine, type ResolvedItems } from "../../machines/evaluator/reduce.js";
import { sequentialMachine } from "../../machines/evaluator/sequential.js";
import { mapMachine, type BranchInput } from "../../machines/evaluator/map.js";
import {
  taskFailure,
  type CompileReply,
  type CompileRequest,
  type ContinuationKind,
  type InputRequest,
  type SessionState,
  type TaskResult,
  type TemplateTool,
} from "../../protocol/index.js";
import { bindInputs, bindInputsNow, resolveItems, type EvaluateInputTask } from "./bind.js";
import { BUDGET_BINDING, budgetScopes, type BudgetScope, type TaskSpend } from "./budget.js";
import { reparseNode } from "./reparse.js";
import { provideContinuationFor, type ContinuationScope } from "./continuation.js";
import { provideCheckmate } from "./checkmate.js";
import {
  applyOutputFormat,
  atomicContext,
  contextFields,
  returnsOf,
  walkContextDeps,
  withContextNotes,
  type ContextDeps,
} from "./context.js";
import { MAX_INLINE_DEPTH, type InlineCall } from "./inline.js";
import { asEvaluation, criteriaText, entryPath, inputFailure, nodeAt, prepareAtomic, summarize, type AtomicFields } from "./nodes.js";
import { runScriptExecution, runScriptTask, type RunCommand } from "./script.js";
import { runMemoryTask } from "./memory-task.js";
import { bindArgs, runCond } from "./calls.js";

export { argumentValue } from "./calls.js";
import { actorScopes } from "../actor-scopes.js";
import type { TemplateLibrary } from "../library/library.js";
import { inspectOption, type InspectHook } from "../inspect-option.js";
import { substitute, type SubstituteMode } from "../../machines/language/substitute.js";
import type { TaskNode, TemplateDocument } from "../../machines/language/ast.js";

/** The Evaluator's reserved (`$`) bindings of `env`; they cross into function templates and subtasks. */
export function reservedOf(env: Env): Record<string, unknown> {
  return Object.fromEntries(Object.entries(flatten(env)).filter(([name]) => name.startsWith("$")));
}

/** What a walk of one document needs from the Evaluator role. */
export interface Walk {
  /** The evaluation actors of the Evaluator running the walk ({@link walkActors}, one per Evaluator). */
  actors: WalkActors;
  /** XState inspection of the nested evaluation actors (the Evaluator's `deps.inspect`). */
  inspect?: InspectHook | undefined;
  taskId: string;
  document: TemplateDocument;
  /** Publish a progress report of the task. */
  progress(event: string, message: string, data?: Record<string, unknown>): void;
  /** Run substituted atomic fields in a Handler; a CONTINUATION result carries the suspended session. */
  execute(
    path: string,
    fields: AtomicFields & { continuations?: ContinuationKind[]; templateTools?: TemplateTool[] },
    signal: AbortSignal,
    budgets?: readonly BudgetScope[],
  ): Promise<SuspendedResult>;
  /** Wait for the user's answer to a `request_user_input` question of the task. */
  waitForInput(path: string, request: InputRequest, signal: AbortSignal): Promise<string>;
  /**
   * Resume a suspended Handler session with `answer` as the response to its pending tool call; `continuations`: the
   * continuation tools the resumed session is offered again (it may ask for another subtask).
   */
  resume(
    path: string,
    session: SessionState,
    answer: string,
    signal: AbortSignal,
    continuations?: ContinuationKind[],
  ): Promise<SuspendedResult>;
  /** Templates subtasks and evaluations are chosen from. */
  library: TemplateLibrary;
  /** A map branch's share of the task's budgets (absent: branches share them unreserved). */
  reserve?: TaskSpend["reserve"];
  /** Library templates offered as tools to every atomic session of the walk (`DIRIGENT_TEMPLATE_TOOLS`). */
  templateTools?: readonly TemplateTool[];
  /** Continuation tools offered to every atomic session (`subtask`, `input`); directors also get `evaluation`. */
  continuationTools: readonly ContinuationKind[];
  /** Ask the Compiler to decompose a node; absent: no reparsing. */
  compile?: (request: CompileRequest, signal: AbortSignal) => Promise<CompileReply>;
  /** Run the argv of a script in a Handler. */
  script: RunCommand;
  /** Deepest nesting of evaluations (steps, calls, nested inputs) before the walk fails. */
  maxDepth: number;
  /** `{{var}}` substitution of prompts and call arguments: `strict` (default) or `lenient` (the Python marker). */
  substitution?: SubstituteMode;
  /** Associative matching by the Memory role, for a task's context (`fresh_context`, `subset`, file_paths queries). */
  memoryMatch?: ContextDeps["memoryMatch"];
}

const PATH_KEYS: readonly string[] = ["nodePath", "mapPath"];

function missingNode(path: string): TaskResult {
  return taskFailure("unexpected_error", `no executable node at path ${path}`);
}

/** Evaluates the node at `path` in `env` with a nested evaluation actor; aborting `signal` cancels it. */
export async function evaluateNode(
  walk: Walk,
  path: string,
  env: Env,
  depth: number,
  signal: AbortSignal,
  inline = 0,
  entry = false,
): Promise<TaskResult> {
  // XState starts an invoked child before the parent's own entry actions run on its first step; yielding once
  // lets the parent report (e.g. `step 1/3`) before anything the nested evaluation reports.
  await Promise.resolve();
  const node = nodeAt(walk.document, path);
  if (!node) return missingNode(path);
  if (depth > walk.maxDepth) {
    return taskFailure("execution_halted", `nesting deeper than ${walk.maxDepth} at ${path}`);
  }
  const actor = walk.actors.create(walk, depth, inline, {
    ...inspectOption(walk, "evaluator", walk.taskId),
    input: { taskId: walk.taskId, path, node: summarize(node), env, entry },
  });
  const cancel = () => actor.send({ type: "evaluation.cancel" });
  signal.addEventListener("abort", cancel, { once: true });
  try {
    const done = toPromise(actor);
    actor.start();
    return await done;
  } finally {
    signal.removeEventListener("abort", cancel);
  }
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

/**
 * A walk of another document (a subtask's template, an evaluator, a decomposition) whose node paths are reported
 * and sent to Handlers under `scope` (`0/subtask1:0`), so they never collide with the task's own paths.
 */
export function scopedWalk(walk: Walk, document: TemplateDocument, scope: string): Walk {
  const at = (path: string) => `${scope}${path}`;
  return {
    ...walk,
    document,
    // Node paths of the data (a node's `nodePath`, a map branch's `mapPath`) are reported under the scope.
    progress: (event, message, data) =>
      walk.progress(
        event,
        message,
        data && Object.fromEntries(Object.entries(data).map(([k, v]) => [k, PATH_KEYS.includes(k) && typeof v === "string" ? at(v) : v])),
      ),
    execute: (path, ...rest) => walk.execute(at(path), ...rest),
    resume: (path, ...rest) => walk.resume(at(path), ...rest),
    script: (path, ...rest) => walk.script(at(path), ...rest),
    waitForInput: (path, ...rest) => walk.waitForInput(at(path), ...rest),
  };
}

/**
 * Continuation tools offered to an atomic task: the configured ones (`run_subtask`: past the depth limit a call
 * fails the task with subtask_failure, so the limit is visible; `request_user_input`), plus
 * `request_evaluation` for subtype `director`.
 */
function continuationsFor(walk: Walk, node: TaskNode): ContinuationKind[] {
  const kinds = walk.continuationTools.filter((k) => k !== "evaluation");
  // Seed era: `type="director"` is an atomic director.
  return node.subtype === "director" || node.type === "director" ? [...kinds, "evaluation"] : kinds;
}

/** An inline call `{{f(…)}}` in the text of the node at `path`: the function template's body, one inline level deeper. */
async function callInlineAt(walk: Walk, c: InlineCall, env: Env, path: string, depth: number, inline: number, signal: AbortSignal) {
  if (inline >= MAX_INLINE_DEPTH) return inputFailure(`inline call ${c.template}() nested deeper than ${MAX_INLINE_DEPTH}`);
  const bound = await bindArgs(walk, c.template, c.args, env, depth, signal, `${path}/call:`);
  if ("result" in bound) return bound.result;
  return evaluateNode(bound.walk, `templates.${bound.template}.body`, bound.env, depth + 1, signal, inline + 1);
}

/** What the effects of one evaluation actor system act for: the walk, its nesting depth, the inline calls around it. */
type WalkScope = { readonly walk: Walk; readonly depth: number; readonly inline: number; continuation?: ContinuationScope };

/** The effects' view of the walk of an actor system. */
type ScopeOf = (system: unknown) => WalkScope;

/** Evaluates the nested task of an input of a node of `scope`'s walk, one level deeper. */
function inputTasksOf({ walk, depth }: WalkScope, signal: AbortSignal): EvaluateInputTask {
  return (path, env, stop) => evaluateNode(walk, path, env, depth + 1, stop ?? signal);
}

function taskAt(walk: Walk, path: string): TaskNode {
  const node = nodeAt(walk.document, path);
  if (node?.kind !== "task") throw new Error(`node ${path} is not a task`);
  return node;
}

/** The evaluation machine with every effect provided. */
type WalkMachine = ReturnType<typeof buildWalkMachine>;

/** Creates the evaluation actors of one Evaluator. */
export interface WalkActors {
  /** Creates the evaluation actor of a node of `walk` at nesting `depth` (`inline`: inline calls around it). */
  create(
    walk: Walk,
    depth: number,
    inline: number,
    options: { input: EvaluationInput; inspect?: (event: InspectionEvent) => void },
  ): Actor<WalkMachine>;
}

/**
 * The evaluation actors of one Evaluator: the machine is provided once (building it is costly), and its effects act
 * for the walk registered for the actor system they run in, in a registry this Evaluator alone owns.
 */
export function walkActors(): WalkActors {
  const scopes = actorScopes<WalkScope>("an evaluation actor runs outside a walk");
  const machine = buildWalkMachine((system) => scopes.of(system));
  return { create: (walk, depth, inline, options) => scopes.create({ walk, depth, inline }, () => createActor(machine, options)) };
}

function continuationScope(scope: WalkScope): ContinuationScope {
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
  const progress = ({ system }: { system: unknown }, p: { event: string; message: string; data?: Record<string, unknown> }) =>
    scopeOf(system).walk.progress(p.event, p.message, p.data);
  const runStep = fromPromise<TaskResult, { path: string; env: Env }>(({ input, signal, system }) => {
    const { walk, depth, inline } = scopeOf(system);
    return evaluateNode(walk, input.path, input.env, depth + 1, signal, inline);
  });
  return evaluationMachine.provide({
    actions: {
      progress,
      bindNow: assign(({ context, system }) => {
        const { walk } = scopeOf(system);
        return boundNow(() => bindInputsNow(taskAt(walk, context.path), context.env, context.entry));
      }),
    },
    actors: {
      bindInputs: fromPromise<BindOutcome, { path: string; env: Env; entry: boolean }>(({ input, signal, system }) => {
        const { walk } = scopeOf(system);
        return bindInputs(inputTasksOf(scopeOf(system), signal), taskAt(walk, input.path), input.path, input.env, input.entry, signal);
      }),
      runAtomic: fromPromise<SuspendedResult, { path: string; env: Env }>(async ({ input, signal, system }) => {
        const { walk, depth, inline } = scopeOf(system);
        const callInline = (c: InlineCall) => callInlineAt(walk, c, input.env, input.path, depth, inline, signal);
        const node = taskAt(walk, input.path);
        const prepared = await prepareAtomic(node, input.env, callInline, walk.substitution);
        if (!prepared.ok) return prepared.result;
        const context = await atomicContext(walkContextDeps(walk, input.path), node, input.env, prepared.fields.prompt, signal);
        if (!context.ok) return context.result;
        const result = await walk.execute(
          input.path,
          {
            ...prepared.fields,
            ...contextFields(context.value),
            continuations: continuationsFor(walk, node),
            ...(walk.templateTools?.length ? { templateTools: [...walk.templateTools] } : {}),
          },
          signal,
          budgetScopes(input.env),
        );
        const formatted = applyOutputFormat(node, withContextNotes(result, context.value), returnsOf(walk.document, input.path));
        return node.type === "evaluator" ? asEvaluation(formatted) : formatted;
      }),
      reparse: fromPromise<TaskResult, { path: string; env: Env; result: TaskResult }>(async ({ input, signal, system }) => {
        const { walk, depth } = scopeOf(system);
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
      runRef: fromPromise<TaskResult, { path: string; env: Env }>(async ({ input, signal, system }) => {
        const { walk, depth } = scopeOf(system);
        const ref = taskAt(walk, input.path).ref ?? "";
        const template = walk.library.get(ref);
        if (!template) return inputFailure(`no template named '${ref}' in the template library (--templates)`, { ref });
        const result = await evaluateDocument(walk, template.document, input.env, depth + 1, signal, `${input.path}/ref:`);
        return { ...result, notes: { ...result.notes, template_used: template.name } };
      }),
      runCall: fromPromise<TaskResult, { path: string; env: Env }>(async ({ input, signal, system }) => {
        const { walk, depth, inline } = scopeOf(system);
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
      runCond: fromPromise<TaskResult, { path: string; env: Env }>(async ({ input, signal, system }) => {
        const { walk, depth } = scopeOf(system);
        const node = nodeAt(walk.document, input.path);
        if (node?.kind !== "cond") return missingNode(input.path);
        return runCond(walk, node, input.path, input.env, depth, signal);
      }),
      runMemory: fromPromise<TaskResult, { path: string; env: Env }>(({ input, signal, system }) => {
        const { walk, depth, inline } = scopeOf(system);
        const call = (c: InlineCall) => callInlineAt(walk, c, input.env, input.path, depth, inline, signal);
        return runMemoryTask(taskAt(walk, input.path), input.env, walk.memoryMatch, call, walk.substitution ?? "strict", signal);
      }),
      runScript: fromPromise<TaskResult, { path: string; env: Env }>(({ input, signal, system }) => {
        const { walk } = scopeOf(system);
        return runScriptTask(walk.script, taskAt(walk, input.path), input.path, input.env, signal);
      }),
      continuation: provideContinuationFor((system) => continuationScope(scopeOf(system))),
      sequential: sequentialMachine.provide({ actions: { progress }, actors: { runStep } }),
      map: mapMachine.provide({
        actions: { progress },
        actors: {
          // A branch of a map over a list runs the map's one step; its node paths are its own (`0/map:2:0.steps.0`).
          runBranch: fromPromise<TaskResult, BranchInput>(({ input, signal, system }) => {
            const { walk, depth, inline } = scopeOf(system);
            const branchWalk = input.scope === undefined ? walk : scopedWalk(walk, walk.document, input.scope);
            // Under budgets, the branch holds its share of what is left until it ends: siblings cannot spend it.
            const held = walk.reserve?.(budgetScopes(input.env), input.parts);
            const env = held ? extend(input.env, { [BUDGET_BINDING]: [...budgetScopes(input.env), held.scope] }) : input.env;
            return evaluateNode(branchWalk, input.path, env, depth + 1, signal, inline).finally(() => held?.release());
          }),
        },
      }),
      directorEvaluator: directorEvaluatorMachine.provide({
        actions: { progress },
        actors: {
          runStep,
          runScript: fromPromise<TaskResult, { path: string; env: Env }>(async ({ input, signal, system }) => {
            const { walk, depth, inline } = scopeOf(system);
            const loopPath = input.path.replace(/\.scriptExecution$/, "");
            const se = taskAt(walk, loopPath).scriptExecution;
            if (!se) return inputFailure("the loop has no <script_execution>");
            const evaluate = (path: string, env: Env) => evaluateNode(walk, path, env, depth + 1, signal, inline);
            return runScriptExecution(walk.script, evaluate, se, input.path, input.env, signal);
          }),
        },
      }),
      checkmate: provideCheckmate((system) => scopeOf(system).walk, taskAt),
      reduce: reduceMachine.provide({
        actions: { progress },
        actors: {
          runStep,
          resolveItems: fromPromise<ResolvedItems, { path: string; env: Env }>(({ input, signal, system }) => {
            const { walk } = scopeOf(system);
            return resolveItems(inputTasksOf(scopeOf(system), signal), taskAt(walk, input.path), input.path, input.env, signal);
          }),
        },
      }),
    },
  });
}
