/**
 * One Handler session: the LLM conversation of one atomic task, with hard limits on turns, context and output.
 *
 * checkingLimits → checkingContext → awaitingModel → deciding → recordingAnswer → runningTool → recording →
 * checkingLimits …, ending in done | exhausted | failed | suspended (docs/handler.md has the diagram). Each decision is
 * a guard on the way out of the state before it, so a turn takes three eventless steps (two checks before the call,
 * `deciding` after it). `recordTurn` records the session right after the model answers with tool calls (before any of
 * them runs) and again once they ran; a session restored from a record taken after the answer starts with its tool
 * calls (the first branch of `checkingLimits`), so the model is not asked that turn again. Turns count assistant
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
  sessionFailure,
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
  withToolResults,
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
    takeToolResults: assign(({ context, event }) => withToolResults(context, outputOf<ToolResults>(event))),
  },
  actors: {
    callModel: fromPromise<ModelReply, CallModelInput>(async () => notProvided("handler.callModel")),
    runTools: fromPromise<ToolResults, RunToolsInput>(async () => notProvided("handler.runTools")),
    // Without a record store there is nothing to write: recording is optional.
    recordTurn: fromPromise<void, SessionCheckpoint & Scoped>(async () => undefined),
  },
  guards: {
    ...sessionGuards,
    toolsSuspend: ({ event }) => outputOf<ToolResults>(event).continuation !== undefined,
    // Checked on the tools' results, before `takeToolResults` counts them in.
    tooManyMalformed: ({ context, event }) =>
      context.malformedToolCalls + outputOf<ToolResults>(event).malformed > context.maxMalformedToolCalls,
  },
}).createMachine({
  id: "handlerSession",
  context: ({ input }) => initialContext(input),
  initial: "checkingLimits",
  on: {
    "session.cancel": {
      description: "The task was cancelled: leaving the current state aborts the model call or tool in flight.",
      target: ".failed",
      actions: assign({
        error: ({ context }) => sessionFailure(context, "execution_halted", "cancelled"),
      }),
    },
  },
  states: {
    checkingLimits: {
      description:
        "Before each model call: is there a turn left? If so, count the tokens about to be sent (the `measure` action). A session restored from a record taken right after the model answered runs that answer's tool calls first.",
      always: [
        { guard: "wantsTools", target: "runningTool" },
        { guard: "turnsLeft", target: "checkingContext", actions: "measure" },
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
    checkingContext: {
      description:
        "Could the tokens be counted, is the context within its limit, and the call within the task's budget? Warn once past the threshold.",
      always: [
        { guard: "countFailed", target: "failed" },
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
            error: ({ context, event }) => sessionFailure(context, "model_error", errorText(event.error)),
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
            error: ({ context }) =>
              sessionFailure(
                context,
                "model_error",
                "the model's output was blocked by the server's content filter (finish_reason 'content_filter')",
              ),
          }),
        },
        {
          guard: "refused",
          target: "failed",
          actions: assign({
            error: ({ context }) => sessionFailure(context, "model_error", `the model refused: ${context.refusal ?? ""}`),
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
      description:
        "Running the tool calls of the last assistant message; a continuation among them suspends the session, and too many malformed calls fail it.",
      invoke: {
        src: "runTools",
        input: ({ context }) => ({ calls: context.pendingToolCalls, turn: context.turns, scopeKey: context.scopeKey }),
        onDone: [
          {
            guard: "toolsSuspend",
            target: "suspended",
            actions: "takeToolResults",
          },
          {
            guard: "tooManyMalformed",
            target: "failed",
            actions: [
              "takeToolResults",
              assign({
                error: ({ context }) =>
                  sessionFailure(
                    context,
                    "model_error",
                    `the model made ${context.malformedToolCalls} malformed tool calls (at most ${context.maxMalformedToolCalls} are answered)`,
                    { malformedToolCalls: context.malformedToolCalls },
                  ),
              }),
            ],
          },
          { target: "recording", actions: "takeToolResults" },
        ],
        onError: {
          target: "failed",
          actions: assign({
            error: ({ context, event }) => sessionFailure(context, "unexpected_error", `tool failed: ${errorText(event.error)}`),
          }),
        },
      },
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
