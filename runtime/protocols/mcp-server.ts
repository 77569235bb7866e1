/**
 * dirigent as an MCP server (`dirigent mcp`): each library template is a tool whose input schema comes from the
 * template's inputs, next to `run_task` (any template as XML), `task_status` and `cancel_task`. A tool call runs a
 * task through the public task API and answers with its result as text and `structuredContent`; the task's events
 * become progress notifications when the caller asks for them, and a cancelled call cancels the task. Tasks this
 * server ran are resources (`dirigent://tasks/<id>`, with their nodes at `…/nodes/<path>`); any task can be read by
 * that address.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { parseTaskId, type TaskBudget, type TaskEvent, type TaskId, type TaskOutcome } from "../../protocol/index.js";
import { messageOf } from "../../protocol/errors.js";
import { newTaskId, RemoteError, type DirigentClient } from "../client.js";
import type { LibraryTool } from "./library-tools.js";
import { checkArguments, taskSummary, TaskList } from "./task-calls.js";

/** What an MCP server session needs; one set is shared by every session of a process. */
export interface McpServerDeps {
  client: DirigentClient;
  /** The library templates offered as tools. */
  tools: readonly LibraryTool[];
  /** Budget of every task started (`--max-cost`, `--max-tokens`). */
  budget?: TaskBudget;
  /** The tasks started here, for `resources/list`. */
  tasks: TaskList;
  /** The server's version, in its `initialize` answer. */
  version: string;
}

/** URI of a task's resource. */
export const taskUri = (taskId: TaskId): string => `dirigent://tasks/${taskId}`;

const BUILT_IN: Tool[] = [
  {
    name: "run_task",
    description: "Runs a dirigent task template (XML, see docs/task-language.md) with its inputs and answers with its result.",
    inputSchema: {
      type: "object",
      properties: {
        xml: { type: "string", description: "the task template, e.g. <task><description>…</description></task>" },
        inputs: { type: "object", description: "values of the template's {{var}} placeholders" },
      },
      required: ["xml"],
      additionalProperties: false,
    },
  },
  {
    name: "task_status",
    description: "The state of a dirigent task and, once it ended, its result.",
    inputSchema: {
      type: "object",
      properties: { task_id: { type: "string", description: "the task's id" } },
      required: ["task_id"],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true },
  },
  {
    name: "cancel_task",
    description: "Cancels a running dirigent task.",
    inputSchema: {
      type: "object",
      properties: { task_id: { type: "string", description: "the task's id" } },
      required: ["task_id"],
      additionalProperties: false,
    },
  },
];

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

const errorResult = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true });

/** A task's outcome as a tool result: its content as text, the outcome as `structuredContent`. */
export function outcomeResult(outcome: TaskOutcome): CallToolResult {
  const summary = taskSummary(outcome);
  const text = outcome.status === "COMPLETE" ? outcome.content : `${outcome.status}: ${summary.error ?? outcome.content}`;
  return { content: [{ type: "text", text }], structuredContent: summary, isError: outcome.status !== "COMPLETE" };
}

function remoteErrorResult(err: unknown): CallToolResult {
  if (err instanceof RemoteError && err.code === "NO_RESPONDERS")
    return errorResult(`no dirigent runtime answers: start one with 'dirigent up' (${err.message})`);
  return errorResult(err instanceof RemoteError ? `${err.code}: ${err.message}` : messageOf(err));
}

