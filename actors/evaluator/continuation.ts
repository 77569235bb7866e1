/**
 * The effects of the `continuation` machine: a subtask (run or spawned) runs as a child evaluation of a template chosen from the
 * library (by hints, type/subtype and description; a generated atomic task when none fits), an evaluation runs
 * the request's script through a Handler and then an evaluator template, and a suspended Handler session resumes
 * with the answer.
 */
import { fromPromise } from "xstate";
import {
  continuationMachine,
  type EvaluationOutcome,
  type EvaluationStepInput,
  type InputWaitInput,
  LAST_EVALUATOR_OUTPUT,
  type ResumeInput,
  type SubtaskInput,
  type SuspendedResult,
} from "../../machines/evaluator/continuation.js";
import { CONTEXT_BINDING, CONTEXT_OVERRIDE_BINDING, type PartialContextSettings } from "../../machines/evaluator/context-defaults.js";
import { find, flatten, rootEnv, type Env } from "../../machines/language/env.js";
import { splitCommand } from "../../machines/language/script-argv.js";
import {
  SCRIPT_EVALUATION_TYPES,
  type InputRequest,
  type SessionState,
  type SubtaskRequest,
  type TaskResult,
} from "../../protocol/index.js";
import { withoutFenceMarks } from "../../protocol/fence.js";
import { DEFAULT_SCRIPT_TIMEOUT_S, type CommandOutcome } from "./script.js";
import type { TemplateLibrary } from "../library/library.js";
import { bindTemplateInputs } from "./calls.js";
import { parseTemplate } from "../../machines/language/parse.js";
import type { TemplateDocument } from "../../machines/language/ast.js";

/** Lowest match score at which a library template is chosen for a subtask over a generated one. */
export const MIN_SUBTASK_SCORE = 0.2;

/** What the continuation effects need from a walk. */
export interface ContinuationWalk {
  library: TemplateLibrary;
  /** Evaluates the entry node of `document` in `env`, its node paths under `scope`. */
  evaluateDocument(document: TemplateDocument, env: Env, signal: AbortSignal, scope: string): Promise<TaskResult>;
  /** Runs argv in a Handler. */
  script(nodePath: string, command: { argv: string[]; timeoutMs: number }, signal: AbortSignal): Promise<CommandOutcome>;
  /** Waits for the user's answer to a question of the task. */
  waitForInput(nodePath: string, request: InputRequest, signal: AbortSignal): Promise<string>;
  /** Resumes a suspended session. */
  resume(nodePath: string, session: SessionState, answer: string, signal: AbortSignal): Promise<SuspendedResult>;
  progress(event: string, message: string, data?: Record<string, unknown>): void;
  /** The substituted `<criteria>` of the task at `nodePath`, if it has any: more text to match evaluation templates on. */
  criteria?(nodePath: string, env: Env): string | undefined;
}

const escapeAttr = (text: string) => text.replace(/[^A-Za-z0-9_:-]/g, "");

function generated(xml: string): TemplateDocument {
  const parsed = parseTemplate(xml);
  if (!parsed.ok) throw new Error(`built-in template does not parse: ${parsed.error.message}`);
  return parsed.document;
}

/** The template a subtask request runs: a hinted name, else the best match of its type, else a generated atomic task. */
export function chooseSubtaskTemplate(
  library: TemplateLibrary,
  request: SubtaskRequest,
): { document: TemplateDocument; name: string; source: "library" | "generated" } {
  for (const hint of request.template_hints ?? []) {
    const named = library.get(hint);
    if (named) return { document: named.document, name: named.name, source: "library" };
  }
  const options = { type: request.type, hints: request.template_hints ?? [], limit: 1 };
  const best =
    (request.subtype ? library.match(request.description, { ...options, subtype: request.subtype })[0] : undefined) ??
    library.match(request.description, options)[0];
  if (best && best.score >= MIN_SUBTASK_SCORE) return { document: best.template.document, name: best.template.name, source: "library" };
  const subtype = escapeAttr(request.subtype ?? "subtask") || "subtask";
  return {
    document: generated(`<task type="atomic" subtype="${subtype}"><description>{{description}}</description></task>`),
    name: `generated:atomic:${subtype}`,
    source: "generated",
  };
}

const EVALUATOR_XML = `<task type="atomic" subtype="evaluator">
  <description>Evaluate the output below against the criteria. Answer with JSON only: {"success": true or false, "feedback": "what is missing or wrong"}.

Criteria:
{{criteria}}

Output to evaluate:
{{director_output}}
{{script_section}}</description>
</task>`;

