/**
 * Pure steps of the Handler session machine (`machines/handler/session.ts`): its starting context (fresh or
 * restored from a record), what a model answer does to it, its guards, and the checkpoint it records.
 */
import type { SessionCheckpoint } from "../../protocol/index.js";
import { budgetExceeded } from "./budget.js";
import type {
  CallModelInput,
  HandlerSessionContext,
  HandlerSessionInput,
  ModelReply,
  PendingContinuation,
  SessionOutput,
  TokenCount,
} from "./session-types.js";
import { messageOf } from "../../protocol/errors.js";

/** The message of a failure, whatever was thrown. */
export const errorText = (error: unknown): string => messageOf(error);

/** The session's failure when its record (of the model's `answer`, or of a `turn` after its tools) cannot be written. */
export function recordFailure(what: "answer" | "turn", context: HandlerSessionContext, error: unknown) {
  return {
    type: "TASK_FAILURE" as const,
    reason: "unexpected_error" as const,
    message: `cannot record the ${what}: ${errorText(error)}`,
    content: context.content,
  };
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
    return {
      error: {
        type: "TASK_FAILURE",
        reason: "unexpected_error",
        message: `cannot count tokens: ${errorText(error)}`,
        content: context.content,
      },
    };
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
  tooManyMalformed: ({ context }) => context.malformedToolCalls > context.maxMalformedToolCalls,
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
