/**
 * Builders for executable and defining nodes: `<task>` (all types), `<call>` (three syntaxes), `<cond>`,
 * `<template>` and function-style tasks, `<library>` and `<function>` (parsed so templates holding one load; it never runs).
 */
import type {
  CallArg,
  CallNode,
  CallSyntax,
  CondCase,
  CondNode,
  ElementNode,
  ExecutableNode,
  FunctionNode,
  ImplicitTaskOrigin,
  InputBinding,
  LibraryNode,
  ParameterSpec,
  ReturnSpec,
  ScriptSpec,
  StepNode,
  TaskNode,
  TemplateNode,
} from "./ast.js";
import {
  addScriptSetting,
  checkContext,
  contextManagement,
  filePaths,
  initialValue,
  inputBinding,
  inputList,
  misplacedOr,
  modelSpec,
  outputFormat,
  parameterList,
  returnsElement,
  scriptExecution,
  scriptSpec,
  MAP_ATTRIBUTE_NAMES,
  mapAttributes,
  SESSION_ATTRIBUTE_NAMES,
  sessionAttributes,
  terminationCondition,
  toolList,
} from "./task-elements.js";
import {
  type BuildContext,
  type Mutable,
  childElements,
  criteria,
  ignoredSettings,
  KNOWN_TYPES,
  NO_SESSION,
  mergeScript,
  directText,
  fail,
  firstOnly,
  prose,
  readBoolean,
  rawElement,
  readPositiveInt,
  splitList,
  strayText,
  unsupported,
  didYouMean,
  TASK_ATTRIBUTE_VOCABULARY,
} from "./values.js";
import type { XmlElement } from "./xml.js";

/** An associative memory task's `<query>` and `<constraints>`, and any task's `<context_relevance>`: kept as elements in `extra`. */
const MEMORY_CHILDREN = new Set(["query", "constraints", "context_relevance"]);
/** judge_loop: its `<worker>`/`<judge>`/`<intake>` system prompts, kept as elements in `extra`. */
const JUDGE_LOOP_PROMPTS = new Set(["worker", "judge", "intake", "criteria_judge"]);
const TASK_ATTRIBUTES = new Set([
  "type",
  "subtype",
  "name",
  "ref",
  "parameters",
  "params",
  "returns",
  ...SESSION_ATTRIBUTE_NAMES,
  ...MAP_ATTRIBUTE_NAMES,
]);
const PROSE = new Set(["description", "instructions", "system", "provider", "expected_output"]);
const WRAPPERS: readonly ImplicitTaskOrigin[] = ["director", "evaluator", "inner_task", "reduction_task"];

/** Whether `name` is an element that stands for an executable node. */
export function isExecutable(name: string): boolean {
  return name === "task" || name === "call" || name === "cond";
}

/** The node for an element in task position; anything but task/call/cond is kept as an element. */
export function buildStep(ctx: BuildContext, el: XmlElement): StepNode {
  if (el.name === "task") return buildTask(ctx, el);
  if (el.name === "call") return buildCall(ctx, el);
  if (el.name === "cond") return buildCond(ctx, el);
  return misplacedOr(ctx, el, "steps");
}