/**
 * The evaluator template of an evaluation: the best `atomic:evaluator` match on `text` (the request's criteria and
 * target, and the director task's own `<criteria>`), else a built-in one.
 */
export function chooseEvaluationTemplate(
  library: TemplateLibrary,
  text: string,
): { document: TemplateDocument; name: string; source: "library" | "generated" } {
  const best = library.match(text, { type: "atomic", subtype: "evaluator", limit: 1 })[0];
  if (best) return { document: best.template.document, name: best.template.name, source: "library" };
  return { document: generated(EVALUATOR_XML), name: "builtin:evaluator", source: "generated" };
}

/** Reserved (`$`) bindings of `env`, and `last_evaluator_output`: they follow a child into its own environment. */
function reservedBindings(env: Env): Record<string, unknown> {
  const last = find(env, LAST_EVALUATOR_OUTPUT);
  return {
    ...Object.fromEntries(Object.entries(flatten(env)).filter(([name]) => name.startsWith("$"))),
    ...(last.found ? { [LAST_EVALUATOR_OUTPUT]: last.value } : {}),
  };
}

function contextOverride(request: SubtaskRequest): PartialContextSettings {
  const cm = request.context_management ?? {};
  const files = request.file_paths && request.file_paths.length > 0;
  return {
    // Files the request names take precedence over matching: they are the child's inherited context.
    ...(files ? { inheritContext: "full" as const, freshContext: "disabled" as const } : {}),
    ...(cm.inherit_context ? { inheritContext: cm.inherit_context } : {}),
    ...(cm.accumulate_data === undefined ? {} : { accumulateData: cm.accumulate_data }),
    ...(cm.accumulation_format ? { accumulationFormat: cm.accumulation_format } : {}),
    ...(cm.fresh_context ? { freshContext: cm.fresh_context } : {}),
  };
}

async function runSubtask(walk: ContinuationWalk, input: SubtaskInput, signal: AbortSignal): Promise<TaskResult> {
  const { request } = input;
  const chosen = chooseSubtaskTemplate(walk.library, request);
  // A function template (a template tool's call, or a hint naming one): its parameters' defaults and types apply,
  // and a parameter named `description` is the argument, not the request's description.
  const bound = bindTemplateInputs(chosen.document, chosen.name, request.inputs ?? {});
  if ("result" in bound) return bound.result;
  const env = rootEnv({
    ...reservedBindings(input.env),
    ...(bound.function ? { description: request.description } : {}),
    ...bound.inputs,
    ...(bound.function ? {} : { description: request.description }),
    [CONTEXT_OVERRIDE_BINDING]: contextOverride(request),
    ...(request.file_paths ? { [CONTEXT_BINDING]: { files: request.file_paths } } : {}),
  });
  const scope = input.scope ?? "subtask";
  walk.progress("subtask.template", `${scope === "spawn" ? "spawned subtask" : "subtask"} ${input.number}: template ${chosen.name}`, {
    nodePath: input.path,
    ...(scope === "spawn" ? { spawn: input.number } : { subtask: input.number }),
    template: chosen.name,
    source: chosen.source,
  });
  // A spawned subtask's nodes are scoped `<path>/spawn<n>:`, a run one's `<path>/subtask<n>:`: their records never collide.
  const result = await walk.evaluateDocument(chosen.document, env, signal, `${input.path}/${scope}${input.number}:`);
  return { ...result, notes: { ...result.notes, template_used: chosen.name } };
}

function successOf(result: TaskResult): boolean | undefined {
  const fromNotes = result.notes["success"];
  if (typeof fromNotes === "boolean") return fromNotes;
  const text = withoutFenceMarks(result.content.trim());
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === "object" && value !== null && typeof Reflect.get(value, "success") === "boolean")
      return Reflect.get(value, "success") as boolean;
  } catch {
    // Not JSON: the evaluation's text is the feedback.
  }
  return undefined;
}

