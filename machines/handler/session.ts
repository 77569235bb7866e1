/**
 * One Handler session: the LLM conversation of one atomic task, with hard limits on turns, context and output.
 *
 * starting → checkingLimits → measuring → checkingContext → awaitingModel → deciding → recordingAnswer →
 * runningTool → checkingToolCalls → recording → checkingLimits …, ending in done | exhausted | failed | suspended
 * (docs/handler.md has the diagram). `recordTurn` records the session right after the model answers with tool calls (before any of
 * them runs) and again once they ran; a session restored from a record taken after the answer starts with its tool
 * calls (`starting`), so the model is not asked that turn again. Turns count assistant
 * messages only and are checked before each model call, so a session never starts a turn it may not finish. Before each call the `measure` action
 * counts everything about to be sent (synchronously: tokenizing is computation, not I/O, and an actor per turn
 * cost more than the count); over the limit ends the session (`RESOURCE_EXHAUSTION` context),
 * and crossing `warningThreshold` of it fires `contextWarning` once. A task budget in the input (`budget.ts`)
 * is checked at the same point: usage so far plus the tokens about to be sent over it ends the session
 * (`RESOURCE_EXHAUSTION` budget). For a model the tokenizer does not know, the
 * server's reported usage of the previous call is a floor under the count. `finish_reason: length` ends the
 * session (`RESOURCE_EXHAUSTION` output); `finish_reason: content_filter` or a refusal fails it (`TASK_FAILURE`
 * model_error), never COMPLETE. Malformed tool calls are answered with errors up to
 * `maxMalformedToolCalls` times, then the session fails. Effects: `callModel` (one chat completion, retries
 * included), `runTools`, `recordTurn`; `measure` (provided with the token counter); `turnCompleted` and
 * `contextWarning` report progress.
 * `session.cancel` ends the session at once, aborting whatever is in flight.
 */
import { assign, fromPromise, setup } from "xstate";
import type { SessionCheckpoint, Usage } from "../../protocol/index.js";
import { budgetExceeded } from "./budget.js";
import {
  errorText,
  initialContext,
  measured,
  recordFailure,
  scopedCheckpoint,
  sessionGuards,
  suspendedOutput,
  withAnswer,
  type CallModelInput,
  type ContextMetrics,
  type HandlerSessionContext,
  type HandlerSessionInput,
  type ModelReply,
  type SessionOutput,
  type RunToolsInput,
  type ToolResults,
} from "./session-context.js";
import { notProvided } from "../not-provided.js";
import { outputOf } from "../invoke-events.js";
import type { Scoped } from "../scoped.js";

export type {
  CallModelInput,
  ChatMessage,
  ContextMetrics,
  HandlerSessionContext,
  HandlerSessionInput,
  ModelReply,
  PendingContinuation,
  RunToolsInput,
  SessionOutput,
  TokenCount,
  ToolCall,
  ToolResults,
} from "./session-context.js";
export { measured };

