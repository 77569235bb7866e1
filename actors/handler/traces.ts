/**
 * The spans of a Handler session (docs/traces.md): one per model call, after the OpenTelemetry GenAI semantic
 * conventions (`gen_ai.*`: operation, models, token usage), and one per tool call. Prompts, completions and tool
 * arguments are recorded only when the process opts in (`DIRIGENT_TRACE_CONTENT=on`), masked of the secrets it knows.
 */
import type { CallModel } from "../model.js";
import type { ToolCall } from "../../machines/handler/session.js";
import { inSpan, SpanKind, type Context } from "../tracing.js";
import type { Masker } from "../secrets.js";
import type { TaskId } from "../../protocol/index.js";

/** Where a session's spans go and what they may hold. */
export interface SessionTrace {
  /** The session's span (the `handler.execute` request's): parent of its model and tool calls. */
  parent: Context;
  taskId: TaskId;
  nodePath: string;
  /** Record prompts, completions and tool arguments and answers. */
  content: boolean;
  mask: Masker;
}

/** {@link CallModel} with a `chat <model>` span around each call; `turn` counts the calls of the session. */
export function tracedModel(call: CallModel, trace: SessionTrace): CallModel {
  let turn = 0;
  return (request, signal, hooks) => {
    turn++;
    const attributes = {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": request.provider ?? "openai",
      "gen_ai.request.model": request.model,
      ...(request.maxTokens === undefined ? {} : { "gen_ai.request.max_tokens": request.maxTokens }),
      ...(request.temperature === undefined ? {} : { "gen_ai.request.temperature": request.temperature }),
      "dirigent.task_id": trace.taskId,
      "dirigent.node_path": trace.nodePath,
      "dirigent.turn": turn,
    };
    return inSpan(`chat ${request.model}`, { parent: trace.parent, kind: SpanKind.CLIENT, attributes }, async ({ span }) => {
      if (trace.content && span.isRecording()) span.setAttribute("gen_ai.input.messages", trace.mask(JSON.stringify(request.messages)));
      const reply = await call(request, signal, hooks);
      if (!span.isRecording()) return reply;
      span.setAttributes({
        "gen_ai.response.model": reply.model,
        "gen_ai.response.finish_reasons": [reply.finishReason],
        "gen_ai.usage.input_tokens": reply.usage.promptTokens,
        "gen_ai.usage.output_tokens": reply.usage.completionTokens,
      });
      if (trace.content) {
        const output = { role: "assistant", content: reply.content, ...(reply.toolCalls.length ? { tool_calls: reply.toolCalls } : {}) };
        span.setAttribute("gen_ai.output.messages", trace.mask(JSON.stringify([output])));
      }
      return reply;
    });
  };
}

/** Runs one tool call in an `execute_tool <name>` span; `content`: its arguments and answer are recorded. */
export function inToolSpan<T extends { content: string }>(
  call: ToolCall,
  trace: SessionTrace | undefined,
  source: string | undefined,
  run: () => Promise<T>,
): Promise<T> {
  if (trace === undefined) return run();
  const attributes = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": call.function.name,
    "gen_ai.tool.call.id": call.id,
    ...(source === undefined ? {} : { "dirigent.tool.source": source }),
    "dirigent.task_id": trace.taskId,
    "dirigent.node_path": trace.nodePath,
  };
  return inSpan(`execute_tool ${call.function.name}`, { parent: trace.parent, attributes }, async ({ span }) => {
    if (trace.content && span.isRecording()) span.setAttribute("gen_ai.tool.call.arguments", trace.mask(call.function.arguments));
    const answer = await run();
    if (trace.content && span.isRecording()) span.setAttribute("gen_ai.tool.call.result", trace.mask(answer.content));
    return answer;
  });
}
