/**
 * The typed AST of an XML task template (docs/task-language.md; choices in docs/design.md), and the outcome
 * of parsing one. Produced by `machines/language/parse.ts`; walked by the Evaluator.
 *
 * Every node is a plain JSON object discriminated on `kind` and carries the `loc` of its start tag.
 * Context settings hold only what the template states explicitly: defaults per operator are
 * applied by the runtime, not here. Constructs the runtime does not support still parse (into
 * {@link ElementNode} or {@link TaskNode.extra}); they fail at run time, never at parse time.
 *
 * The parts of a node come first (source locations, task types, context settings, file paths, output formats, input
 * bindings, parameters, models, script and loop settings), then the nodes that hold them: the two refer to each other.
 */

/** 1-based position of an element's start tag (`<`) in the text the user wrote. */
export interface SourceLocation {
  /** 1-based line. */
  readonly line: number;
  /** 1-based column (UTF-16 code units). */
  readonly col: number;
}

/** What every node and part of the AST carries: its `kind` and where its start tag stands. */
export interface Located<K extends string> {
  readonly kind: K;
  readonly loc: SourceLocation;
}

/** A node or part that keeps the child elements the runtime does not model, so nothing is lost. */
export interface KeepsExtra {
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
}

/** Task types the runtime knows (XSD enum). */
export type KnownTaskType =
  | "atomic"
  | "sequential"
  | "map"
  | "reduce"
  | "script"
  | "director_evaluator_loop"
  | "judge_loop"
  | "associative_memory";

/** A task `type`: a known type, or any other value seen in the wild (`map`, `reparse`, …). */
export type TaskType = KnownTaskType | (string & {});

/** `inherit_context`: parent context unchanged, none, or filtered by associative matching. */
export type InheritContext = "full" | "none" | "subset";

/** `accumulation_format`; the older `minimal`/`full` are read as `notes_only`/`full_output`. */
export type AccumulationFormat = "notes_only" | "full_output";

/** `fresh_context`: run associative matching for new context or not. */
export type FreshContext = "enabled" | "disabled";

/** Where explicit context files come from (docs/task-language.md#context). */
export type FilePathSource = "literal" | "command" | "description" | "context_description";

/** How a call names its template (templates in use spell it all three ways): `<call template>`, `<call task>` or `<call><template>`. */
export type CallSyntax = "template-attribute" | "task-attribute" | "template-element";

/** A `<context_management>` block. Absent fields were not written in the template. */
export interface ContextManagement extends Located<"context_management">, KeepsExtra {
  /** `<inherit_context>`; legacy `true`/`false` are read as `full`/`none` with a warning. */
  readonly inheritContext?: InheritContext;
  /** `<accumulate_data>`. */
  readonly accumulateData?: boolean;
  /** `<accumulation_format>`, canonical spelling. */
  readonly accumulationFormat?: AccumulationFormat;
  /** `<fresh_context>`. */
  readonly freshContext?: FreshContext;
}

/** A `<file_paths>` block. */
export interface FilePaths extends Located<"file_paths">, KeepsExtra {
  /** The `source` attribute, `literal` when absent. */
  readonly source: FilePathSource;
  /** `<path>` children (trimmed, empty ones dropped), in order. */
  readonly paths: readonly string[];
  /** `<command>` text, for `source="command"`. */
  readonly command?: string;
  /** `<description>` text, for `source="description"`. */
  readonly description?: string;
  /** `<context_query>` text, for `source="context_description"`. */
  readonly contextQuery?: string;
}

/** An `<output_format type schema>` element. */
export interface OutputFormat extends Located<"output_format"> {
  /** `json` or `text`; `text` when the attribute is absent. */
  readonly type: "json" | "text";
  /** The `schema` attribute as written (`object`, `string[]`, …). */
  readonly schema?: string;
}

