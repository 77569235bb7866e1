/**
 * The pure half of the Compiler: the prompts it sends, reading the XML out of a model answer, and checking it
 * with the template parser. No I/O; `compiler.ts` drives the model with these.
 */
import type { ChatMessage } from "../../machines/handler/session.js";
import { MAX_COMPILE_PROMPT_CHARS, type CompileRequest, type TaskError, type TaskId } from "../../protocol/index.js";
import { parseTemplate } from "../../machines/language/parse.js";

/** The system prompt of every compilation: the task language, briefly. */
export const COMPILER_SYSTEM_PROMPT = `You are the dirigent task compiler. You turn a request into a task template written in the dirigent task XML language. Answer with the XML only: no prose, no Markdown fences.

The language:
- A template is one top-level <task type="..."> element (type defaults to atomic). <description> holds the task's prompt; an optional <system> adds to the model's system prompt.
- atomic: one model session answers the <description>.
- sequential: <steps> holds <task> elements that run in order. A step sees {{previous_result}} (the output of the step before) and {{step_results[0]}}, {{step_results[1]}}, ... (all earlier outputs).
- reduce: <inputs> lists the items; <inner_task> runs once per item with {{current_input}} and {{input_name}}; <reduction_task> folds its output {{current_result}} into {{accumulator}}; the optional <initial_value> is the first accumulator. The result is the last accumulator.
- script: <command>program arg {{var}}</command> and <timeout>seconds</timeout> run a program (argv, no shell). Use it only when the request asks to run a command.
- director_evaluator_loop: <max_iterations>N</max_iterations>, <director><description>... {{evaluation_feedback}}</description></director>, <evaluator><description>judge {{director_result}}; answer JSON {"success": true|false, "feedback": "..."}</description></evaluator>, optional <termination_condition><condition>evaluation.success === true</condition></termination_condition>.
- <inputs><input name="topic">a literal value</input><input name="draft" from="step_results[0]"/></inputs> inside a <task> binds variables for it. {{name}} inserts a variable; every variable used must be bound. On the top-level task a literal <input> is a default that a submitted input of the same name replaces.
- Write & as &amp; and < as &lt; in text.

Example:
<task type="sequential">
  <inputs><input name="topic">tide pools</input></inputs>
  <steps>
    <task><description>List three facts about {{topic}}, one per line.</description></task>
    <task><description>Write one paragraph about {{topic}} from these facts:
{{previous_result}}</description></task>
  </steps>
</task>`;

/** Warnings that mean the model left the language: fed back as errors, so the template runs as written. */
const STRICT_WARNINGS: ReadonlySet<string> = new Set(["unsupported-element", "unsupported-task-type", "stray-text"]);

/** The first user message of a compilation. */
export function requestMessage(request: CompileRequest): string {
  const names = request.inputNames ?? [];
  const inputs =
    names.length > 0
      ? `The task is run with these inputs, usable as variables: ${names.map((n) => `{{${n}}}`).join(", ")}. Bind any other variable with an <input>.`
      : "The task is run with no inputs: write the values into the template, or bind them with <input> defaults on the top-level task.";
  if (request.mode !== "decompose") return `Write a task template for this request.\n\nRequest:\n${request.prompt}\n\n${inputs}`;
  const failed = request.failed;
  return [
    `A task node failed because it ran out of resources: ${failed?.error ?? "unknown error"}`,
    "",
    "What the node had to do:",
    request.prompt,
    ...(failed?.xml ? ["", "The node as written:", failed.xml] : []),
    "",
    'Rewrite it as one <task type="sequential"> or <task type="reduce"> that splits the work into smaller atomic steps, each small enough to finish well within the limit. Keep the variables the node used; they stay bound.',
    names.length > 0 ? `Bound variables: ${names.map((n) => `{{${n}}}`).join(", ")}.` : "",
  ]
    .join("\n")
    .trimEnd();
}

/** One line saying why a node failed, for a decompose request: `context limit reached: … (used 130000 of 102400)`. */
export function describeFailure(error: TaskError): string {
  if (error.type !== "RESOURCE_EXHAUSTION") return `${error.type}: ${error.message}`;
  const metrics = error.metrics ? ` (used ${error.metrics.used} of ${error.metrics.limit})` : "";
  return `${error.resource} limit reached: ${error.message}${metrics}`;
}

/**
 * The request that asks the Compiler to split a node that failed (typically with `RESOURCE_EXHAUSTION`) into a
 * `sequential` or `reduce` sub-tree. Texts longer than the protocol allows are cut.
 * @example ask(deps, Requests.compile, decomposeRequest({ taskId, prompt: node.description, error }), …)
 */
