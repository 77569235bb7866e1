/**
 * The parts of a template node (docs/task-language.md): source locations, task types, context settings, file paths,
 * output formats, input bindings, parameters, models, script and loop settings. Re-exported by
 * `machines/language/ast.ts`, which declares the nodes that hold them.
 */
import type { CallNode, ElementNode, StepNode } from "./ast.js";

/** 1-based position of an element's start tag (`<`) in the text the user wrote. */
export interface SourceLocation {
  /** 1-based line. */
  readonly line: number;
  /** 1-based column (UTF-16 code units). */
  readonly col: number;
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

/** How a call names its template (all three seed syntaxes): `<call template>`, `<call task>` or `<call><template>`. */
export type CallSyntax = "template-attribute" | "task-attribute" | "template-element";

/** A `<context_management>` block. Absent fields were not written in the template. */
export interface ContextManagement {
  readonly kind: "context_management";
  readonly loc: SourceLocation;
  /** `<inherit_context>`; legacy `true`/`false` are read as `full`/`none` with a warning. */
  readonly inheritContext?: InheritContext;
  /** `<accumulate_data>`. */
  readonly accumulateData?: boolean;
  /** `<accumulation_format>`, canonical spelling. */
  readonly accumulationFormat?: AccumulationFormat;
  /** `<fresh_context>`. */
  readonly freshContext?: FreshContext;
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
}

/** A `<file_paths>` block. */
export interface FilePaths {
  readonly kind: "file_paths";
  readonly loc: SourceLocation;
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
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
}

/** An `<output_format type schema>` element. */
export interface OutputFormat {
  readonly kind: "output_format";
  readonly loc: SourceLocation;
  /** `json` or `text`; `text` when the attribute is absent. */
  readonly type: "json" | "text";
  /** The `schema` attribute as written (`object`, `string[]`, …). */
  readonly schema?: string;
}

/** An `<input name from>` binding. */
export interface InputBinding {
  readonly kind: "input";
  readonly loc: SourceLocation;
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
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
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
export interface ModelSpec {
  readonly kind: "model";
  readonly loc: SourceLocation;
  /** Model id (text content, else the `preferred` attribute). */
  readonly name?: string;
  /** Comma-separated `fallback` attribute, trimmed. */
  readonly fallback: readonly string[];
}

/** `<tools>`: the tools the task's session is offered, by name or glob (`fs__*`); empty: none. */
export interface ToolList {
  readonly kind: "tools";
  readonly loc: SourceLocation;
  /** Names and globs, in the order written. */
  readonly patterns: readonly string[];
}

/** `<script_execution>` of a director–evaluator loop: a command or a call. */
export interface ScriptExecution {
  readonly kind: "script_execution";
  readonly loc: SourceLocation;
  /** `<command>` text (may contain `{{…}}`). */
  readonly command?: string;
  /** `<timeout>` in seconds. */
  readonly timeout?: number;
  /** `<inputs>` of the script. */
  readonly inputs: readonly InputBinding[];
  /** A `<call>` to run instead of a command; a command runs like `system:run_script`. */
  readonly call?: CallNode;
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
}

/** Environment of a script task: `<environment inherit="none"><var name>…</var></environment>`. */
export interface ScriptEnvironment {
  readonly kind: "environment";
  readonly loc: SourceLocation;
  /** The `inherit` attribute as written (`none`, `all`, …). */
  readonly inherit?: string;
  /** Children with a `name` attribute, as name/text pairs, in order. */
  readonly variables: readonly { readonly name: string; readonly value: string }[];
}

/** How a `script` task runs: `<execution>` or `<script>`, or loose `<command>`/`<timeout>`/`<environment>` children. */
export interface ScriptSpec {
  readonly kind: "execution";
  readonly loc: SourceLocation;
  /** Command line (may contain `{{…}}`). */
  readonly command?: string;
  /** Timeout in seconds. */
  readonly timeout?: number;
  /** Environment settings. */
  readonly environment?: ScriptEnvironment;
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
}

/** `<termination_condition>` of a director–evaluator loop (a safe expression, never `eval`). */
export interface TerminationCondition {
  readonly kind: "termination_condition";
  readonly loc: SourceLocation;
  /** Expressions of the `<condition>` children (or the element's own text), in order. */
  readonly conditions: readonly string[];
  /** Unsupported child elements, in document order. */
  readonly extra: readonly ElementNode[];
}

/** `<initial_value>` of a reduce task: literal text and/or a task producing it. */
export interface InitialValue {
  readonly kind: "initial_value";
  readonly loc: SourceLocation;
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
