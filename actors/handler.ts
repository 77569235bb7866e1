/**
 * The Handler role: runs each atomic task as one LLM session ({@link handlerSessionMachine}).
 * Serves `<root>.handler.execute` in queue group `handler`; reports each turn as progress; aborts the session
 * (and its HTTP request) when the task is cancelled.
 */
import { createActor, fromPromise, toPromise, type Actor } from "xstate";
import { handlerSessionMachine, type ChatMessage, type ToolCall } from "../machines/handler-session.js";
import { CancelBroadcast, ExecuteRequest, decode, encode, Progress, type ExecuteReply, type TaskResult } from "../protocol/index.js";
import type { ActorDeps, RoleHandle } from "./deps.js";
import type { CallModel } from "./model.js";
import { serve } from "./serve.js";

/** Handler configuration, immutable for the life of every session it starts. */
export interface HandlerConfig {
  /** Model used when the template names none. */
  defaultModel: string;
  /** Hard limit on assistant messages per session. */
  maxTurns: number;
  /** The base system prompt; the template's `<system>` is appended to it. */
  baseSystemPrompt: string;
  /** Sessions run at once in this process. */
  concurrency: number;
}

/** Joins the base system prompt and the template's system prompt (SEED-NOTES §3.9). */
export function buildSystemPrompt(base: string, template: string | undefined): string {
  return template ? `${base}\n\n===\n\n${template}` : base;
}

/** Starts the Handler role. */
export function startHandler(deps: ActorDeps, config: HandlerConfig, callModel: CallModel): RoleHandle {
  const sessions = new Map<string, Set<Actor<typeof handlerSessionMachine>>>();

  const execute = async (request: ExecuteRequest): Promise<ExecuteReply> => {
    const { taskId } = request;
    const machine = handlerSessionMachine.provide({
      actors: {
        callModel: fromPromise(({ input, signal }) => callModel(input, signal)),
        runTools: fromPromise(async ({ input }) => input.calls.map(unknownTool)),
      },
      actions: {
        turnCompleted: (_, params) =>
          deps.bus.publish(
            deps.subjects.progress(taskId),
            encode(Progress, {
              type: "task.progress",
              taskId,
              event: "model.turn",
              message: `turn ${params.turn}/${params.maxTurns}`,
              data: { nodePath: request.nodePath, ...params },
            }),
          ),
      },
    });
    const actor = createActor(machine, {
      input: {
        system: buildSystemPrompt(config.baseSystemPrompt, request.system),
        prompt: request.prompt,
        model: request.model ?? config.defaultModel,
        maxTurns: config.maxTurns,
      },
    });
    const live = sessions.get(taskId) ?? new Set();
    sessions.set(taskId, live.add(actor));
    try {
      const done = toPromise(actor);
      actor.start();
      const result: TaskResult = await done;
      return { type: "handler.result", taskId, nodePath: request.nodePath, result };
    } finally {
      live.delete(actor);
      if (live.size === 0) sessions.delete(taskId);
    }
  };

  const subscriptions = [
    serve(deps, {
      subject: deps.subjects.execute,
      queue: deps.subjects.queue("handler"),
      schema: ExecuteRequest,
      concurrency: config.concurrency,
      handle: execute,
    }),
    deps.bus.subscribe(deps.subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (!decoded.ok) return;
      // Leaving awaitingModel stops the invoked model call, whose AbortSignal cancels the HTTP request.
      for (const actor of sessions.get(decoded.value.taskId) ?? []) actor.send({ type: "session.cancel" });
    }),
  ];

  return {
    role: "handler",
    async stop() {
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
      for (const live of sessions.values()) for (const actor of live) actor.send({ type: "session.cancel" });
    },
  };
}

function unknownTool(call: ToolCall): ChatMessage {
  return { role: "tool", tool_call_id: call.id, content: `error: no tool named '${call.function.name}' is available` };
}