/** An `<input name from>` binding. */
export interface InputBinding extends Located<"input">, KeepsExtra {
  /** Name the value is bound to. */
  readonly name: string;
  /** Environment variable (or dotted path) the value comes from (`from`: deprecated, yet in every example). */
  readonly from?: string;
  /** Literal text content, trimmed; absent when empty. */
  readonly value?: string;
  /** A nested task (or call) whose result is the value. */
  readonly task?: StepNode;
  /** Nested `<description>` of the expected input. */
  readonly description?: string;
  /** Nested `<expected_output>`. */
  readonly expectedOutput?: string;
}

/** A declared parameter of a function template or function-style task. */
export interface ParameterSpec {
  /** Parameter name, trimmed. */
  readonly name: string;
  /** Declared type (`string`, `integer`, `DataSet`, …), when given. */
  readonly type?: string;
  /** The `required` attribute, when given. */
  readonly required?: boolean;
  /** The `default` attribute, as text. */
  readonly default?: string;
  /** Text content of a `<parameter>` element. */
  readonly description?: string;
}

/** A declared return type: `returns="object"` or `<returns type items>text</returns>`. */
export interface ReturnSpec {
  /** The type name. */
  readonly type: string;
  /** Element type of an array, when given. */
  readonly items?: string;
  /** Text content of a `<returns>` element. */
  readonly description?: string;
}

/** A `<model>` element: text content or `preferred`, plus a `fallback` list. */
export interface ModelSpec extends Located<"model"> {
  /** Model id (text content, else the `preferred` attribute). */
  readonly name?: string;
  /** Comma-separated `fallback` attribute, trimmed. */
  readonly fallback: readonly string[];
}

/** `<tools>`: the tools the task's session is offered, by name or glob (`fs__*`); empty: none. */
export interface ToolList extends Located<"tools"> {
  /** Names and globs, in the order written. */
  readonly patterns: readonly string[];
}

/** `<script_execution>` of a director–evaluator loop: a command or a call. */
export interface ScriptExecution extends Located<"script_execution">, KeepsExtra {
  /** `<command>` text (may contain `{{…}}`). */
  readonly command?: string;
  /** `<timeout>` in seconds. */
  readonly timeout?: number;
  /** `<inputs>` of the script. */
  readonly inputs: readonly InputBinding[];
  /** A `<call>` to run instead of a command; a command runs like `system:run_script`. */
  readonly call?: CallNode;
}

/** Environment of a script task: `<environment inherit="none"><var name>…</var></environment>`. */
export interface ScriptEnvironment extends Located<"environment"> {
  /** The `inherit` attribute as written (`none`, `all`, …). */
  readonly inherit?: string;
  /** Children with a `name` attribute, as name/text pairs, in order. */
  readonly variables: readonly { readonly name: string; readonly value: string }[];
}

/** How a `script` task runs: `<execution>` or `<script>`, or loose `<command>`/`<timeout>`/`<environment>` children. */
export interface ScriptSpec extends Located<"execution">, KeepsExtra {
  /** Command line (may contain `{{…}}`). */
  readonly command?: string;
  /** Timeout in seconds. */
  readonly timeout?: number;
  /** Environment settings. */
  readonly environment?: ScriptEnvironment;
}

/** `<termination_condition>` of a director–evaluator loop (a safe expression, never `eval`). */
export interface TerminationCondition extends Located<"termination_condition">, KeepsExtra {
  /** Expressions of the `<condition>` children (or the element's own text), in order. */
  readonly conditions: readonly string[];
}

/** `<initial_value>` of a reduce task: literal text and/or a task producing it. */
export interface InitialValue extends Located<"initial_value"> {
  /** Text content, trimmed; absent when empty. */
  readonly value?: string;
  /** A nested task (or call) producing the value. */
  readonly task?: StepNode;
}

/** What `on_failure` of a map does when a branch fails. */
export type MapFailurePolicy = "fail_fast" | "collect";

