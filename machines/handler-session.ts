/**
 * One Handler session: the LLM conversation of one atomic task, with a hard turn limit.
 *
 * awaitingModel ⇄ runningTool → done | exhausted | failed. Turns count assistant messages only and are checked
 * before each model call (SEED-NOTES §3.9). Effects: the `callModel` actor (one chat completion) and the
 * `runTools` actor (execute the tool calls of one assistant message); `turnCompleted` reports progress.
 * `session.cancel` ends the session at once, aborting whatever is in flight.
 */
import { assign, fromPromise, setup } from "xstate";
import type { TaskError, TaskResult, Usage } from "../protocol/index.js";
import { notProvided } from "./not-provided.js";

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
  /** Why the model stopped (`stop`, `tool_calls`, `length`, …). */
  finishReason: string;
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
  error?: TaskError;
}

/** Input of `callModel`. */
export interface CallModelInput {
  model: string;
  messages: ChatMessage[];
}

/** The Handler session machine. Its output is the session's {@link TaskResult}. */
export const handlerSessionMachine = setup({
  types: {
    input: {} as HandlerSessionInput,
    context: {} as HandlerSessionContext,
    events: {} as { type: "session.cancel" },
    output: {} as TaskResult,
  },
  actions: {
    turnCompleted: (_, _params: { turn: number; maxTurns: number; usage: Usage; toolCalls: number }) => undefined,
  },
  actors: {
    callModel: fromPromise<ModelReply, CallModelInput>(async () => notProvided("handler.callModel")),
    runTools: fromPromise<ChatMessage[], { calls: ToolCall[] }>(async () => notProvided("handler.runTools")),
  },
  guards: {
    turnsLeft: ({ context }) => context.turns < context.maxTurns,
    wantsTools: ({ context }) => context.pendingToolCalls.length > 0,
  },
}).createMachine({
  id: "handlerSession",
  context: ({ input }) => ({
    ...input,
    messages: [
      { role: "system", content: input.system },
      { role: "user", content: input.prompt },
    ],
    turns: 0,
    usage: { promptTokens: 0, completionTokens: 0 },
    content: "",
    pendingToolCalls: [],
  }),
  initial: "checkingLimits",
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
    checkingLimits: {
      description: "Before each model call: is there a turn left?",
      always: [
        { guard: "turnsLeft", target: "awaitingModel" },
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
    awaitingModel: {
      description: "Waiting for the model's next message.",
      invoke: {
        src: "callModel",
        input: ({ context }) => ({ model: context.model, messages: context.messages }),
        onDone: {
          target: "deciding",
          actions: [
            assign(({ context, event }) => ({
              turns: context.turns + 1,
              content: event.output.content,
              pendingToolCalls: event.output.toolCalls,
              model: event.output.model,
              usage: {
                promptTokens: context.usage.promptTokens + event.output.usage.promptTokens,
                completionTokens: context.usage.completionTokens + event.output.usage.completionTokens,
              },
              messages: [
                ...context.messages,
                event.output.toolCalls.length > 0
                  ? { role: "assistant" as const, content: event.output.content || null, tool_calls: event.output.toolCalls }
                  : { role: "assistant" as const, content: event.output.content },
              ],
            })),
            {
              type: "turnCompleted",
              params: ({ context, event }) => ({
                turn: context.turns,
                maxTurns: context.maxTurns,
                usage: context.usage,
                toolCalls: event.output.toolCalls.length,
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
              message: event.error instanceof Error ? event.error.message : String(event.error),
              content: context.content,
            }),
          }),
        },
      },
    },
    deciding: {
      description: "The model answered: run its tool calls, or finish.",
      always: [{ guard: "wantsTools", target: "runningTool" }, { target: "done" }],
    },
    runningTool: {
      description: "Running the tool calls of the last assistant message.",
      invoke: {
        src: "runTools",
        input: ({ context }) => ({ calls: context.pendingToolCalls }),
        onDone: {
          target: "checkingLimits",
          actions: assign(({ context, event }) => ({
            messages: [...context.messages, ...event.output],
            pendingToolCalls: [],
          })),
        },
        onError: {
          target: "failed",
          actions: assign({
            error: ({ context, event }) => ({
              type: "TASK_FAILURE" as const,
              reason: "unexpected_error" as const,
              message: `tool failed: ${event.error instanceof Error ? event.error.message : String(event.error)}`,
              content: context.content,
            }),
          }),
        },
      },
    },
    done: { description: "The model finished without asking for tools.", type: "final" },
    exhausted: { description: "A hard limit ended the session.", type: "final" },
    failed: { description: "The model or a tool failed.", type: "final" },
  },
  output: ({ context }) => ({
    content: context.content,
    status: context.error ? "FAILED" : "COMPLETE",
    notes: {
      usage: context.usage,
      turns: context.turns,
      model: context.model,
    },
    ...(context.error ? { error: context.error } : {}),
  }),
});
