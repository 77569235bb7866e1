/**
 * Placeholders a submitted task can never fill, found at submission under strict substitution: a `{{name}}` in any
 * text the walk substitutes strictly whose name nothing can bind where it stands. The names in scope follow the
 * walk (docs/task-language.md): the submitted inputs, each task's `<input>`s (and `input` for an `<input_source>`)
 * for the task and everything inside it, what a composite binds for its children (a sequential's `step_results`,
 * `previous_result`, `result`, `history`, `<output_slot>`s and `last_evaluator_output`; a map's `as` and
 * `<as>_index`; a reduce's `current_input`, `accumulator`, …; a loop's `current_iteration`, `director_result`,
 * `script_output`, …), and in a function template's body only its parameters. Reserved `$` names are the runtime's.
 *
 * The texts checked are those the walk substitutes strictly: an atomic task's `<description>`, `<instructions>`,
 * `<expected_output>`, `<system>`, `<model>`, `<criteria>` and the `<file_paths>` it reads; a judge_loop's task and
 * criteria; a memory task's `<query>`; a script's `<command>` and `<environment>` values; a loop's
 * `<script_execution>` command; call arguments. Where the walk may bind more than this knows, the name is allowed:
 * the check refuses only what cannot run. A library `ref` task's own text is not run, so it is not checked.
 */
import type { CallNode, StepNode, TaskNode, TemplateDocument, TemplateNode } from "../../machines/language/ast.js";
import { isPath } from "../../machines/language/env.js";
import { didYouMean } from "../../machines/language/values.js";

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;

/** What is wrong, for an `INVALID_TEMPLATE` reply at the line and column of the element that holds the placeholder. */
export interface Unfillable {
  message: string;
  line: number;
  col: number;
}

/** The names visible at a point of the walk. */
interface Scope {
  readonly names: ReadonlySet<string>;
  /** The function template whose body this is: only its parameters are visible. */
  readonly template?: TemplateNode;
  /** Whether this is the entry task itself (the message then names the submitted inputs only). */
  readonly entry?: boolean;
}

const ATOMIC_TYPES: ReadonlySet<string> = new Set(["atomic", "standard", "subtask", "director", "evaluator"]);

/** What a sequential binds for its steps, besides the steps' `<output_slot>`s. */
const SEQUENTIAL_NAMES = ["step_results", "previous_result", "result", "history", "last_evaluator_output"];
const REDUCE_INNER_NAMES = ["current_input", "input_name", "input_index", "accumulator"];
const REDUCE_REDUCTION_NAMES = ["current_result", "accumulator", "original_input", "input_name", "input_index"];
/** What a director–evaluator loop binds (its director, script and evaluator see subsets of these; any is allowed). */
const LOOP_NAMES = [
  ...["current_iteration", "evaluation_feedback", "evaluation_success", "last_evaluation"],
  ...["director_result", "script_input", "solution"],
  ...["script_output", "script_stdout", "script_errors", "script_stderr", "script_exit_code"],
];

const within = (scope: Scope, names: Iterable<string>): Scope => ({
  names: new Set([...scope.names, ...names]),
  ...(scope.template ? { template: scope.template } : {}),
});

