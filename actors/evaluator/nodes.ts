/**
 * The Evaluator's view of a parsed template: node paths resolved to typed AST nodes ({@link nodeAt}), nodes
 * summarised for the evaluation machine ({@link summarize}), and the strict `{{var}}` substitution (with inline
 * calls) of an atomic task's prompt-bearing fields ({@link prepareAtomic}).
 */
import { ATOMIC_TYPES, type EvalNode } from "../../machines/evaluator/evaluation.js";
import { readEvaluation } from "../../machines/evaluator/loop.js";
import type { Env } from "../../machines/language/env.js";
import { MODEL_ID_PATTERN, taskFailure, type SessionSettings, type TaskResult } from "../../protocol/index.js";
import { expandText, type InlineCall } from "./inline.js";
import type { SubstituteMode } from "../../machines/language/substitute.js";
import type { InputBinding, StepNode, TaskNode, TemplateDocument } from "../../machines/language/ast.js";

const STEP_KINDS: ReadonlySet<string> = new Set(["task", "call", "cond", "element"]);

function isStepNode(value: unknown): value is StepNode {
  return typeof value === "object" && value !== null && STEP_KINDS.has(String(Reflect.get(value, "kind")));
}

/**
 * The node at `path`: the first segment indexes the document's top-level nodes (or is `templates`), the rest
 * walks fields and list indexes of the AST (`0.steps.2`, `0.innerTask`, `0.steps.1.inputs.0.task`,
 * `templates.0.body`).
 */
export function nodeAt(document: TemplateDocument, path: string): StepNode | undefined {
  const [first, ...rest] = path.split(".");
  let current: unknown = first === "templates" ? document.templates : /^\d+$/.test(first ?? "") ? document.nodes[Number(first)] : undefined;
  for (const segment of rest) {
    if (Array.isArray(current) && /^\d+$/.test(segment)) current = current[Number(segment)];
    else if (typeof current === "object" && current !== null && !Array.isArray(current) && Object.hasOwn(current, segment))
      current = Reflect.get(current, segment);
    else return undefined;
  }
  return isStepNode(current) ? current : undefined;
}

/** The path of the document's entry node. */
export function entryPath(document: TemplateDocument): string | undefined {
  if (!document.entry) return undefined;
  const index = document.nodes.indexOf(document.entry);
  return index < 0 ? undefined : String(index);
}

/** The `<output_slot>`s of sequential steps, by step index (absent when no step has one). */
function outputSlotsOf(steps: readonly StepNode[]): { outputSlots?: Record<number, string> } {
  const slots: Record<number, string> = {};
  steps.forEach((step, i) => {
    if (step.kind === "task" && step.outputSlot !== undefined) slots[i] = step.outputSlot;
  });
  return Object.keys(slots).length > 0 ? { outputSlots: slots } : {};
}

/** Whether the value of `input` is a nested task's result (a `from` wins over a nested task). */
export const isTaskInput = (input: InputBinding | undefined): boolean => input?.task !== undefined && input.from === undefined;

/** The plain summary of a node the evaluation machine routes on. */
export function summarize(node: StepNode): EvalNode {
  switch (node.kind) {
    case "task": {
      const cm = node.contextManagement;
      return {
        kind: "task",
        type: node.type,
        ...(node.subtype === undefined ? {} : { subtype: node.subtype }),
        loc: node.loc,
        ...(node.name ? { name: node.name } : {}),
        ...(node.ref ? { ref: node.ref } : {}),
        ...(node.inputs.some(isTaskInput) ? { inputTasks: true } : {}),
        ...(ATOMIC_TYPES.has(node.type) && !node.ref && reparseAllowed(node) ? { reparse: true } : {}),
        ...(node.steps ? { stepCount: node.steps.length } : {}),
        ...(node.steps ? outputSlotsOf(node.steps) : {}),
        ...(node.map ? { map: { ...node.map } } : {}),
        ...(cm?.accumulateData !== undefined ? { accumulate: cm.accumulateData } : {}),
        ...(cm?.accumulationFormat ? { format: cm.accumulationFormat } : {}),
        ...(node.initialValue ? { initialValue: node.initialValue.value ?? "", initialTask: node.initialValue.task !== undefined } : {}),
        ...(node.type === "director_evaluator_loop" ? { loop: loopSummary(node) } : {}),
        ...(node.type === "judge_loop" ? { checkmate: checkmateSummary(node) } : {}),
      };
    }
    case "call":
      return { kind: "call", loc: node.loc, name: node.templateName };
    case "cond":
      return { kind: "cond", loc: node.loc };
    case "element":
      return { kind: node.name, loc: node.loc };
  }
}

/** judge_loop settings: `<max_iterations>`, attributes `criteria_judge="true"` and `max_intake_rounds="N"`. */
function checkmateSummary(node: TaskNode): NonNullable<EvalNode["checkmate"]> {
  const rounds = Number(node.attributes["max_intake_rounds"]);
  return {
    ...(node.maxIterations === undefined ? {} : { maxIterations: node.maxIterations }),
    ...(node.attributes["criteria_judge"]?.trim() === "true" ? { criteriaJudge: true } : {}),
    ...(Number.isInteger(rounds) && rounds > 0 ? { maxIntakeRounds: rounds } : {}),
  };
}

