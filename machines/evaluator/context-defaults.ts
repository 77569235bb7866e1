import type { AccumulationFormat, ContextManagement, FreshContext, InheritContext } from "../language/ast.js";
/**
 * Context defaults per operator as one data table, not logic (docs/design.md), and the pure merge of
 * the settings in effect for a task: a subtask request's override wins over the template's explicit
 * `<context_management>`, which wins over the defaults of the task's type and subtype.
 *
 * Also the reserved environment names through which context flows lexically ({@link CONTEXT_BINDING},
 * {@link CONTEXT_OVERRIDE_BINDING}, {@link ACCUMULATED_BINDING}); `{{…}}` can never name them, since a variable
 * path cannot start with `$`.
 */

/** The four context settings of a task, all decided. */
export interface ContextSettings {
  inheritContext: InheritContext;
  accumulateData: boolean;
  accumulationFormat: AccumulationFormat;
  freshContext: FreshContext;
}

/** Settings a template or a request states; absent ones fall through to the next layer. */
export type PartialContextSettings = Partial<ContextSettings>;

const row = (
  inheritContext: InheritContext,
  accumulateData: boolean,
  accumulationFormat: AccumulationFormat,
  freshContext: FreshContext,
): ContextSettings => ({
  inheritContext,
  accumulateData,
  accumulationFormat,
  freshContext,
});

/**
 * Defaults keyed by `type` or `type:subtype`: the documented per-operator defaults that existing templates were written
 * against, except that a subtask inherits nothing, so a spawned subtask starts clean instead of seeing its parent's
 * context. A `type:subtype` row wins over the `type` row; an unknown type falls back to `atomic`.
 */
export const CONTEXT_DEFAULTS: Readonly<Record<string, ContextSettings>> = {
  atomic: row("full", false, "notes_only", "disabled"),
  "atomic:standard": row("full", false, "notes_only", "disabled"),
  "atomic:subtask": row("none", false, "notes_only", "enabled"),
  "atomic:director": row("full", false, "notes_only", "disabled"),
  "atomic:evaluator": row("full", false, "notes_only", "disabled"),
  sequential: row("full", true, "notes_only", "disabled"),
  // Branches run at once: none can accumulate what a sibling produced.
  map: row("full", false, "notes_only", "disabled"),
  reduce: row("none", true, "notes_only", "enabled"),
  script: row("full", false, "notes_only", "disabled"),
  director_evaluator_loop: row("none", true, "notes_only", "enabled"),
};

/** The defaults row of a task type and subtype. */
export function contextDefaults(type: string, subtype?: string): ContextSettings {
  const bySubtype = subtype === undefined ? undefined : CONTEXT_DEFAULTS[`${type}:${subtype}`];
  const byType = Object.hasOwn(CONTEXT_DEFAULTS, type) ? CONTEXT_DEFAULTS[type] : undefined;
  return { ...(bySubtype ?? byType ?? (CONTEXT_DEFAULTS["atomic"] as ContextSettings)) };
}

function stated(from: PartialContextSettings | ContextManagement | undefined): PartialContextSettings {
  if (!from) return {};
  const out: PartialContextSettings = {};
  if (from.inheritContext !== undefined) out.inheritContext = from.inheritContext;
  if (from.accumulateData !== undefined) out.accumulateData = from.accumulateData;
  if (from.accumulationFormat !== undefined) out.accumulationFormat = from.accumulationFormat;
  if (from.freshContext !== undefined) out.freshContext = from.freshContext;
  return out;
}

/**
 * The settings in effect: `override` (a subtask request's) > `explicit` (the template's `<context_management>`)
 * > the defaults of `type`/`subtype`. Settings are fixed once the task starts.
 *
 * @example
 * effectiveContext("atomic", "subtask", { inheritContext: "full" }); // → full / false / notes_only / enabled
 */
export function effectiveContext(
  type: string,
  subtype?: string,
  explicit?: PartialContextSettings | ContextManagement,
  override?: PartialContextSettings,
): ContextSettings {
  return { ...contextDefaults(type, subtype), ...stated(explicit), ...stated(override) };
}

/** The context a parent hands down: file paths (workspace-relative or absolute) and free text. */
export interface InheritedContext {
  files: string[];
  text?: string;
}

/** Env name of the {@link InheritedContext} a parent hands down. */
export const CONTEXT_BINDING = "$context";
/** Env name of the {@link PartialContextSettings} a subtask request imposes. */
export const CONTEXT_OVERRIDE_BINDING = "$context_override";
/** Env name of the prior step outputs a sequential task accumulates (`string[]`, formatted per {@link accumulatedOutputs}). */
export const ACCUMULATED_BINDING = "$accumulated";

/** One SequentialHistory entry, as far as accumulation needs it. */
export interface AccumulatedEntry {
  step: number;
  output?: string;
  notes: Record<string, unknown>;
  truncated?: boolean;
}

/**
 * Prior step outputs as text, one string per step: notes only (`notes_only`), or output and notes
 * (`full_output`, when the entry holds an output).
 */
export function accumulatedOutputs(history: readonly AccumulatedEntry[]): string[] {
  return history.map((entry) => {
    const notes = JSON.stringify(entry.notes);
    if (entry.output === undefined) return `step ${entry.step + 1} notes: ${notes}`;
    return `step ${entry.step + 1} output${entry.truncated ? " (truncated)" : ""}:\n${entry.output}\nstep ${entry.step + 1} notes: ${notes}`;
  });
}