/** The attributes of a `map` task (`over` also on a `reduce`, to fold over the elements of a list). */
export interface MapSpec {
  /** `max_parallel`: branches running at once (1–1000). */
  readonly maxParallel?: number;
  /** `on_failure`: `fail_fast` cancels the running branches at the first failure; `collect` waits for all. */
  readonly onFailure?: MapFailurePolicy;
  /** `over`: the variable path of the list whose elements the single step runs once for. */
  readonly over?: string;
  /** `as`: the name the element is bound to in its branch (`item` by default). */
  readonly as?: string;
}

/** The element that produced an implicit task (a body written directly inside the wrapper). */
export type ImplicitTaskOrigin = "director" | "evaluator" | "inner_task" | "reduction_task";

/** A `<task>`: the one executable unit with a prompt. Child order does not matter, as in the examples. */
export interface TaskNode extends Located<"task"> {
  /** The `type` attribute, `atomic` when absent, as nested step tasks assume. */
  readonly type: TaskType;
  /** The `subtype` attribute (free string). */
  readonly subtype?: string;
  /** The `name` attribute (library entries, function-style tasks). */
  readonly name?: string;
  /** The `ref` attribute: a task registered in the library. */
  readonly ref?: string;
  /** `parameters`/`params` attribute or `<parameters>` child (both syntaxes are in use). */
  readonly parameters?: readonly ParameterSpec[];
  /** `returns` attribute or `<returns>` child. */
  readonly returns?: ReturnSpec;
  /** Main prompt text (`{{…}}` not yet substituted). */
  readonly description?: string;
  /** Task prompt (`<instructions>`). */
  readonly instructions?: string;
  /** System prompt addition (`<system>`). */
  readonly system?: string;
  /** `<model>`. */
  readonly model?: ModelSpec;
  /** `<tools>`: the tools its session is offered instead of the Handler's default. */
  readonly tools?: ToolList;
  /** `max_turns` attribute (1–100): the session's turn limit instead of the Handler's. */
  readonly maxTurns?: number;
  /** `temperature` attribute (0–2), sent with every model call of the session. */
  readonly temperature?: number;
  /** `max_output_tokens` attribute: the largest completion of one model call, instead of the Handler's. */
  readonly maxOutputTokens?: number;
  /** `<provider>` id. */
  readonly provider?: string;
  /** `<criteria>`: free text, or a list of `<criterion>`/`<item>` children (templates write it both ways). */
  readonly criteria?: string | readonly string[];
  /** `<expected_output>` text. */
  readonly expectedOutput?: string;
  /** `<input>` bindings (from `<inputs>` or written directly), in order. */
  readonly inputs: readonly InputBinding[];
  /** `<context_management>`. */
  readonly contextManagement?: ContextManagement;
  /** `<file_paths>`. */
  readonly filePaths?: FilePaths;
  /** `<output_format>`. */
  readonly outputFormat?: OutputFormat;
  /** `<steps>` children, in order; present only when `<steps>` is written. */
  readonly steps?: readonly StepNode[];
  /** map (and reduce's `over`/`as`): the fan-out attributes. */
  readonly map?: MapSpec;
  /** reduce: `<initial_value>`. */
  readonly initialValue?: InitialValue;
  /** reduce: `<inner_task>`. */
  readonly innerTask?: StepNode;
  /** reduce: `<reduction_task>`. */
  readonly reductionTask?: StepNode;
  /** director–evaluator loop: `<director>`. */
  readonly director?: StepNode;
  /** director–evaluator loop: `<evaluator>`. */
  readonly evaluator?: StepNode;
  /** director–evaluator loop: `<script_execution>`. */
  readonly scriptExecution?: ScriptExecution;
  /** director–evaluator loop: `<max_iterations>` (positive integer). */
  readonly maxIterations?: number;
  /** director–evaluator loop: `<termination_condition>`. */
  readonly terminationCondition?: TerminationCondition;
  /** script task: command, timeout and environment. */
  readonly execution?: ScriptSpec;
  /** `<output_slot>`: the env variable a sequential step's output is bound to for the later steps (earlier format, still accepted). */
  readonly outputSlot?: string;
  /** `<input_source>`: the env variable whose value is this task's `input` (earlier format, still accepted). */
  readonly inputSource?: string;
  /** `<disable_reparsing>`. */
  readonly disableReparsing?: boolean;
  /** `<manual_xml>`. */
  readonly manualXml?: boolean;
  /** Set when this task was built from the body of a wrapper element, not from a `<task>`. */
  readonly origin?: ImplicitTaskOrigin;
  /** Non-blank text written directly inside the task (e.g. `...`), trimmed. */
  readonly text?: string;
  /** Attributes other than type/subtype/name/ref/parameters/params/returns/max_turns/temperature/max_output_tokens (and a map's or reduce's max_parallel/on_failure/over/as). */
  readonly attributes: Readonly<Record<string, string>>;
  /** Child elements the runtime does not model (`code`, `continuation_policy`, …), in document order. */
  readonly extra: readonly ElementNode[];
}

