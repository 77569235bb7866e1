/**
 * What a walk of one template document needs from the Evaluator role ({@link Walk}), the views of it the effects of
 * another document use ({@link scopedWalk}: a subtask's template, a called library template), and the evaluation
 * actors it runs its nodes with ({@link WalkActors}, made by actors/evaluator/walk.ts).
 */
import type { Actor, AnyActorRef, InspectionEvent } from "xstate";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import type { EvaluationInput, evaluationMachine } from "../../machines/evaluator/evaluation.js";
import { flatten, type Env } from "../../machines/language/env.js";
import type { SubstituteMode } from "../../machines/language/substitute.js";
import type { TemplateDocument } from "../../machines/language/ast.js";
import type {
  CompileReply,
  CompileRequest,
  ContinuationKind,
  InputRequest,
  SessionState,
  TaskResult,
  TemplateTool,
  TaskId,
} from "../../protocol/index.js";
import type { InspectHook } from "../inspect-option.js";
import type { TemplateLibrary } from "../library/library.js";
import type { BudgetScope, TaskSpend } from "./budget.js";
import type { ContextDeps } from "./context.js";
import type { InputRecords } from "./input.js";
import type { AtomicFields } from "./nodes.js";
import type { NodeRecorder } from "./node-records.js";
import type { RunCommand } from "./script.js";

/** The Evaluator's reserved (`$`) bindings of `env`; they cross into function templates and subtasks. */
export function reservedOf(env: Env): Record<string, unknown> {
  return Object.fromEntries(Object.entries(flatten(env)).filter(([name]) => name.startsWith("$")));
}

/** What a walk of one document needs from the Evaluator role. */
export interface Walk {
  /** The evaluation actors of the Evaluator running the walk (actors/evaluator/walk.ts `walkActors`, one per Evaluator). */
  actors: WalkActors;
  /** XState inspection of the nested evaluation actors (the Evaluator's `deps.inspect`). */
  inspect?: InspectHook | undefined;
  taskId: TaskId;
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
  /** True when the next wait for `request` returns a recorded answer (a re-run): the question is not put again. */
  inputRecorded?: InputRecords["inputRecorded"];
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
  /** The scope the walk's node paths are reported under (`0.steps.1/subtask1:`); empty for the task's own document. */
  scope?: string;
  /** Records each node evaluated (actors/evaluator/node-records.ts); absent: none. */
  records?: NodeRecorder;
  /**
   * The evaluation actor of the node whose effects use this view of the walk: the nodes they evaluate are its
   * children, in the task's one actor system. Absent: the node evaluated is the root of the task's system.
   */
  parent?: AnyActorRef;
}

/** Creates the evaluation actors of one Evaluator. */
export interface WalkActors {
  /**
   * Creates the evaluation actor of a node of `walk` at nesting `depth` (`inline`: inline calls around it): a child of
   * `walk.parent` in its task's actor system, or, without a parent, the root of a new system (the task's). Its scope
   * is kept until `release` (call it when the actor has ended).
   */
  create(
    walk: Walk,
    depth: number,
    inline: number,
    options: { input: Omit<EvaluationInput, "scopeKey">; inspect?: (event: InspectionEvent) => void },
  ): { actor: Actor<typeof evaluationMachine>; release(): void };
  /**
   * Evaluates the node at `path` of `walk` in `env` with a nested evaluation actor (actors/evaluator/walk.ts
   * `evaluateNode`): what the effects outside walk.ts (calls, conds) evaluate a node with.
   */
  evaluate(walk: Walk, path: string, env: Env, depth: number, signal: AbortSignal, inline?: number): Promise<TaskResult>;
}

const PATH_KEYS: readonly string[] = ["nodePath", "mapPath"];

/**
 * A walk of another document (a subtask's template, an evaluator, a decomposition) whose node paths are reported
 * and sent to Handlers under `scope` (`0/subtask1:0`), so they never collide with the task's own paths.
 */
export function scopedWalk(walk: Walk, document: TemplateDocument, scope: string): Walk {
  const at = (path: string) => `${scope}${path}`;
  return {
    ...walk,
    document,
    scope: `${walk.scope ?? ""}${scope}`,
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