/** The Handler session machine. Its output is the session's {@link TaskResult}. */
export const handlerSessionMachine = setup({
  types: {
    input: {} as HandlerSessionInput,
    context: {} as HandlerSessionContext,
    events: {} as { type: "session.cancel" },
    output: {} as SessionOutput,
  },
  actions: {
    turnCompleted: (
      _,
      _params: { turn: number; maxTurns: number; usage: Usage; callUsage: Usage; toolCalls: number; context: ContextMetrics },
    ) => undefined,
    contextWarning: (_, _params: { used: number; limit: number; threshold: number }) => undefined,
    // Provided by the shell with its token counter: `assign(({ context }) => measured(context, count))`.
    measure: assign(({ context }) => measured(context, () => notProvided("handler.measure"))),
  },
  actors: {
    callModel: fromPromise<ModelReply, CallModelInput>(async () => notProvided("handler.callModel")),
    runTools: fromPromise<ToolResults, RunToolsInput>(async () => notProvided("handler.runTools")),
    // Without a record store there is nothing to write: recording is optional.
    recordTurn: fromPromise<void, SessionCheckpoint & Scoped>(async () => undefined),
  },
  guards: { ...sessionGuards, toolsSuspend: ({ event }) => outputOf<ToolResults>(event).continuation !== undefined },
}).createMachine({
  id: "handlerSession",
  context: ({ input }) => initialContext(input),
  initial: "starting",
  on: {
    "session.cancel": {
      description: "The task was cancelled: leaving the current state aborts the model call or tool in flight.",
      target: ".failed",
      actions: assign({
        error: ({ context }) => ({
          type: "TASK_FAILURE" as const,
          reason: "execution_halted" as const,
          message: "cancelled",
          content: context.content,
        }),
      }),
    },
  },
  states: {
    starting: {
      description:
        "A session restored from a record taken right after the model answered runs that answer's tool calls; any other asks the model.",
      always: [{ guard: "wantsTools", target: "runningTool" }, { target: "checkingLimits" }],
    },
    checkingLimits: {
      description: "Before each model call: is there a turn left?",
      always: [
        { guard: "turnsLeft", target: "measuring" },
        {
          target: "exhausted",
          actions: assign({
            error: ({ context }) => ({
              type: "RESOURCE_EXHAUSTION" as const,
              resource: "turns" as const,
              message: `turn limit of ${context.maxTurns} reached`,
              metrics: { used: context.turns, limit: context.maxTurns },
              content: context.content,
            }),
          }),
        },
      ],
    },
    measuring: {
      description: "Counting the tokens of everything about to be sent (the `measure` action).",
      entry: "measure",
      always: [{ guard: "countFailed", target: "failed" }, { target: "checkingContext" }],
    },
    checkingContext: {
      description: "Is the context within its limit, and the call within the task's budget? Warn once past the threshold.",
      always: [
        {
          guard: "overBudget",
          target: "exhausted",
          actions: assign({ error: ({ context }) => budgetExceeded(context.budget, context.usage, context.context.used, context.content) }),
        },
        {
          guard: "overContext",
          target: "exhausted",
          actions: assign({
            error: ({ context }) => ({
              type: "RESOURCE_EXHAUSTION" as const,
              resource: "context" as const,
              message: `context limit of ${context.context.limit} tokens reached (${context.context.used} to send)`,
              metrics: { used: context.context.used, limit: context.context.limit },
              content: context.content,
            }),
          }),
        },
        {
          guard: "nearContext",
          target: "awaitingModel",
          actions: [
            assign({ warned: true }),
            {
              type: "contextWarning",
              params: ({ context }) => ({ used: context.context.used, limit: context.context.limit, threshold: context.warningThreshold }),
            },
          ],
        },
        { target: "awaitingModel" },
      ],
    },
    awaitingModel: {
      description: "Waiting for the model's next message.",
      invoke: {
        src: "callModel",
        input: ({ context }) => ({ model: context.model, messages: context.messages, scopeKey: context.scopeKey }),
        onDone: {
          target: "deciding",
          actions: [
            assign(({ context, event }) => withAnswer(context, event.output)),
            {
              type: "turnCompleted",
              params: ({ context, event }) => ({
                turn: context.turns,
                maxTurns: context.maxTurns,
                usage: context.usage,
                callUsage: event.output.usage,
                toolCalls: event.output.toolCalls.length,
                context: context.context,
              }),
            },
          ],
        },
        onError: {
          target: "failed",
          actions: assign({
            error: ({ context, event }) => ({
              type: "TASK_FAILURE" as const,
              reason: "model_error" as const,
              message: errorText(event.error),
              content: context.content,
            }),
          }),
        },
      },
    },
    deciding: {
      description:
        "The model answered: fail if its output was blocked or it refused, stop if its output was cut, else run its tool calls, or finish.",
      always: [
        {
          guard: "outputFiltered",
          target: "failed",
          actions: assign({
            error: ({ context }) => ({
              type: "TASK_FAILURE" as const,
              reason: "model_error" as const,
              message: "the model's output was blocked by the server's content filter (finish_reason 'content_filter')",
              content: context.content,
            }),
          }),
        },
        {
          guard: "refused",
          target: "failed",
          actions: assign({
            error: ({ context }) => ({
              type: "TASK_FAILURE" as const,
              reason: "model_error" as const,
              message: `the model refused: ${context.refusal ?? ""}`,
              content: context.content,
            }),
          }),
        },
        {
          guard: "outputCut",
          target: "exhausted",
          actions: assign({
            error: ({ context }) => ({
              type: "RESOURCE_EXHAUSTION" as const,
              resource: "output" as const,
              message: "the model's output was cut at its token limit (finish_reason 'length')",
              // Without an output limit of the Handler's own, the server's is where the answer was cut.
              metrics: { used: context.outputTokens, limit: context.maxOutputTokens ?? context.outputTokens },
              content: context.content,
            }),
          }),
        },
        { guard: "wantsTools", target: "recordingAnswer" },
        { target: "done" },
      ],
    },
    recordingAnswer: {
      description:
        "The model asked for tools: record its answer before any of them runs, so a re-run runs them without asking the model again.",
      invoke: {
        src: "recordTurn",
        input: ({ context }) => scopedCheckpoint(context),
        onDone: { target: "runningTool" },
        onError: {
          target: "failed",
          actions: assign({ error: ({ context, event }) => recordFailure("answer", context, event.error) }),
        },
      },
    },
    runningTool: {
      description: "Running the tool calls of the last assistant message.",
      invoke: {
        src: "runTools",
        input: ({ context }) => ({ calls: context.pendingToolCalls, turn: context.turns, scopeKey: context.scopeKey }),
        onDone: [
          {
            guard: "toolsSuspend",
            target: "suspended",
            actions: assign(({ context, event }) => ({
              messages: [...context.messages, ...event.output.messages],
              pendingToolCalls: [],
              malformedToolCalls: context.malformedToolCalls + event.output.malformed,
              ...(event.output.continuation ? { continuation: event.output.continuation } : {}),
            })),
          },
          {
            target: "checkingToolCalls",
            actions: assign(({ context, event }) => ({
              messages: [...context.messages, ...event.output.messages],
              pendingToolCalls: [],
              malformedToolCalls: context.malformedToolCalls + event.output.malformed,
            })),
          },
        ],
        onError: {
          target: "failed",
          actions: assign({
            error: ({ context, event }) => ({
              type: "TASK_FAILURE" as const,
              reason: "unexpected_error" as const,
              message: `tool failed: ${errorText(event.error)}`,
              content: context.content,
            }),
          }),
        },
      },
    },
    checkingToolCalls: {
      description: "Has the model made too many malformed tool calls?",
      always: [
        {
          guard: "tooManyMalformed",
          target: "failed",
          actions: assign({
            error: ({ context }) => ({
              type: "TASK_FAILURE" as const,
              reason: "model_error" as const,
              message: `the model made ${context.malformedToolCalls} malformed tool calls (at most ${context.maxMalformedToolCalls} are answered)`,
              content: context.content,
              details: { malformedToolCalls: context.malformedToolCalls },
            }),
          }),
        },
        { target: "recording" },
      ],
    },
    recording: {
      description:
        "The turn's tools ran: record the session with their results before the next model call, so a re-run continues from here.",
      invoke: {
        src: "recordTurn",
        input: ({ context }) => scopedCheckpoint(context),
        onDone: { target: "checkingLimits" },
        onError: {
          target: "failed",
          actions: assign({ error: ({ context, event }) => recordFailure("turn", context, event.error) }),
        },
      },
    },
    suspended: {
      description: "CONTINUATION: the model asked for a subtask or an evaluation; the session waits, as data, for its answer.",
      type: "final",
    },
    done: { description: "The model finished without asking for tools.", type: "final" },
    exhausted: { description: "A hard limit ended the session.", type: "final" },
    failed: {
      description: "The model or a tool failed, the model's output was blocked or refused, or the session was cancelled.",
      type: "final",
    },
  },
  output: ({ context }): SessionOutput => {
    const notes = { usage: context.usage, turns: context.turns, model: context.model, context: context.context };
    if (context.error) return { content: context.content, status: "FAILED", notes, error: context.error };
    if (context.continuation) return suspendedOutput(context, notes, context.continuation);
    return { content: context.content, status: "COMPLETE", notes };
  },
});