/** `<task>` (or the body of a wrapper such as `<director>`, as an implicit task). */
export function buildTask(ctx: BuildContext, el: XmlElement, origin?: ImplicitTaskOrigin): TaskNode {
  const type = el.attrs.type?.trim() || "atomic";
  // `director` and `evaluator` as types (templates in the earlier format) are atomic tasks with that role (docs/task-language.md).
  if (!KNOWN_TYPES.some((known) => known === type) && type !== "director" && type !== "evaluator") {
    const expected = `${KNOWN_TYPES.slice(0, -1).join(", ")} or ${KNOWN_TYPES.at(-1) ?? ""}`;
    ctx.warn("unsupported-task-type", `unknown task type '${type}' (expected ${expected})`, el.loc);
  }
  const task: Mutable<TaskNode> = { kind: "task", loc: el.loc, type, inputs: [], attributes: {}, extra: [], ...sessionAttributes(el) };
  const attributes: Record<string, string> = {};
  for (const [key, value] of Object.entries(el.attrs)) {
    if (!TASK_ATTRIBUTE_VOCABULARY.has(key))
      fail(el, `unknown attribute ${key} of <${el.name}>${didYouMean(key, TASK_ATTRIBUTE_VOCABULARY, (n) => n)}`);
    if (!TASK_ATTRIBUTES.has(key)) attributes[key] = value;
  }
  task.attributes = attributes;
  if (origin !== undefined) task.origin = origin;
  if (el.attrs.subtype !== undefined) task.subtype = el.attrs.subtype.trim();
  if (el.attrs.name !== undefined) task.name = el.attrs.name.trim();
  if (el.attrs.ref !== undefined) task.ref = el.attrs.ref.trim();
  const declared = el.attrs.parameters ?? el.attrs.params;
  if (declared !== undefined) task.parameters = splitList(declared).map((name) => ({ name }));
  if (el.attrs.returns !== undefined) task.returns = { type: el.attrs.returns.trim() };
  const text = strayText(ctx, el);
  if (text !== "") task.text = text;

  const inputs: InputBinding[] = [];
  const extra: ElementNode[] = [];
  const seen = new Set<string>();
  let execution: Mutable<ScriptSpec> | undefined;
  let loose: Mutable<ScriptSpec> | undefined;
  for (const child of childElements(el)) {
    const name = child.name;
    if (name === "inputs") {
      const list = inputList(ctx, child);
      inputs.push(...list.inputs);
      extra.push(...list.extra);
      continue;
    }
    if (name === "input") {
      inputs.push(inputBinding(ctx, child));
      continue;
    }
    if (name === "command" || name === "timeout" || name === "environment") {
      loose ??= { kind: "execution", loc: child.loc, extra: [] };
      addScriptSetting(ctx, loose, child, seen);
      continue;
    }
    if ((type === "judge_loop" && JUDGE_LOOP_PROMPTS.has(name)) || MEMORY_CHILDREN.has(name)) {
      extra.push(rawElement(child));
      continue;
    }
    if (!TASK_CHILDREN.has(name)) {
      extra.push(misplacedOr(ctx, child, el.name));
      continue;
    }
    if (!firstOnly(ctx, seen, child, el.name, name === "script" ? "execution" : name)) continue;
    if (name === "provider" && !/^[A-Za-z0-9_.-]{1,100}$/.test(directText(child).trim()))
      fail(
        child,
        `invalid <provider> '${directText(child).trim().slice(0, 40)}': expected the name of a provider (letters, digits, '_', '.', '-')`,
      );
    if (PROSE.has(name)) setProse(task, name, prose(ctx, child));
    else if (name === "criteria") task.criteria = criteria(ctx, child);
    else if (name === "model") task.model = modelSpec(child);
    else if (name === "tools") task.tools = toolList(ctx, child);
    else if (name === "context_management") task.contextManagement = contextManagement(ctx, child);
    else if (name === "file_paths") task.filePaths = filePaths(ctx, child);
    else if (name === "output_format") task.outputFormat = outputFormat(ctx, child);
    else if (name === "steps") task.steps = steps(ctx, child);
    else if (name === "initial_value") task.initialValue = initialValue(ctx, child);
    else if (name === "script_execution") task.scriptExecution = scriptExecution(ctx, child);
    else if (name === "max_iterations") task.maxIterations = readPositiveInt(child);
    else if (name === "termination_condition") task.terminationCondition = terminationCondition(ctx, child);
    else if (name === "execution" || name === "script") execution = scriptSpec(ctx, child);
    else if (name === "output_slot" || name === "input_source") setSlot(task, name, directText(child).trim());
    else if (name === "disable_reparsing") task.disableReparsing = readBoolean(child, directText(child));
    else if (name === "manual_xml") task.manualXml = readBoolean(child, directText(child));
    else if (name === "parameters") task.parameters = parameterList(ctx, child);
    else if (name === "returns") task.returns = returnsElement(child);
    else setWrapper(task, name, wrapperBody(ctx, child));
  }
  const script = mergeScript(execution, loose);
  if (script !== undefined) task.execution = script;
  task.inputs = inputs;
  task.extra = extra;
  const map = mapAttributes(el, type, task.steps?.length);
  if (map !== undefined) task.map = map;
  if (task.contextManagement !== undefined) checkContext(ctx, task.contextManagement, task.filePaths !== undefined);
  if (NO_SESSION.has(type)) ignoredSettings(ctx, task);
  return task;
}