/** The first unfillable placeholder of `text`, held by `<element>` at `at`. */
function checkText(text: string | undefined, element: string, at: { line: number; col: number }, scope: Scope): Unfillable | undefined {
  for (const match of (text ?? "").matchAll(PLACEHOLDER)) {
    const path = (match[1] ?? "").trim();
    if (!isPath(path)) continue;
    const name = /^[^.[]+/.exec(path)?.[0] ?? path;
    if (scope.names.has(name) || name.startsWith("$")) continue;
    return { message: `{{${path}}} in <${element}> can never be filled: ${why(name, scope)}`, line: at.line, col: at.col };
  }
  return undefined;
}

function why(name: string, scope: Scope): string {
  const visible = [...scope.names].filter((n) => !n.startsWith("$"));
  const near = didYouMean(name, visible, (n) => `'${n}'`);
  const t = scope.template;
  if (t) {
    const params = t.params.length === 0 ? "none" : t.params.join(", ");
    return `the body of template '${t.name}' sees only its parameters (${params}) and what its own tasks bind, not '${name}'${near} (declare it as a parameter and pass it in each call)`;
  }
  const around = scope.entry ? "" : " or of a task around it, and no step, map, reduce or loop around it binds it";
  return `no input '${name}' is submitted or bound by an <input> of the task${around}${near} (pass it, e.g. --input ${name}=…, or declare <inputs><input name="${name}">…</input></inputs>)`;
}

/** Runs the checks in order; the first finding. */
function first(...checks: (() => Unfillable | undefined)[]): Unfillable | undefined {
  for (const check of checks) {
    const found = check();
    if (found) return found;
  }
  return undefined;
}

function checkSteps(steps: readonly StepNode[] | undefined, scope: Scope): Unfillable | undefined {
  for (const step of steps ?? []) {
    const found = checkStep(step, scope);
    if (found) return found;
  }
  return undefined;
}

function checkStep(node: StepNode | undefined, scope: Scope): Unfillable | undefined {
  if (!node) return undefined;
  switch (node.kind) {
    case "task":
      return checkTask(node, scope);
    case "call":
      return checkCall(node, scope);
    case "cond":
      for (const branch of node.cases) {
        const found = checkSteps(branch.body, scope);
        if (found) return found;
      }
      return undefined;
    default:
      // An element the runtime does not model fails at run time, whatever its text.
      return undefined;
  }
}

/** A call's arguments are substituted (or evaluated) in the caller's scope; the template's body is checked on its own. */
function checkCall(call: CallNode, scope: Scope): Unfillable | undefined {
  for (const arg of call.args) {
    const found = typeof arg.value === "string" ? checkText(arg.value, "arg", arg.loc, scope) : checkStep(arg.value, scope);
    if (found) return found;
  }
  return undefined;
}

/** The prose of a task that runs one session (atomic, and `director`/`evaluator` types of the earlier format, which run as atomic). */
function checkSession(task: TaskNode, scope: Scope): Unfillable | undefined {
  const criteria = typeof task.criteria === "string" ? [task.criteria] : (task.criteria ?? []);
  const fp = task.filePaths;
  const fpText =
    fp === undefined
      ? []
      : fp.source === "literal"
        ? fp.paths
        : fp.source === "command"
          ? [fp.command]
          : fp.source === "description"
            ? [fp.description]
            : [fp.contextQuery];
  return first(
    () => checkText(task.description, "description", task.loc, scope),
    () => checkText(task.instructions, "instructions", task.loc, scope),
    () => checkText(task.expectedOutput, "expected_output", task.loc, scope),
    () => checkText(task.system, "system", task.loc, scope),
    () => checkText(task.model?.name, "model", task.model?.loc ?? task.loc, scope),
    ...criteria.map((c) => () => checkText(c, "criteria", task.loc, scope)),
    ...(fp ? fpText.map((t) => () => checkText(t, "file_paths", fp.loc, scope)) : []),
  );
}

function checkMemory(task: TaskNode, scope: Scope): Unfillable | undefined {
  const query = task.extra.find((e) => e.name === "query");
  if (query?.text) return checkText(query.text, "query", query.loc, scope);
  return first(
    () => checkText(task.description, "description", task.loc, scope),
    () => checkText(task.instructions, "instructions", task.loc, scope),
  );
}

function checkLoop(task: TaskNode, scope: Scope): Unfillable | undefined {
  const loop = within(scope, LOOP_NAMES);
  const se = task.scriptExecution;
  const script = se
    ? within(
        loop,
        se.inputs.map((i) => i.name),
      )
    : loop;
  return first(
    () => checkStep(task.director, loop),
    () => (se ? checkText(se.command, "command", se.loc, script) : undefined),
    () => (se?.call ? checkCall(se.call, script) : undefined),
    () => checkStep(task.evaluator, loop),
  );
}

function checkTask(task: TaskNode, outer: Scope): Unfillable | undefined {
  // Nested input tasks run in the environment around the task, before its inputs are bound.
  for (const input of task.inputs) {
    const found = checkStep(input.task, within(outer, []));
    if (found) return found;
  }
  // A library template runs in the task's place: the task's own text is not run.
  if (task.ref !== undefined) return undefined;
  const type = task.type;
  // A reduce folds its inputs as items: they are not bound as names.
  if (type === "reduce")
    return first(
      () => checkStep(task.initialValue?.task, outer),
      () => checkStep(task.innerTask, within(outer, REDUCE_INNER_NAMES)),
      () => checkStep(task.reductionTask, within(outer, REDUCE_REDUCTION_NAMES)),
    );
  const bound = [...task.inputs.map((i) => i.name), ...(task.inputSource === undefined ? [] : ["input"])];
  const scope: Scope = { ...within(outer, bound), ...(outer.entry ? { entry: true } : {}) };
  const inner = within(scope, []);
  if (task.subtype === "associative_matching" || type === "associative_memory") return checkMemory(task, scope);
  if (ATOMIC_TYPES.has(type)) return checkSession(task, scope);
  switch (type) {
    case "sequential": {
      const slots = (task.steps ?? []).flatMap((s) => (s.kind === "task" && s.outputSlot !== undefined ? [s.outputSlot] : []));
      return checkSteps(task.steps, within(inner, [...SEQUENTIAL_NAMES, ...slots]));
    }
    case "map": {
      const as = task.map?.as ?? "item";
      return checkSteps(task.steps, within(inner, [as, `${as}_index`]));
    }
    case "script": {
      const ex = task.execution;
      return first(
        () => checkText(ex?.command, "command", ex?.loc ?? task.loc, scope),
        ...(ex?.environment?.variables ?? []).map((v) => () => checkText(v.value, "var", ex?.environment?.loc ?? task.loc, scope)),
      );
    }
    case "director_evaluator_loop":
      return checkLoop(task, inner);
    case "judge_loop":
      return first(
        () => checkText(task.description, "description", task.loc, scope),
        () => checkText(task.instructions, "instructions", task.loc, scope),
        ...(typeof task.criteria === "string" ? [task.criteria] : (task.criteria ?? [])).map(
          (c) => () => checkText(c, "criteria", task.loc, scope),
        ),
      );
    default:
      // A type the runtime does not run fails at run time, whatever its text.
      return undefined;
  }
}

/**
 * The first placeholder of `document` nothing can fill, with `inputs` submitted; undefined when there is none. The
 * entry task is checked first, then the body of each function template of the document.
 */
export function unfillablePlaceholder(document: TemplateDocument, inputs: Readonly<Record<string, unknown>>): Unfillable | undefined {
  const entry = document.entry;
  const root: Scope = { names: new Set(Object.keys(inputs)), entry: true };
  const found = entry === undefined ? undefined : entry.kind === "task" ? checkTask(entry, root) : checkStep(entry, within(root, []));
  if (found) return found;
  for (const template of document.templates) {
    const body = checkStep(template.body, { names: new Set(template.params), template });
    if (body) return body;
  }
  return undefined;
}
