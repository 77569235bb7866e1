/**
 * The context of a Handler session (`machines/handler/session.ts`) and the pure steps over it: its input and shape,
 * the chat messages and tool calls it holds, what its effects take and give back; how it starts (fresh, or restored
 * from a record), what a model answer does to it, its guards, and the checkpoint it records.
 */
import type { ContinuationKind, SessionCheckpoint, SessionState, TaskError, TaskResult, Usage } from "../../protocol/index.js";
import { messageOf } from "../../protocol/errors.js";
import { budgetExceeded, type SessionBudget } from "./budget.js";
import type { Scoped } from "../scoped.js";

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
export interface HandlerSessionInput extends Scoped {
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
export interface RunToolsInput extends Scoped {
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
export interface CallModelInput extends Scoped {
  model: string;
  messages: ChatMessage[];
}

/** The message of a failure, whatever was thrown. */
export const errorText = (error: unknown): string => messageOf(error);

/** The session's failure for `reason`: the content so far goes with it. */
export function sessionFailure(
  context: HandlerSessionContext,
  reason: "execution_halted" | "model_error" | "unexpected_error",
  message: string,
  details?: Record<string, unknown>,
): TaskError {
  return { type: "TASK_FAILURE", reason, message, content: context.content, ...(details ? { details } : {}) };
}

/** The session's failure when its record (of the model's `answer`, or of a `turn` after its tools) cannot be written. */
export function recordFailure(what: "answer" | "turn", context: HandlerSessionContext, error: unknown): TaskError {
  return sessionFailure(context, "unexpected_error", `cannot record the ${what}: ${errorText(error)}`);
}

/**
 * The context a session starts with: fresh, or restored from a suspended or recorded state. A state recorded right
 * after the model answered ends with that answer's tool calls, not yet run: they become the pending calls.
 */
export function initialContext(input: HandlerSessionInput): HandlerSessionContext {
  const restore = input.restore;
  // Every field of the input but `restore`, named (an object rest here cost more than the rest of the function).
  const fresh: HandlerSessionContext = {
    system: input.system,
    prompt: input.prompt,
    model: input.model,
    maxTurns: input.maxTurns,
    contextLimit: input.contextLimit,
    warningThreshold: input.warningThreshold,
    maxMalformedToolCalls: input.maxMalformedToolCalls,
    ...(input.maxOutputTokens === undefined ? {} : { maxOutputTokens: input.maxOutputTokens }),
    ...(input.budget === undefined ? {} : { budget: input.budget }),
    ...(input.scopeKey === undefined ? {} : { scopeKey: input.scopeKey }),
    messages: [
      { role: "system", content: input.system },
      { role: "user", content: input.prompt },
    ],
    turns: 0,
    usage: { promptTokens: 0, completionTokens: 0 },
    content: "",
    pendingToolCalls: [],
    finishReason: "",
    context: { used: 0, limit: input.contextLimit, peak: 0 },
    reportedTokens: 0,
    outputTokens: 0,
    warned: false,
    malformedToolCalls: 0,
  };
  if (!restore) return fresh;
  // After a continuation, the answer responds to its pending call.
  const answer =
    restore.toolCallId !== undefined ? [{ role: "tool" as const, tool_call_id: restore.toolCallId, content: restore.answer ?? "" }] : [];
  const messages = [...restore.messages, ...answer];
  const last = messages.at(-1);
  const pending =
    last?.role === "assistant" && last.tool_calls && last.tool_calls.length > 0
      ? { calls: last.tool_calls, content: last.content ?? "" }
      : undefined;
  return {
    ...fresh,
    messages,
    turns: restore.turns,
    usage: restore.usage,
    context: { used: restore.context.used, limit: input.contextLimit, peak: restore.context.peak },
    reportedTokens: restore.reportedTokens,
    warned: restore.warned,
    malformedToolCalls: restore.malformedToolCalls,
    model: restore.model,
    ...(pending ? { pendingToolCalls: pending.calls, content: pending.content, finishReason: "tool_calls" } : {}),
  };
}

/** The context after the model's answer: one more turn, its usage counted, its message appended. */
export function withAnswer(context: HandlerSessionContext, reply: ModelReply): Partial<HandlerSessionContext> {
  return {
    turns: context.turns + 1,
    content: reply.content,
    pendingToolCalls: reply.toolCalls,
    finishReason: reply.finishReason,
    // A refusal ends the session, so it never has to be cleared for a later turn.
    ...(reply.refusal ? { refusal: reply.refusal } : {}),
    model: reply.model,
    reportedTokens: reply.usage.promptTokens + reply.usage.completionTokens,
    outputTokens: reply.usage.completionTokens,
    usage: {
      promptTokens: context.usage.promptTokens + reply.usage.promptTokens,
      completionTokens: context.usage.completionTokens + reply.usage.completionTokens,
    },
    messages: [
      ...context.messages,
      reply.toolCalls.length > 0
        ? { role: "assistant", content: reply.content || null, tool_calls: reply.toolCalls }
        : { role: "assistant", content: reply.content },
    ],
  };
}

/** What the results of the last answer's tool calls do to the session: their messages, and a continuation if one asked. */
export function withToolResults(context: HandlerSessionContext, results: ToolResults): Partial<HandlerSessionContext> {
  return {
    messages: [...context.messages, ...results.messages],
    pendingToolCalls: [],
    malformedToolCalls: context.malformedToolCalls + results.malformed,
    ...(results.continuation ? { continuation: results.continuation } : {}),
  };
}

/**
 * The context once `count` has counted what is about to be sent: the context metrics (for a model the tokenizer does
 * not know, the server's reported usage of the last call is a floor under the count), or the session's failure when
 * it cannot count.
 */
export function measured(context: HandlerSessionContext, count: (input: CallModelInput) => TokenCount): Partial<HandlerSessionContext> {
  let counted: TokenCount;
  try {
    counted = count({ model: context.model, messages: context.messages });
  } catch (error) {
    return { error: sessionFailure(context, "unexpected_error", `cannot count tokens: ${errorText(error)}`) };
  }
  const used = counted.exact ? counted.tokens : Math.max(counted.tokens, context.reportedTokens);
  return { context: { used, limit: context.context.limit, peak: Math.max(context.context.peak, used) } };
}

type Guard = (args: { context: HandlerSessionContext }) => boolean;

/** The session's guards: pure predicates over its context. */
export const sessionGuards = {
  turnsLeft: ({ context }) => context.turns < context.maxTurns,
  wantsTools: ({ context }) => context.pendingToolCalls.length > 0,
  outputCut: ({ context }) => context.finishReason === "length",
  outputFiltered: ({ context }) => context.finishReason === "content_filter",
  refused: ({ context }) => context.refusal !== undefined && context.refusal.trim() !== "",
  overContext: ({ context }) => context.context.used > context.context.limit,
  overBudget: ({ context }) => budgetExceeded(context.budget, context.usage, context.context.used) !== undefined,
  nearContext: ({ context }) => !context.warned && context.context.used >= context.context.limit * context.warningThreshold,
  // Only `measure` sets an error on the way to a model call: any error then is its failure to count.
  countFailed: ({ context }) => context.error !== undefined,
} satisfies Record<string, Guard>;

/**
 * The session's state as recorded: after the model's answer (its messages end with the tool calls still to run)
 * or after those tools ran.
 */
export function checkpointOf(context: HandlerSessionContext): SessionCheckpoint {
  return {
    messages: context.messages,
    turns: context.turns,
    usage: context.usage,
    context: context.context,
    reportedTokens: context.reportedTokens,
    warned: context.warned,
    malformedToolCalls: context.malformedToolCalls,
    model: context.model,
  };
}

/** The input of `recordTurn`: the session's checkpoint, and the key of the session's effects. */
export function scopedCheckpoint(context: HandlerSessionContext): SessionCheckpoint & Scoped {
  return { ...checkpointOf(context), scopeKey: context.scopeKey };
}

/** The output of a session suspended at a continuation tool call. */
export function suspendedOutput(
  context: HandlerSessionContext,
  notes: Record<string, unknown>,
  pending: PendingContinuation,
): SessionOutput {
  return {
    content: context.content,
    status: "CONTINUATION",
    notes: { ...notes, [pending.note]: pending.request },
    session: { ...checkpointOf(context), toolCallId: pending.toolCallId },
  };
}