const TASK_CHILDREN = new Set([
  ...PROSE,
  ...WRAPPERS,
  "criteria",
  "model",
  "tools",
  "context_management",
  "file_paths",
  "output_format",
  "steps",
  "initial_value",
  "script_execution",
  "max_iterations",
  "termination_condition",
  "execution",
  "script",
  "disable_reparsing",
  "manual_xml",
  "parameters",
  "returns",
  "output_slot",
  "input_source",
]);

function setSlot(task: Mutable<TaskNode>, name: "output_slot" | "input_source", variable: string): void {
  if (variable === "") return;
  if (name === "output_slot") task.outputSlot = variable;
  else task.inputSource = variable;
}

function setProse(task: Mutable<TaskNode>, name: string, text: string): void {
  if (name === "description") task.description = text;
  else if (name === "instructions") task.instructions = text;
  else if (name === "system") task.system = text;
  else if (name === "provider") task.provider = text;
  else task.expectedOutput = text;
}

function setWrapper(task: Mutable<TaskNode>, name: string, body: StepNode): void {
  if (name === "director") task.director = body;
  else if (name === "evaluator") task.evaluator = body;
  else if (name === "inner_task") task.innerTask = body;
  else task.reductionTask = body;
}

// A wrapper holds either exactly one task/call/cond, or a task body written in place (the documented D-E form).
function wrapperBody(ctx: BuildContext, el: XmlElement): StepNode {
  const children = childElements(el);
  const only = children[0];
  if (children.length === 1 && only !== undefined && isExecutable(only.name) && directText(el) === "") {
    return buildStep(ctx, only);
  }
  return buildTask(
    ctx,
    el,
    WRAPPERS.find((origin) => origin === el.name),
  );
}

function steps(ctx: BuildContext, el: XmlElement): StepNode[] {
  strayText(ctx, el);
  return childElements(el).map((child) => (isExecutable(child.name) ? buildStep(ctx, child) : misplacedOr(ctx, child, el.name)));
}

/** `<call>` in any of its three syntaxes, normalised to a template name and ordered args. */
export function buildCall(ctx: BuildContext, el: XmlElement): CallNode {
  const named: { name: string; syntax: CallSyntax }[] = [];
  if (el.attrs.template !== undefined) named.push({ name: el.attrs.template.trim(), syntax: "template-attribute" });
  if (el.attrs.task !== undefined) named.push({ name: el.attrs.task.trim(), syntax: "task-attribute" });
  const args: CallArg[] = [];
  const extra: ElementNode[] = [];
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name === "template") named.push({ name: directText(child), syntax: "template-element" });
    else if (child.name === "arg") args.push(callArg(ctx, child));
    else extra.push(misplacedOr(ctx, child, el.name));
  }
  const first = named.find((n) => n.name !== "");
  if (first === undefined) {
    return fail(el, `<call> needs a template name: template="…", task="…" or a <template> child`);
  }
  const other = named.find((n) => n.name !== "" && n.name !== first.name);
  if (other !== undefined) fail(el, `<call> names two templates: '${first.name}' and '${other.name}'`);
  return { kind: "call", loc: el.loc, templateName: first.name, syntax: first.syntax, args, extra };
}

function callArg(ctx: BuildContext, el: XmlElement): CallArg {
  const nodes = childElements(el);
  const executable = nodes.find((child) => isExecutable(child.name));
  for (const child of nodes) if (child !== executable) misplacedOr(ctx, child, el.name);
  const value: string | StepNode = executable === undefined ? prose(ctx, el) : buildStep(ctx, executable);
  const name = el.attrs.name?.trim();
  return name === undefined || name === "" ? { loc: el.loc, value } : { loc: el.loc, name, value };
}