function loopSummary(node: TaskNode): NonNullable<EvalNode["loop"]> {
  // Several <condition> children: the loop stops when any holds.
  const parts = (node.terminationCondition?.conditions ?? []).map((c) => c.trim()).filter((c) => c !== "");
  const condition = parts.length === 1 ? parts[0] : parts.map((c) => `(${c})`).join(" || ");
  return {
    director: node.director !== undefined,
    evaluator: node.evaluator !== undefined,
    script: node.scriptExecution !== undefined,
    ...(node.maxIterations === undefined ? {} : { maxIterations: node.maxIterations }),
    ...(condition ? { condition } : {}),
  };
}

/** Whether a task may be reparsed: not opted out by `<disable_reparsing>` or the attribute. */
export function reparseAllowed(node: TaskNode): boolean {
  // `<manual_xml>true</manual_xml>`: written by hand, so never rewritten by the Compiler either.
  if (node.disableReparsing === true || node.manualXml === true) return false;
  const attr = node.attributes?.["disable_reparsing"];
  return !(typeof attr === "string" && attr.trim().toLowerCase() === "true");
}

/** A `TASK_FAILURE` with reason `input_validation_failure`. */
export function inputFailure(message: string, details?: Record<string, unknown>): TaskResult {
  return taskFailure("input_validation_failure", message, details);
}

/**
 * A failure naming the models of `fields` that are not model ids ({@link MODEL_ID_PATTERN}: a `<model>` substituted
 * from a task's input, a `fallback` written with spaces), or `undefined`: a model id names spans and labels metrics.
 */
export function modelIdFailure(fields: {
  model?: string | undefined;
  fallbackModels?: readonly string[] | undefined;
}): TaskResult | undefined {
  const bad = [fields.model, ...(fields.fallbackModels ?? [])].filter((m): m is string => m !== undefined && !MODEL_ID_PATTERN.test(m));
  if (bad.length === 0) return undefined;
  const shown = bad.map((m) => (m.length > 64 ? `${m.slice(0, 64)}…` : m));
  const listed = shown.map((m) => JSON.stringify(m)).join(", ");
  return inputFailure(
    `<model>: ${listed} ${bad.length === 1 ? "is not a model id" : "are not model ids"} (1–200 characters of letters, digits and . _ : / @ + -, starting with a letter or digit)`,
    { invalidModels: shown },
  );
}

/** The prompt-bearing fields of an atomic task, before substitution, and its own session settings. */
export interface AtomicFields extends SessionSettings {
  prompt: string;
  system?: string;
  model?: string;
  /** Context files the Handler reads and attaches (set by the task's context, not substituted). */
  files?: string[];
  /** Context text the Handler attaches (inherited text, accumulated step outputs). */
  context?: string;
}

/**
 * What a `type="evaluator"` task (older templates' spelling of an evaluator) is asked to answer: the evaluation
 * schema, so its verdict can be read without guessing.
 */
export const EVALUATION_SCHEMA = 'Answer with JSON only: {"success": true or false, "feedback": "what is missing or wrong"}.';

/**
 * A `type="evaluator"` task's result read as an evaluation, so the director after it sees a verdict: `notes.success`
 * and `notes.feedback` set, `parsedContent` `{success, feedback}` (an answer without a boolean `success` is no success,
 * with feedback saying so).
 */
export function asEvaluation(result: TaskResult): TaskResult {
  if (result.status !== "COMPLETE") return result;
  const { success, feedback } = readEvaluation(result);
  return { ...result, parsedContent: { success, feedback }, notes: { ...result.notes, success, feedback } };
}

function atomicFields(node: TaskNode): AtomicFields {
  const expected = node.expectedOutput?.trim() ? `Expected output:\n${node.expectedOutput.trim()}` : undefined;
  const prompt = [node.description, node.instructions]
    .filter((t): t is string => !!t && t.trim() !== "")
    .concat(expected === undefined || (!node.description?.trim() && !node.instructions?.trim()) ? [] : [expected])
    .concat(node.type === "evaluator" && (node.description?.trim() || node.instructions?.trim()) ? [EVALUATION_SCHEMA] : [])
    .join("\n\n");
  return {
    prompt,
    ...(node.system ? { system: node.system } : {}),
    ...(node.model?.name ? { model: node.model.name.trim() } : {}),
    ...sessionSettings(node),
  };
}