async function runEvaluation(walk: ContinuationWalk, input: EvaluationStepInput, signal: AbortSignal): Promise<EvaluationOutcome> {
  const { request } = input;
  const criteria = Array.isArray(request.criteria) ? request.criteria.map((c) => `- ${c}`).join("\n") : request.criteria;
  let script: CommandOutcome | undefined;
  if (request.target !== undefined && SCRIPT_EVALUATION_TYPES.has(request.type)) {
    const split = splitCommand(request.target);
    script = split.ok
      ? await walk.script(input.path, { argv: split.argv, timeoutMs: DEFAULT_SCRIPT_TIMEOUT_S * 1000 }, signal)
      : { exitCode: null, timedOut: false, stdout: "", stderr: "", error: `target is not a command: ${split.error}` };
  }
  const scriptSection = script
    ? `\nScript \`${request.target ?? ""}\` ${script.error ? `could not run: ${script.error}` : script.timedOut ? "timed out" : `exited with code ${script.exitCode ?? "none"}`}.\nstdout:\n${script.stdout}\nstderr:\n${script.stderr}`
    : "";
  const own = walk.criteria?.(input.path, input.env);
  const chosen = chooseEvaluationTemplate(walk.library, [criteria, request.target ?? "", own ?? ""].join(" "));
  const env = rootEnv({
    [LAST_EVALUATOR_OUTPUT]: "",
    ...reservedBindings(input.env),
    criteria,
    target: request.target ?? "",
    evaluation_type: request.type,
    director_output: input.output,
    output: input.output,
    iteration: input.iteration,
    script_section: scriptSection,
    script_output: script?.stdout ?? "",
    script_stdout: script?.stdout ?? "",
    script_errors: script?.stderr ?? "",
    script_stderr: script?.stderr ?? "",
    script_exit_code: script?.exitCode ?? "",
    // The evaluation sees only the part of the context relevant to what it checks, not the director's whole
    // context, and, when it is a sequence, its later steps see what the earlier ones found.
    [CONTEXT_OVERRIDE_BINDING]: { inheritContext: "subset", accumulateData: true } satisfies PartialContextSettings,
  });
  const result = await walk.evaluateDocument(chosen.document, env, signal, `${input.path}/evaluation${input.iteration}:`);
  const success = successOf(result);
  const lastEvaluatorOutput = result.status === "COMPLETE" ? result.content : (result.error?.message ?? result.content);
  const answer = JSON.stringify({
    status: result.status,
    ...(success === undefined ? {} : { success }),
    [LAST_EVALUATOR_OUTPUT]: lastEvaluatorOutput,
    template_used: chosen.name,
    ...(script
      ? {
          script: {
            exitCode: script.exitCode,
            timedOut: script.timedOut,
            stdout: script.stdout,
            stderr: script.stderr,
            ...(script.error ? { error: script.error } : {}),
          },
        }
      : {}),
  });
  return { result, answer, lastEvaluatorOutput };
}

/** Formats the result of a resumed session of the task at `path` as its node asks. */
export type ApplyFormat = (path: string, result: SuspendedResult) => SuspendedResult;

/** What the continuation effects of one node's evaluation act for. */
export interface ContinuationScope {
  readonly walk: ContinuationWalk;
  readonly applyFormat: ApplyFormat;
}

/** The continuation machine with its effects provided for `walk`. */
export function provideContinuation(walk: ContinuationWalk, applyFormat: ApplyFormat) {
  const scope: ContinuationScope = { walk, applyFormat };
  return provideContinuationFor(() => scope);
}

/**
 * The continuation machine with effects that act for the scope their machine's `scopeKey` names (`scopeOf`), so one
 * machine serves every task of the Evaluator that provides it.
 */
export function provideContinuationFor(scopeOf: (scopeKey: string | undefined) => ContinuationScope) {
  return continuationMachine.provide({
    actions: { progress: ({ context }, p) => scopeOf(context.scopeKey).walk.progress(p.event, p.message, p.data) },
    actors: {
      runSubtask: fromPromise<TaskResult, SubtaskInput>(({ input, signal }) => runSubtask(scopeOf(input.scopeKey).walk, input, signal)),
      runEvaluation: fromPromise<EvaluationOutcome, EvaluationStepInput>(({ input, signal }) =>
        runEvaluation(scopeOf(input.scopeKey).walk, input, signal),
      ),
      waitForInput: fromPromise<string, InputWaitInput>(({ input, signal }) =>
        scopeOf(input.scopeKey).walk.waitForInput(input.path, input.request, signal),
      ),
      resumeAtomic: fromPromise<SuspendedResult, ResumeInput>(async ({ input, signal }) => {
        const { walk, applyFormat } = scopeOf(input.scopeKey);
        return applyFormat(input.path, await walk.resume(input.path, input.session, input.answer, signal));
      }),
    },
  });
}
