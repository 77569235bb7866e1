/**
 * The Evaluator's configuration (actors/evaluator/evaluator.ts) and its defaults.
 */
import type { ContinuationKind } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { TemplateLibrary } from "../library/library.js";
import type { ParseCache } from "../../machines/language/parse-cache.js";
import type { EnvInputs } from "./bind.js";

/** Deepest nesting of evaluations (steps, calls, nested inputs) in one task; guards against recursive templates. */
export const MAX_DEPTH = 32;

/** Handler calls of one task at once when the configuration does not say (`DIRIGENT_TASK_PARALLELISM`). */
export const DEFAULT_TASK_PARALLELISM = 64;

/** Longest the Evaluator waits for a `memory.match` answer. */
export const MEMORY_TIMEOUT_MS = 30_000;

/** Time beyond a script's timeout the Evaluator waits for the Handler's answer. */
export const SCRIPT_REPLY_MARGIN_MS = 15_000;

/** Evaluator configuration. */
export interface EvaluatorConfig {
  /** Evaluations run at once in this process. */
  concurrency: number;
  /** Longest an atomic task may take in a Handler. */
  taskTimeoutMs: number;
  /** `{{var}}` substitution: `strict` (default) fails on an unbound variable, `lenient` inserts `{{undefined:name}}`. */
  substitution?: "strict" | "lenient";
  /** Templates subtasks and evaluations are chosen from; an empty library by default. */
  library?: TemplateLibrary;
  /** Deepest subtask nesting. Default 5. */
  maxSubtaskDepth?: number;
  /** The process environment variables templates may read with `from="env:NAME"` (`DIRIGENT_ENV_INPUTS`); none by default. */
  envInputs?: EnvInputs;
  /** Handler calls (sessions, scripts) of one task running at once, whatever branch they belong to. Default 64. */
  taskParallelism?: number;
  /** Evaluations one director session may ask for. Default 5. */
  maxEvaluations?: number;
  /** Function templates of the library offered to atomic sessions as tools (`DIRIGENT_TEMPLATE_TOOLS`). None by default. */
  templateTools?: readonly string[];
  /** Continuation tools offered to atomic sessions. Default `subtask` and `input` (`spawn` costs prompt tokens: opt in). */
  continuationTools?: readonly ContinuationKind[];
  /** Longest wait for the answer to `request_user_input`. Default 10 minutes. */
  inputTimeoutMs?: number;
  /** Decompose a task that ran out of a resource through the Compiler. Default true. */
  reparse?: boolean;
  /**
   * The command allowlist (`DIRIGENT_COMMANDS`): a template whose commands name another program fails before
   * anything runs. Absent: not checked here (the Handler still checks each command it runs).
   */
  commands?: readonly string[];
  /** Templates parsed before, shared with the other roles of the system; absent: this Evaluator's own. */
  parseCache?: ParseCache;
  /**
   * The turns bucket: where the outcomes of waits for the user's input are recorded, so a re-run does not ask again, and
   * each node's record is written (actors/evaluator/node-records.ts).
   */
  records?: TaskStore | undefined;
  /** Secret values masked in node records and `node.finished` events (the API keys, the NATS password, …). */
  secrets?: readonly string[];
}
