/**
 * The Handler role: runs each atomic task as one LLM session ({@link handlerSessionMachine}).
 * Serves `<root>.handler.execute` in queue group `handler`; reports turns, retries, tool calls and the context
 * warning as progress; aborts the session (its HTTP request, backoff wait or tool) when the task is cancelled.
 * `<root>.handler.script` (same queue group) runs the commands of `script` tasks with the `run_script` tool's limits.
 * A request for a session or command still running, here or in another Handler, joins it (actors/handler/lease.ts).
 */
import { toPromise } from "xstate";
import type { SessionOutput } from "../../machines/handler/session.js";
import {
  CancelBroadcast,
  NodeAbort,
  decode,
  ExecuteRequest,
  RECORD_VERSION,
  Requests,
  ScriptRecord,
  ScriptRequest,
  TurnRecord,
  taskFailure,
  type ExecuteReply,
  type ScriptReply,
  type SessionCheckpoint,
  type ModelTurnEventData,
} from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { ActorDeps, RoleHandle } from "../deps.js";
import { inspectOption } from "../inspect-option.js";
import { publishProgress } from "../local.js";
import { sessionActors, type SessionEffects } from "./session.js";
import { liveRuns } from "./live-runs.js";
import { conversationLog, readSessionRecord, recordsBehind, scriptKey, turnKey, writeRecord } from "./records.js";
import { createLeases, createRunGate, type JoinedAt } from "./lease.js";
import { CONTINUATION_TOOL_NAMES } from "./continuation.js";
import { templateToolCollisions } from "./template-tools.js";
import { runToolCalls } from "./tool-calls.js";
import { readsRecord, replayable, replayOf } from "../../machines/handler/replay.js";
import { costNote, pricedResult, turnCosts } from "../../machines/handler/pricing.js";
import { outputLimit, sessionInput, sessionModel } from "../../machines/handler/session-input.js";
import { attachContext } from "./files.js";
import type { CallModel } from "../model.js";
import { serve } from "../serve.js";
import { contextWindowOf, tokenCounter } from "./tokens.js";
import { runScriptRequest, type Toolset } from "./toolset.js";
import { HandlerPeers } from "./peers.js";
import { Semaphore } from "../limit.js";
import { missingToolsMessage, settingsOf, toolChoice, type HandlerConfig } from "./settings.js";
import { sessionModelCall } from "./model-call.js";
import { createMasker, maskDeep } from "../secrets.js";
import { tracedModel } from "./traces.js";
import { activeContext } from "../tracing.js";

/** The signal of context without files to read: nothing to time out. */
const NO_SIGNAL = new AbortController().signal;

const NO_TOOLS: Toolset = {
  definitions: [],
  run: async (call) => ({ malformed: true, content: `error: no tool named '${call.function.name}' is available` }),
  script: async () => ({ error: "this Handler has no tools" }),
  sandbox: { mode: "bwrap", unavailable: "this Handler has no tools" },
};

/**
 * Starts the Handler role. Without a toolset, the model is offered no tools. With `records` (the turns bucket),
 * calls that carry an `occurrence` are recorded answer by answer (and their `run_script` calls one by one) and
 * replayed on a re-run (actors/handler/records.ts, actors/handler/tool-calls.ts).
 */