/** One argument of a call: positional, or named with `<arg name="…">`. */
export interface CallArg {
  readonly loc: SourceLocation;
  /** The `name` attribute, for a named argument. */
  readonly name?: string;
  /** Trimmed text (a variable name, path or literal; resolved at run time), or a nested node. */
  readonly value: string | StepNode;
}

/** A `<call>` of a function template, normalised from the three syntaxes templates use. */
export interface CallNode extends Located<"call">, KeepsExtra {
  /** Name of the called template. */
  readonly templateName: string;
  /** Which syntax named it. */
  readonly syntax: CallSyntax;
  /** `<arg>` children, in order. */
  readonly args: readonly CallArg[];
}

/** One `<case test>` of a `<cond>`. */
export interface CondCase {
  readonly loc: SourceLocation;
  /** The test expression as written. */
  readonly test: string;
  /** The case's children, in order. */
  readonly body: readonly StepNode[];
}

/** `<cond>`: run the first case whose test is true; the test language and the result when none matches are in docs/task-language.md. */
export interface CondNode extends Located<"cond">, KeepsExtra {
  /** The cases, in order. */
  readonly cases: readonly CondCase[];
}

/** A function template: `<template name params returns>` or a function-style `<task name parameters>`. */
export interface TemplateNode extends Located<"template">, KeepsExtra {
  /** Template name. */
  readonly name: string;
  /** Parameter names in declared order, trimmed. */
  readonly params: readonly string[];
  /** Parameter declarations (names only when declared by an attribute). */
  readonly paramSpecs: readonly ParameterSpec[];
  /** Declared return type. */
  readonly returns?: ReturnSpec;
  /** The body: the first task/call/cond child, or the function-style task itself. */
  readonly body: ExecutableNode;
  /** Which syntax defined it. */
  readonly form: "template" | "task";
}

/** A `<library>` of named task definitions (proposal only). */
export interface LibraryNode extends Located<"library"> {
  /** The `name` attribute, when given. */
  readonly name?: string;
  /** The children, in order. */
  readonly entries: readonly StepNode[];
}

/** `<function name><parameters><param/></parameters><body>…</body></function>`: parsed so templates holding one load; it never runs. */
export interface FunctionNode extends Located<"function">, KeepsExtra {
  /** Function name. */
  readonly name: string;
  /** `<param>` declarations, in order. */
  readonly params: readonly ParameterSpec[];
  /** `<returns>`, when given. */
  readonly returns?: ReturnSpec;
  /** Children of `<body>`, in order. */
  readonly body: readonly StepNode[];
}

/** A prose element on its own (`<description>`, `<instructions>`, `<system>`, …). */
export interface TextPiece extends Located<"text"> {
  /** Element name. */
  readonly element: string;
  /** Text content, trimmed. */
  readonly text: string;
}

/** An `<inputs>` list on its own. */
export interface InputList extends Located<"inputs">, KeepsExtra {
  /** The bindings, in order. */
  readonly inputs: readonly InputBinding[];
}