/** A new MCP server (one per session) over the shared `deps`. */
export function createMcpServer(deps: McpServerDeps): Server {
  const server = new Server(
    { name: "dirigent", version: deps.version },
    {
      capabilities: { tools: {}, resources: {} },
      instructions:
        "Each tool of this server but task_status and cancel_task runs a dirigent task and answers with its result; send a progressToken to follow its events.",
    },
  );
  const builtIn = new Set(BUILT_IN.map((t) => t.name));
  const templates = new Map(deps.tools.filter((t) => !builtIn.has(t.name)).map((t) => [t.name, t]));

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [
      ...[...templates.values()].map(
        (t): Tool => ({
          name: t.name,
          title: `${t.name} (${t.kind})`,
          description: `Runs the dirigent library template '${t.name}': ${t.description}`,
          inputSchema: t.inputSchema,
        }),
      ),
      ...BUILT_IN,
    ],
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {};
    const name = request.params.name;
    const template = templates.get(name);
    if (template) {
      const problem = checkArguments(template, args);
      if (problem) return errorResult(problem);
      return run(template.xml, args);
    }
    if (name === "run_task") {
      const { xml, inputs } = args;
      if (typeof xml !== "string" || xml.trim() === "") return errorResult("run_task: 'xml' must be a task template");
      if (inputs !== undefined && !isRecord(inputs)) return errorResult("run_task: 'inputs' must be an object");
      return run(xml, inputs ?? {});
    }
    if (name === "task_status" || name === "cancel_task") {
      const id = parseTaskId(args.task_id);
      if (id === undefined) return errorResult(`${name}: 'task_id' must be a task id (1–64 of [A-Za-z0-9_-])`);
      try {
        const reply = name === "task_status" ? await deps.client.get(id) : await deps.client.cancel(id);
        return { content: [{ type: "text", text: JSON.stringify(reply) }], structuredContent: reply };
      } catch (err) {
        return remoteErrorResult(err);
      }
    }
    throw new McpError(ErrorCode.InvalidParams, `unknown tool '${name.slice(0, 100)}'`);

    async function run(xml: string, inputs: Record<string, unknown>): Promise<CallToolResult> {
      const taskId = newTaskId();
      const token = extra._meta?.progressToken;
      let progress = 0;
      const notify = (message: string) => {
        if (token === undefined) return;
        progress += 1;
        extra
          .sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, message } })
          .catch(() => undefined);
      };
      // The client reports the submission before any event, so `submitted` is the first progress.
      const onEvent = (e: TaskEvent) => notify(`${e.type} (${e.state})${e.message ? `: ${e.message}` : ""}`);
      let submitted = false;
      const cancel = () => {
        if (submitted) void deps.client.cancel(taskId).catch(() => undefined);
      };
      extra.signal.addEventListener("abort", cancel, { once: true });
      try {
        const outcome = await deps.client.run({ xml, inputs, taskId, ...(deps.budget ? { budget: deps.budget } : {}) }, onEvent, {
          onSubmitted: () => {
            submitted = true;
            deps.tasks.add(taskId);
            notify(`task ${taskId} submitted`);
            // Cancelled while the submission was on its way.
            if (extra.signal.aborted) cancel();
          },
        });
        return outcomeResult(outcome);
      } catch (err) {
        return remoteErrorResult(err);
      } finally {
        extra.signal.removeEventListener("abort", cancel);
      }
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: deps.tasks.ids().map((id) => ({ uri: taskUri(id), name: `task ${id}`, mimeType: "application/json" })),
  }));

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: "dirigent://tasks/{taskId}",
        name: "task",
        description: "A dirigent task: its state and, once it ended, its result (content, notes, usage) and its nodes.",
        mimeType: "application/json",
      },
      {
        uriTemplate: "dirigent://tasks/{taskId}/nodes/{path}",
        name: "node",
        description: "One node of a task (its path URL-encoded, as the task lists it): its record and conversation.",
        mimeType: "application/json",
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri;
    const match = /^dirigent:\/\/tasks\/([^/?#]+)(?:\/nodes\/([^/?#]+))?$/.exec(uri);
    const id = parseTaskId(match?.[1]);
    const path = match?.[2] === undefined ? undefined : decodedPath(match[2]);
    if (id === undefined || path === "")
      throw new McpError(
        ErrorCode.InvalidParams,
        `no such resource '${uri.slice(0, 200)}' (expected dirigent://tasks/<task id> or dirigent://tasks/<task id>/nodes/<path>)`,
      );
    const json = (body: unknown) => ({ contents: [{ uri, mimeType: "application/json", text: JSON.stringify(body, null, 2) }] });
    try {
      if (path !== undefined) return json(await deps.client.node(id, path));
      const reply = await deps.client.get(id);
      // A task that ended lists its nodes (their records: docs/protocol.md); one whose records are gone has none.
      const nodes = reply.result
        ? await deps.client.nodes(id).then(
            (list) => list.nodes,
            () => undefined,
          )
        : undefined;
      return json({ ...reply, ...(reply.result ? { summary: taskSummary(reply.result) } : {}), ...(nodes ? { nodes } : {}) });
    } catch (err) {
      if (err instanceof RemoteError && err.code === "NOT_FOUND")
        throw new McpError(ErrorCode.InvalidParams, path === undefined ? `no task '${id}'` : `no node '${path}' of task '${id}'`);
      throw new McpError(ErrorCode.InternalError, err instanceof RemoteError ? `${err.code}: ${err.message}` : messageOf(err));
    }
  });

  return server;
}

/** A node path from a resource URI: URL-decoded, or "" when it is not valid percent-encoding. */
function decodedPath(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return "";
  }
}