export function startHandler(
  deps: ActorDeps,
  config: HandlerConfig,
  callModel: CallModel,
  toolset: Toolset = NO_TOOLS,
  records?: TaskStore,
): RoleHandle {
  const mask = createMasker(config.secrets ?? []);
  // This Handler's session actors: the machine provided once, its effects acting for this Handler's sessions only.
  const actors = sessionActors();
  // Its sessions and script commands in flight: a cancel, a `node.abort` or the Handler's stop ends them.
  const live = liveRuns();
  /** The tools of a session: its task's `<tools>` or the default, with its continuation tools. */
  const chooseTools = toolChoice(toolset, config.defaultTools, (unmatched) =>
    deps.log.warn(
      { tools: unmatched },
      `DIRIGENT_TOOLS names tools this Handler does not have: ${unmatched.join(", ")}; they are left out`,
    ),
  );
  // One run per record key: a request for a session or script still running (here or in another Handler) joins it.
  const gate = records ? createRunGate(createLeases(records, deps.log)) : undefined;
  // Session records this Handler writes behind its replies; a read of one waits for its write.
  const behind = records ? recordsBehind(records, deps.log) : undefined;
  // Token counts of the texts this Handler's sessions sent lately.
  const countRequestTokens = tokenCounter();
  const joinedEvent = (request: ExecuteRequest | ScriptRequest, what: string) => (at: JoinedAt) =>
    publishProgress(deps, {
      type: "task.progress",
      taskId: request.taskId,
      event: "model.joined",
      message: `joined the ${what} in flight ${at === "here" ? "in this Handler" : "in another Handler"}: it is not started again`,
      data: { nodePath: request.nodePath, at },
    });
  const execute = async (request: ExecuteRequest): Promise<ExecuteReply> => {
    // A task naming tools this Handler lacks is refused before anything runs: no record, no model call.
    const chosen = chooseTools(settingsOf(request).tools, request.continuations ?? [], request.templateTools ?? []);
    if ("missing" in chosen) {
      const { taskId, nodePath } = request;
      const message = missingToolsMessage(chosen.missing, toolset, config.natsTools);
      return {
        type: "handler.result",
        taskId,
        nodePath,
        result: taskFailure("input_validation_failure", message, { missingTools: chosen.missing }),
      };
    }
    const key = records ? turnKey(request) : undefined;
    if (key === undefined || gate === undefined) return runSession(request, undefined, false, () => undefined);
    return gate.run(
      request.taskId,
      key,
      (before, releaseAfter) => runSession(request, key, before, releaseAfter),
      joinedEvent(request, "session"),
    );
  };
  /** Runs a session, or replays or continues its record (`key`); `before`: another run of it came first. */
  const runSession = async (
    request: ExecuteRequest,
    key: string | undefined,
    before: boolean,
    releaseAfter: (written: Promise<unknown>) => void,
  ): Promise<ExecuteReply> => {
    const { taskId, nodePath } = request;
    const kinds = request.continuations ?? [];
    const settings = settingsOf(request);
    const templateTools = request.templateTools ?? [];
    const taken = templateToolCollisions(templateTools, [...toolset.definitions.map((d) => d.function.name), ...CONTINUATION_TOOL_NAMES]);
    if (taken.length > 0) {
      const message = `library templates offered as tools (DIRIGENT_TEMPLATE_TOOLS) take names this Handler's tools already have: ${taken.join(", ")}`;
      return { type: "handler.result", taskId, nodePath, result: taskFailure("input_validation_failure", message, { names: taken }) };
    }
    const chosen = chooseTools(settings.tools, kinds, templateTools);
    // Checked in `execute` before the run: the toolset does not change.
    const { definitions: tools, offered } = "missing" in chosen ? { definitions: [], offered: new Set<string>() } : chosen;
    const maxOutputTokens = outputLimit(settings, config);
    const progress = (event: string, message: string, data: Record<string, unknown>) =>
      publishProgress(deps, maskDeep({ type: "task.progress" as const, taskId, event, message, data: { nodePath, ...data } }, mask));
    const replay = replayOf(key && behind && readsRecord(request, before) ? await behind.read(key, TurnRecord) : undefined);
    if (replay.kind !== "run") progress("model.replayed", replay.message, { turns: replay.turns });
    if (replay.kind === "replay") {
      const { result, session } = replay;
      return { type: "handler.result", taskId, nodePath, result, ...(session ? { session } : {}) };
    }
    const recorded = replay.kind === "continue" ? replay.record : undefined;
    const model = sessionModel(request, config);
    const trace = { parent: activeContext(), taskId, nodePath, content: deps.traceContent === true, mask };
    const traced = tracedModel(callModel, trace);
    // What the session's records keep of its conversation; a session continued from a running record keeps its calls.
    const log = conversationLog(recorded?.trace);
    const effects: SessionEffects = {
      callModel: sessionModelCall({
        call: traced,
        settings,
        tools,
        maxOutputTokens,
        stream: request.stream ?? config.streamDeltas ?? false,
        secrets: config.secrets ?? [],
        progress,
        answered: (input, reply, timing) =>
          log.turn(input, reply, { ...timing, cost: costNote(config.prices, model, reply.model, reply.usage).cost }),
      }),
      countTokens: (input) => countRequestTokens(input.model, input.messages, tools),
      ...(key && records
        ? {
            recordTurn: (input: SessionCheckpoint) =>
              writeRecord(
                records,
                key,
                TurnRecord,
                maskDeep({ v: RECORD_VERSION, status: "running" as const, session: input, trace: log.trace() }, mask),
                deps.log,
              ),
          }
        : {}),
      runTools: (input, signal) =>
        runToolCalls(input, signal, {
          toolset,
          kinds,
          ...(offered ? { offered } : {}),
          templateTools,
          log: deps.log,
          progress,
          trace,
          onCall: log.toolCall,
          ...(key && records ? { records: { store: records, key, ...(recorded ? { restoredTurn: recorded.session.turns } : {}) } } : {}),
        }),
      // `usage` and `cost` are the message's own; the session's running totals have fields of their own.
      turnCompleted: (context, { callUsage, usage, ...params }) => {
        const own = turnCosts(config.prices, model, context.model, callUsage, usage);
        const data: ModelTurnEventData = { nodePath, ...params, usage: callUsage, sessionUsage: usage, model: context.model, ...own };
        progress("model.turn", `turn ${params.turn}/${params.maxTurns}`, { ...data, context: params.context });
      },
      contextWarning: (params) =>
        progress(
          "context.warning",
          `context at ${params.used}/${params.limit} tokens (warning at ${Math.round(params.threshold * 100)} %)`,
          { ...params },
        ),
    };
    const attached =
      request.resume || recorded
        ? { text: "", notes: {} }
        : await attachContext(toolset, request.files, request.context, request.files?.length ? AbortSignal.timeout(30_000) : NO_SIGNAL);
    const actor = actors.create(effects, {
      ...inspectOption(deps, "handler", taskId),
      input: sessionInput(request, settings, config, {
        contextWindow: contextWindowOf(model),
        attached: attached.text,
        ...(recorded ? { recorded: recorded.session } : {}),
      }),
    });
    // Leaving the current state stops the invoked actor, whose AbortSignal cancels the HTTP request or backoff wait.
    const ended = live.add(taskId, nodePath, () => actor.send({ type: "session.cancel" }));
    try {
      const done = toPromise(actor);
      actor.start();
      const { session: suspended, ...result }: SessionOutput = await done;
      // A suspended session keeps the task's settings, for its resume in any Handler.
      const session = suspended && Object.keys(settings).length > 0 ? { ...suspended, settings } : suspended;
      const priced = pricedResult(result, config.prices, model);
      const reply: ExecuteReply = maskDeep(
        {
          type: "handler.result",
          taskId,
          nodePath,
          result: { ...priced, notes: { ...attached.notes, ...priced.notes } },
          ...(session ? { session } : {}),
        },
        mask,
      );
      if (key && behind && replayable(result))
        releaseAfter(
          behind.write(key, TurnRecord, {
            v: RECORD_VERSION,
            status: "done",
            result: reply.result,
            ...(reply.session ? { session: reply.session } : {}),
            conversation: maskDeep(log.conversation(session?.messages), mask),
          }),
        );
      return reply;
    } finally {
      ended();
    }
  };

  const script = async (request: ScriptRequest): Promise<ScriptReply> => {
    const key = records ? scriptKey(request) : undefined;
    if (key === undefined || gate === undefined) return runScript(request, undefined);
    return gate.run(request.taskId, key, () => runScript(request, key), joinedEvent(request, "script command"));
  };
  /** Runs a script command, or replays its record (`key`). */
  const runScript = async (request: ScriptRequest, key: string | undefined): Promise<ScriptReply> => {
    const controller = new AbortController();
    const ended = live.add(request.taskId, request.nodePath, () => controller.abort());
    try {
      const recorded = key && records ? await readSessionRecord(records, key, ScriptRecord, deps.log) : undefined;
      if (recorded) {
        const { v: _v, ...outcome } = recorded;
        return { type: "handler.script_result", taskId: request.taskId, nodePath: request.nodePath, ...outcome };
      }
      const reply = maskDeep(await runScriptRequest(toolset, request, controller.signal), mask);
      if (key && records && !controller.signal.aborted) {
        const { type: _t, taskId: _id, nodePath: _p, ...outcome } = reply;
        await writeRecord(records, key, ScriptRecord, { v: RECORD_VERSION, ...outcome }, deps.log);
      }
      return reply;
    } finally {
      ended();
    }
  };

  // A request that finds every slot taken goes to another Handler process with a free one (peers.ts).
  const slots = { execute: new Semaphore(config.concurrency), script: new Semaphore(config.concurrency) };
  const peers = new HandlerPeers(deps, deps.newId(), slots);
  peers.start();
  const queue = deps.subjects.queue("handler");
  const subscriptions = [
    serve(deps, Requests.execute, { queue, concurrency: slots.execute, overflow: peers.overflow("execute"), local: true, handle: execute }),
    serve(deps, Requests.script, { queue, concurrency: slots.script, overflow: peers.overflow("script"), local: true, handle: script }),
    deps.bus.subscribe(deps.subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (!decoded.ok) return;
      live.cancelTask(decoded.value.taskId);
      gate?.cancel(decoded.value.taskId);
    }),
    deps.bus.subscribe(deps.subjects.nodeAbort, (msg) => {
      const decoded = decode(NodeAbort, msg.data);
      if (!decoded.ok) return;
      live.abortNode(decoded.value.taskId, decoded.value.nodePath);
    }),
  ];

  return {
    role: "handler",
    async stop() {
      // The queue-group UNSUBs go out first, synchronously, before anything here waits for the server: a request
      // routed once this Handler is seen to stop must not reach it (peers.stop() waits for a round trip).
      const unsubscribed = Promise.all(subscriptions.map((s) => s.unsubscribe()));
      await peers.stop();
      await unsubscribed;
      gate?.stop();
      live.stopAll();
      await toolset.close?.();
    },
  };
}