/** The typed content of a fragment document. */
export type FragmentPiece =
  | ContextManagement
  | FilePaths
  | OutputFormat
  | ScriptExecution
  | ScriptSpec
  | InputBinding
  | InputList
  | TerminationCondition
  | ModelSpec
  | TextPiece;

/** A top-level element that is a piece of a task (`<context_management>`, `<file_paths>`, …). */
export interface FragmentNode extends Located<"fragment"> {
  /** The typed piece. */
  readonly piece: FragmentPiece;
}

/** Any element the parser does not model, kept verbatim so nothing is lost. */
export interface ElementNode extends Located<"element"> {
  /** Element name as written (namespace prefix included). */
  readonly name: string;
  /** All attributes. */
  readonly attributes: Readonly<Record<string, string>>;
  /** Direct text content, trimmed. */
  readonly text: string;
  /** Child elements, in order. */
  readonly children: readonly ElementNode[];
}

/** A node the Evaluator can run. */
export type ExecutableNode = TaskNode | CallNode | CondNode;

/** What may stand where a task may: executable nodes, or an unsupported element (fails at run time). */
export type StepNode = ExecutableNode | ElementNode;

/** A top-level node other than a template definition. */
export type TopLevelNode = ExecutableNode | LibraryNode | FunctionNode | FragmentNode | ElementNode;

/** Any AST node. */
export type TemplateAstNode = TopLevelNode | TemplateNode;

/** A parsed template text. */
export interface TemplateDocument {
  /** Function templates defined at top level (`<template>` and function-style `<task>`), in order. */
  readonly templates: readonly TemplateNode[];
  /** Every other top-level element, in order. */
  readonly nodes: readonly TopLevelNode[];
  /** The first top-level task/call/cond; absent when the text only defines templates or is a fragment. */
  readonly entry?: ExecutableNode;
}

/** Kinds of non-fatal findings. */
export type TemplateWarningKind =
  /** `fresh_context=enabled` with `inherit_context` other than `none` (a warning, not an error: many existing templates do it). */
  | "fresh-context-conflict"
  /** `inherit_context=none`, `accumulate_data=false`, `fresh_context=disabled` and no file paths: no context at all. */
  | "no-context"
  /** A legacy value read as its canonical form: `minimal`/`full` (older names), `inherit_context` `true`/`false`. */
  | "value-alias"
  /** An element the runtime does not model; kept in `extra` or as an {@link ElementNode}. */
  | "unsupported-element"
  /** A task `type` outside {@link KnownTaskType}; it parses, and the runtime decides whether it can run it. */
  | "unsupported-task-type"
  /** A single-valued child written twice; the first one is used. */
  | "duplicate-element"
  /** Non-blank text where only elements are expected; ignored (or kept in `TaskNode.text`). */
  | "stray-text"
  /** `<tools>`, `max_turns`, `temperature` or `max_output_tokens` on a task that runs no session of its own (a sequential, …). */
  | "ignored-setting";

/** A non-fatal finding, located at the element it concerns. */
export interface TemplateWarning {
  readonly kind: TemplateWarningKind;
  /** Short, lowercase explanation naming the element and value. */
  readonly message: string;
  /** 1-based line. */
  readonly line: number;
  /** 1-based column. */
  readonly col: number;
}

/** Why a template was refused: not XML, not well-formed, or semantically invalid (unknown enum values too). */
export interface TemplateError {
  readonly code: "INVALID_TEMPLATE";
  /** Short, lowercase explanation naming the offending element or value. */
  readonly message: string;
  /** 1-based line of the problem. */
  readonly line: number;
  /** 1-based column of the problem. */
  readonly col: number;
  /** The element concerned, when the problem is semantic. */
  readonly element?: string;
}

/** Result of `parseTemplate`. */
export type ParseOutcome =
  | { readonly ok: true; readonly document: TemplateDocument; readonly warnings: readonly TemplateWarning[] }
  | { readonly ok: false; readonly error: TemplateError };
