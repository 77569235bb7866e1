/** Types of the Handler session machine (`machines/handler/session.ts`): its input, context and effect signatures. */
import type { ContinuationKind, SessionCheckpoint, SessionState, TaskError, TaskResult, Usage } from "../../protocol/index.js";
import type { SessionBudget } from "./budget.js";

/** A chat message, in the chat-completions shape. */
export type ChatMessage =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** A tool call requested by the model. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** What one model call returns. */
export interface ModelReply {
  /** Assistant text, possibly empty when the model only calls tools. */
  content: string;
  /** Tool calls, if any. */
  toolCalls: ToolCall[];
  /** Tokens used by this call. */
  usage: Usage;
  /** The model that answered. */
  model: string;
  /** Why the model stopped (`stop`, `tool_calls`, `length`, `content_filter`, …). */
  finishReason: string;
  /** The model's refusal (the message's `refusal` field), when it declined to answer. */
  refusal?: string;
}

/** Input of a session. */
export interface HandlerSessionInput {
  /** Full system prompt (base prompt + template system prompt). */
  system: string;
  /** The user prompt. */
  prompt: string;
  /** Model id. */
  model: string;
  /** Hard limit on assistant messages. */
  maxTurns: number;
  /** Hard limit on the tokens sent in one model call: floor(model context window × maxContextWindowFraction). */
  contextLimit: number;
  /** Fraction of `contextLimit` at which `contextWarning` fires (0.8). */
  warningThreshold: number;
  /** Malformed tool calls answered with an error before the session fails. */
  maxMalformedToolCalls: number;
  /** The output limit the Handler sends with each model call, if it sends one. */
  maxOutputTokens?: number;
  /**
   * Go on from an earlier state of the session: a suspended one (with `toolCallId` and the `answer` to its pending
   * tool call), or one recorded after the model's answer or after its tools ran (without either).
   */
  restore?: SessionCheckpoint & { toolCallId?: string; answer?: string };
  /** What the session may spend of the task's budget, over its cumulative usage; checked before each model call. */
  budget?: SessionBudget;
}

/** A continuation tool call: the session suspends until the Evaluator answers it. */
export interface PendingContinuation {
  /** The tool call to answer on resume. */
  toolCallId: string;
  kind: ContinuationKind;
  /** The note the request travels under in the suspended result: `subtask_request`, `spawn_request`, … */
  note: string;
  /** The validated request (`subtask_request`, `evaluation_request`, …). */
  request: Record<string, unknown>;
}

/** What a session ends with: its result and, when it suspended at a continuation, its state. */
export type SessionOutput = TaskResult & { session?: SessionState };

/** What `countTokens` measures. */
export interface TokenCount {
  /** Tokens of everything about to be sent. */
  tokens: number;
  /**
   * The tokenizer knows this model and counted every text exactly; otherwise the count is an estimate (unknown
   * model) or an upper bound (texts too large to count exactly), and server usage is a floor under it.
   */
  exact: boolean;
}

/** Input of `runTools`: the tool calls of one assistant message. */
export interface RunToolsInput {
  calls: ToolCall[];
  /** The turn whose answer asked for them (1 for the first model call). */
  turn: number;
}

/** What `runTools` returns for the tool calls of one assistant message. */
export interface ToolResults {
  /** One `tool` message per call, in call order. */
  messages: ChatMessage[];
  /** How many of the calls were malformed (unknown tool, arguments not JSON or not matching). */
  malformed: number;
  /** A valid continuation tool call among them: no `tool` message for it; the session suspends. */
  continuation?: PendingContinuation;
}

/** Context-window accounting of a session. */
export interface ContextMetrics {
  /** Tokens of the last (or refused) call. */
  used: number;
  /** The hard limit. */
  limit: number;
  /** The most tokens any call used. */
  peak: number;
}

/** Context of a session. */
export interface HandlerSessionContext extends HandlerSessionInput {
  messages: ChatMessage[];
  turns: number;
  usage: Usage;
  /** Text of the last assistant message. */
  content: string;
  /** Tool calls waiting to run. */
  pendingToolCalls: ToolCall[];
  /** Why the model stopped last. */
  finishReason: string;
  /** The refusal of the last answer, if the model refused. */
  refusal?: string;
  context: ContextMetrics;
  /** Prompt plus completion tokens the server reported for the last call (a floor under the next call). */
  reportedTokens: number;
  /** Completion tokens the server reported for the last call. */
  outputTokens: number;
  /** `contextWarning` has fired. */
  warned: boolean;
  /** Malformed tool calls so far. */
  malformedToolCalls: number;
  /** The continuation the session suspended at. */
  continuation?: PendingContinuation;
  error?: TaskError;
}

/** Input of `callModel`. */
export interface CallModelInput {
  model: string;
  messages: ChatMessage[];
}