/** What the task sets of its session: `<tools>`, `max_turns`, `temperature`, `max_output_tokens`, `<model fallback>`. */
export function sessionSettings(node: TaskNode): SessionSettings {
  return {
    ...(node.tools ? { tools: [...node.tools.patterns] } : {}),
    ...(node.maxTurns === undefined ? {} : { maxTurns: node.maxTurns }),
    ...(node.temperature === undefined ? {} : { temperature: node.temperature }),
    ...(node.maxOutputTokens === undefined ? {} : { maxOutputTokens: node.maxOutputTokens }),
    ...(node.model?.fallback.length ? { fallbackModels: [...node.model.fallback] } : {}),
    ...(node.provider?.trim() ? { provider: node.provider.trim() } : {}),
  };
}

/** A task's `<criteria>` as text (a list as `- item` lines); undefined when it has none. */
export function criteriaText(node: TaskNode): string | undefined {
  const c = node.criteria;
  // Without `<criteria>`, an evaluation of the task judges it against its `<expected_output>`.
  if (c === undefined) return node.expectedOutput?.trim() ? `Expected output: ${node.expectedOutput.trim()}` : undefined;
  const text = typeof c === "string" ? c.trim() : c.map((item) => `- ${item.trim()}`).join("\n");
  return text === "" ? undefined : text;
}

/**
 * Substitutes `{{var}}` from `env` and runs inline calls `{{f(…)}}` in every field, and in `<criteria>` (strict: a missing variable fails
 * the task, naming every missing variable; `lenient` inserts `{{undefined:name}}` instead; a failing inline
 * call fails it with the call's result).
 */
export async function prepareAtomic(
  node: TaskNode,
  env: Env,
  call: (c: InlineCall) => Promise<TaskResult>,
  mode: SubstituteMode = "strict",
): Promise<{ ok: true; fields: AtomicFields; criteria?: string } | { ok: false; result: TaskResult }> {
  const code = node.extra.find((e) => e.name === "code");
  if (code) {
    const at = ` at line ${code.loc.line}, column ${code.loc.col}`;
    return {
      ok: false,
      result: taskFailure(
        "not_supported",
        `inline <code>${at} is not run: dirigent executes no code written in a template; make the step a script task (<task type="script"> with a <command>)`,
      ),
    };
  }
  const fields = atomicFields(node);
  const criteria = criteriaText(node);
  if (fields.prompt.trim() === "") {
    const at = node.loc ? ` at line ${node.loc.line}, column ${node.loc.col}` : "";
    return {
      ok: false,
      result: inputFailure(`the atomic task${at} has no <description> or <instructions>: there is nothing to ask the model`),
    };
  }
  const out: Record<string, string> = {};
  const missing = new Set<string>();
  // `<criteria>` is substituted like the prompt but is not sent to the model: it selects evaluation templates.
  const texts: Record<string, string | undefined> = { prompt: fields.prompt, system: fields.system, model: fields.model, criteria };
  for (const [key, text] of Object.entries(texts)) {
    if (text === undefined) continue;
    const done = await expandText(text, env, call, mode);
    if (done.ok) out[key] = done.text;
    else if ("result" in done) return { ok: false, result: done.result };
    else for (const name of done.missing) missing.add(name);
  }
  if (missing.size > 0) {
    const names = [...missing].map((m) => `'${m}'`).join(", ");
    return { ok: false, result: inputFailure(`missing required input: ${names}`, { missing: [...missing] }) };
  }
  return {
    ok: true,
    fields: {
      ...sessionSettings(node),
      prompt: out["prompt"] ?? "",
      ...(out["system"] !== undefined ? { system: out["system"] } : {}),
      ...(out["model"] !== undefined ? { model: out["model"] } : {}),
    },
    ...(out["criteria"] !== undefined ? { criteria: out["criteria"] } : {}),
  };
}

/**
 * Checks (and, for text, converts) an argument against its declared parameter type: `string`, `integer`, `number`,
 * `boolean`, `array`, `object`. Other type names (`DataSet`, …) and untyped parameters accept anything.
 */
export function checkParam(type: string | undefined, value: unknown): { ok: true; value: unknown } | { ok: false } {
  const text = typeof value === "string" ? value.trim() : undefined;
  const json = (): unknown => {
    try {
      return text === undefined ? value : JSON.parse(text);
    } catch {
      return undefined;
    }
  };
  switch (type?.trim().toLowerCase()) {
    case "string":
      return typeof value === "string" ? { ok: true, value } : { ok: false };
    case "integer":
    case "number": {
      const n = typeof value === "number" ? value : text !== undefined && text !== "" ? Number(text) : Number.NaN;
      const fits = Number.isFinite(n) && (type.trim().toLowerCase() === "number" || Number.isInteger(n));
      return fits ? { ok: true, value: n } : { ok: false };
    }
    case "boolean":
      return typeof value === "boolean"
        ? { ok: true, value }
        : text === "true" || text === "false"
          ? { ok: true, value: text === "true" }
          : { ok: false };
    case "array": {
      const v = json();
      return Array.isArray(v) ? { ok: true, value: v } : { ok: false };
    }
    case "object": {
      const v = json();
      return typeof v === "object" && v !== null && !Array.isArray(v) ? { ok: true, value: v } : { ok: false };
    }
    default:
      return { ok: true, value };
  }
}