export function decomposeRequest(node: {
  /** What the node had to do (its substituted description). */
  prompt: string;
  /** Why it failed. */
  error: TaskError;
  /** The node's XML, when at hand. */
  xml?: string;
  taskId?: TaskId;
  /** The node's path in the template tree. */
  nodePath?: string;
  /** Variables the sub-tree may use. */
  inputNames?: readonly string[];
  maxAttempts?: number;
}): CompileRequest {
  const cut = (text: string) => (text.length > MAX_COMPILE_PROMPT_CHARS ? text.slice(0, MAX_COMPILE_PROMPT_CHARS) : text);
  return {
    type: "compiler.compile",
    mode: "decompose",
    prompt: cut(node.prompt.trim() === "" ? "(the node had no description)" : node.prompt),
    failed: { error: cut(describeFailure(node.error)), ...(node.xml === undefined ? {} : { xml: cut(node.xml) }) },
    ...(node.taskId === undefined ? {} : { taskId: node.taskId }),
    ...(node.nodePath === undefined ? {} : { nodePath: node.nodePath }),
    ...(node.inputNames === undefined ? {} : { inputNames: [...node.inputNames] }),
    ...(node.maxAttempts === undefined ? {} : { maxAttempts: node.maxAttempts }),
  };
}

/** The opening messages of a compilation. */
export function initialMessages(request: CompileRequest): ChatMessage[] {
  return [
    { role: "system", content: COMPILER_SYSTEM_PROMPT },
    { role: "user", content: requestMessage(request) },
  ];
}

/** The user message that feeds validation errors back to the model. */
export function retryMessage(errors: readonly string[]): string {
  return `That answer is not a valid template:\n${errors.map((e) => `- ${e}`).join("\n")}\nAnswer again with the whole corrected XML only.`;
}

const FENCE = /```[\w-]*[ \t]*\r?\n([\s\S]*?)```/g;
const CLOSING = /<\/[A-Za-z_][\w.:-]*\s*>|\/>/g;

/**
 * Takes the template out of a model answer: the first Markdown fence that holds markup, if any, then the text from
 * the first element (or comment or declaration) to the end of the last closing tag.
 * @example extractXml("Here it is:\n```xml\n<task/>\n```") // "<task/>"
 */
export function extractXml(answer: string): string {
  let text = answer;
  for (const fence of answer.matchAll(FENCE)) {
    if (fence[1]?.includes("<")) {
      text = fence[1];
      break;
    }
  }
  const start = text.search(/<[A-Za-z!?_]/);
  if (start < 0) return text.trim();
  let end = -1;
  for (const close of text.matchAll(CLOSING)) end = close.index + close[0].length;
  if (end <= start) end = text.lastIndexOf(">") + 1;
  return end > start ? text.slice(start, end) : text.slice(start).trim();
}

/** Outcome of {@link checkTemplate}: the errors are one line each, located when the parser located them. */
export type TemplateCheck = { ok: true } | { ok: false; errors: string[]; line?: number; col?: number };

/**
 * Validates compiled XML with the template parser, stricter than a submission: unknown elements, unknown task
 * types and stray text are errors too. In `decompose` mode the entry must be a `sequential` (two steps or more)
 * or `reduce` task.
 */
export function checkTemplate(xml: string, mode: CompileRequest["mode"] = "compile"): TemplateCheck {
  if (xml.trim() === "") return { ok: false, errors: ["the answer holds no XML: answer with one <task> element"] };
  const parsed = parseTemplate(xml);
  if (!parsed.ok) {
    const { message, line, col } = parsed.error;
    return { ok: false, errors: [`line ${line}, col ${col}: ${message}`], line, col };
  }
  const errors = parsed.warnings.filter((w) => STRICT_WARNINGS.has(w.kind)).map((w) => `line ${w.line}, col ${w.col}: ${w.message}`);
  const entry = parsed.document.entry;
  if (!entry) errors.push("the template defines no task to run: write one top-level <task>");
  else if (mode === "decompose") {
    if (entry.kind !== "task" || (entry.type !== "sequential" && entry.type !== "reduce")) {
      const got = entry.kind === "task" ? `type '${entry.type}'` : `<${entry.kind}>`;
      errors.push(`a decomposition must be one <task type="sequential"> or <task type="reduce">, got ${got}`);
    } else if (entry.type === "sequential" && (entry.steps?.length ?? 0) < 2) {
      errors.push("a sequential decomposition needs at least two <steps>");
    }
  }
  const first = parsed.warnings.find((w) => STRICT_WARNINGS.has(w.kind));
  return errors.length === 0 ? { ok: true } : { ok: false, errors, ...(first ? { line: first.line, col: first.col } : {}) };
}