/** `<cond>` with `<case test>` children. */
export function buildCond(ctx: BuildContext, el: XmlElement): CondNode {
  const cases: CondCase[] = [];
  const extra: ElementNode[] = [];
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name !== "case") {
      extra.push(misplacedOr(ctx, child, el.name));
      continue;
    }
    const test = child.attrs.test?.trim();
    if (test === undefined || test === "") fail(child, "<case> needs a 'test' attribute");
    strayText(ctx, child);
    const body = childElements(child).map((node) => (isExecutable(node.name) ? buildStep(ctx, node) : misplacedOr(ctx, node, "case")));
    cases.push({ loc: child.loc, test, body });
  }
  return { kind: "cond", loc: el.loc, cases, extra };
}

/** Whether a top-level `<task>` is a function-style template: a name plus declared parameters. */
export function isFunctionStyleTask(el: XmlElement): boolean {
  const named = el.attrs.name !== undefined && el.attrs.name.trim() !== "";
  const declares =
    el.attrs.parameters !== undefined || el.attrs.params !== undefined || childElements(el).some((c) => c.name === "parameters");
  return el.name === "task" && named && declares;
}

/** `<template name params returns>` with one task/call/cond body. */
export function buildTemplate(ctx: BuildContext, el: XmlElement): TemplateNode {
  const name = el.attrs.name?.trim();
  if (name === undefined || name === "") fail(el, "<template> needs a 'name' attribute");
  const params = splitList(el.attrs.params ?? el.attrs.parameters ?? "");
  let body: ExecutableNode | undefined;
  const extra: ElementNode[] = [];
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (!isExecutable(child.name)) extra.push(misplacedOr(ctx, child, el.name));
    else if (body !== undefined) extra.push(unsupported(ctx, child, el.name));
    else body = asExecutable(buildStep(ctx, child));
  }
  if (body === undefined) return fail(el, `<template> '${name}' has no body: expected a <task>, <call> or <cond>`);
  const template: Mutable<TemplateNode> = {
    kind: "template",
    loc: el.loc,
    name,
    params,
    paramSpecs: params.map((p) => ({ name: p })),
    body,
    form: "template",
    extra,
  };
  if (el.attrs.returns !== undefined) template.returns = { type: el.attrs.returns.trim() };
  return template;
}

/** A function-style `<task name parameters returns>` as a template whose body is the task itself. */
export function buildTaskTemplate(ctx: BuildContext, el: XmlElement): TemplateNode {
  const task = buildTask(ctx, el);
  const specs: readonly ParameterSpec[] = task.parameters ?? [];
  const template: Mutable<TemplateNode> = {
    kind: "template",
    loc: el.loc,
    name: task.name ?? "",
    params: specs.map((s) => s.name),
    paramSpecs: specs,
    body: task,
    form: "task",
    extra: [],
  };
  if (task.returns !== undefined) template.returns = task.returns;
  return template;
}

/** `<library>` of named tasks. */
export function buildLibrary(ctx: BuildContext, el: XmlElement): LibraryNode {
  strayText(ctx, el);
  const entries = childElements(el).map((child) => (isExecutable(child.name) ? buildStep(ctx, child) : misplacedOr(ctx, child, el.name)));
  const name = el.attrs.name?.trim();
  return name === undefined ? { kind: "library", loc: el.loc, entries } : { kind: "library", loc: el.loc, name, entries };
}

/** `<function name><parameters/><body/></function>`: parsed so templates holding one load; it never runs. */
export function buildFunction(ctx: BuildContext, el: XmlElement): FunctionNode {
  let name = el.attrs.name?.trim() ?? "";
  let params: ParameterSpec[] = [];
  let returns: ReturnSpec | undefined;
  const body: StepNode[] = [];
  const extra: ElementNode[] = [];
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name === "name" && name === "") name = directText(child);
    else if (child.name === "parameters") params = parameterList(ctx, child);
    else if (child.name === "returns") returns = returnsElement(child);
    else if (child.name === "body") {
      for (const node of childElements(child)) body.push(isExecutable(node.name) ? buildStep(ctx, node) : misplacedOr(ctx, node, "body"));
    } else extra.push(misplacedOr(ctx, child, el.name));
  }
  if (name === "") fail(el, "<function> needs a 'name' attribute");
  const fn: Mutable<FunctionNode> = { kind: "function", loc: el.loc, name, params, body, extra };
  if (returns !== undefined) fn.returns = returns;
  return fn;
}

function asExecutable(node: StepNode): ExecutableNode | undefined {
  return node.kind === "element" ? undefined : node;
}
