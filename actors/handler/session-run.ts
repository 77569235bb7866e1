/**
 * One session call as a Handler runs it: refused when a library template offered as a tool takes a name its tools
 * have; else its record replayed or continued (machines/handler/replay.ts) or a fresh run; the session's effects
 * bound to the model client, the toolset and the records; its actor run to the end; its reply masked, and recorded
 * as done behind it for a re-run to replay.
 */
import { toPromise } from "xstate";
import { costNote, turnCosts } from "../../machines/handler/pricing.js";
import { readsRecord, replayable, replayOf, type RunningTurnRecord } from "../../machines/handler/replay.js";
import { outputLimit, sessionInput, sessionModel } from "../../machines/handler/session-input.js";
import { sessionReply } from "../../machines/handler/session-reply.js";
import type { SessionOutput } from "../../machines/handler/session.js";
import {
  RECORD_VERSION,
  TurnRecord,
  taskFailure,
  type ExecuteReply,
  type ExecuteRequest,
  type ModelTurnEventData,
  type SessionCheckpoint,
  type SessionSettings,
} from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { settled } from "../settled.js";
import { inspectOption } from "../inspect-option.js";
import { publishProgress } from "../local.js";
import type { CallModel } from "../model.js";
import { maskDeep, type Masker } from "../secrets.js";
import { activeContext } from "../tracing.js";
import { CONTINUATION_TOOL_NAMES } from "./continuation.js";
import { attachContext } from "./files.js";
import type { LiveRuns } from "./live-runs.js";
import { sessionModelCall } from "./model-call.js";
import { conversationLog, writeRecord, type ConversationLog, type RecordsBehind } from "./records.js";
import type { SessionActors, SessionEffects } from "./session.js";
import { settingsOf, type HandlerConfig, type SessionTools } from "./settings.js";
import { templateToolCollisions } from "./template-tools.js";
import type { CountRequestTokens } from "./tokens.js";
import { contextWindowOf } from "./tokens.js";
import { runToolCalls } from "./tool-calls.js";
import type { Toolset } from "./toolset.js";
import { tracedModel } from "./traces.js";

/** The signal of context without files to read: nothing to time out. */
const NO_SIGNAL = new AbortController().signal;

/** What a Handler's session runs share. */
export interface SessionHandler {
  deps: ActorDeps;
  config: HandlerConfig;
  callModel: CallModel;
  toolset: Toolset;
  /** The turns bucket; absent: nothing is recorded. */
  records?: TaskStore | undefined;
  /** Session records written behind their replies. */
  behind?: RecordsBehind | undefined;
  mask: Masker;
  actors: SessionActors;
  live: LiveRuns;
  countRequestTokens: CountRequestTokens;
}

/**
 * Runs a session call with `tools` (chosen once, by the Handler's `execute`), or replays or continues its record
 * (`key`); `before`: another run of it came first.
 */
export type RunSession = (
  request: ExecuteRequest,
  tools: SessionTools,
  key: string | undefined,
  before: boolean,
  finalWrite: (written: Promise<boolean>) => void,
  held: Promise<boolean>,
) => Promise<ExecuteReply>;

/** Why a run that did not get its key's lease stops (its answer is dropped: the request runs the usual way). */
const DROPPED = "another run of this session came first: this one's answer is dropped";

/** The session runs of `handler`. */
export function sessionRunner(handler: SessionHandler): RunSession {
  const { deps, config, toolset, behind, mask } = handler;
  return async (request, tools, key, before, finalWrite, held) => {
    const { taskId, nodePath } = request;
    const settings = settingsOf(request);
    const templateTools = request.templateTools ?? [];
    const taken = templateToolCollisions(templateTools, [...toolset.definitions.map((d) => d.function.name), ...CONTINUATION_TOOL_NAMES]);
    if (taken.length > 0) {
      const message = `library templates offered as tools (DIRIGENT_TEMPLATE_TOOLS) take names this Handler's tools already have: ${taken.join(", ")}`;
      return { type: "handler.result", taskId, nodePath, result: taskFailure("input_validation_failure", message, { names: taken }) };
    }
    // A run started before its lease was held (a fresh request's: actors/handler/lease.ts) that did not get it is
    // dropped: from then on it says nothing, and its model answer goes no further.
    let dropped = false;
    void held.then((ok) => void (dropped = !ok));
    const progress = (event: string, message: string, data: Record<string, unknown>) => {
      if (!dropped)
        publishProgress(deps, maskDeep({ type: "task.progress" as const, taskId, event, message, data: { nodePath, ...data } }, mask));
    };
    const replay = replayOf(key && behind && readsRecord(request, before) ? await behind.read(key, TurnRecord) : undefined);
    if (replay.kind !== "run") progress("model.replayed", replay.message, { turns: replay.turns });
    if (replay.kind === "replay") {
      const { result, session } = replay;
      return { type: "handler.result", taskId, nodePath, result, ...(session ? { session } : {}) };
    }
    const recorded = replay.kind === "continue" ? replay.record : undefined;
    const model = sessionModel(request, config);
    // What the session's records keep of its conversation; a session continued from a running record keeps its calls.
    const log = conversationLog(recorded?.trace);
    const effects = sessionEffects(handler, request, { settings, tools, key, recorded, log, progress, held, dropped: () => dropped });
    const attached =
      request.resume || recorded
        ? { text: "", notes: {} }
        : await attachContext(toolset, request.files, request.context, request.files?.length ? AbortSignal.timeout(30_000) : NO_SIGNAL);
    const { actor, release } = handler.actors.create(effects, {
      ...inspectOption(deps, "handler", taskId),
      input: sessionInput(request, settings, config, {
        contextWindow: contextWindowOf(model),
        attached: attached.text,
        ...(recorded ? { recorded: recorded.session } : {}),
      }),
    });
    // Leaving the current state stops the invoked actor, whose AbortSignal cancels the HTTP request or backoff wait.
    const ended = handler.live.add(taskId, nodePath, () => actor.send({ type: "session.cancel" }));
    const settle = () => {
      release();
      ended();
    };
    return settled(
      () => {
        const done = toPromise(actor);
        actor.start();
        return done;
      },
      settle,
      answered,
    );
    function answered(output: SessionOutput) {
      const reply = maskDeep(
        sessionReply(request, output, { settings, attachedNotes: attached.notes, prices: config.prices, model }),
        mask,
      );
      if (key && behind && replayable(output)) {
        const done: TurnRecord = {
          v: RECORD_VERSION,
          status: "done",
          result: reply.result,
          ...(reply.session ? { session: reply.session } : {}),
          conversation: maskDeep(log.conversation(output.session?.messages), mask),
        };
        finalWrite(held.then((ok) => ok && behind.write(key, TurnRecord, done)));
      }
      return reply;
    }
  };
}

/** One session's run: its settings and tools, record key, the record it continues, its conversation log and progress. */
interface SessionRun {
  settings: SessionSettings;
  tools: SessionTools;
  key: string | undefined;
  recorded: RunningTurnRecord | undefined;
  log: ConversationLog;
  progress: (event: string, message: string, data: Record<string, unknown>) => void;
  /** Resolves true once the run holds its key's lease; false: its model answer goes no further. */
  held: Promise<boolean>;
  /** The run did not get its key's lease (`held` resolved false). */
  dropped(): boolean;
}

/** The effects of the session that runs `request`. */
function sessionEffects(handler: SessionHandler, request: ExecuteRequest, run: SessionRun): SessionEffects {
  const { deps, config, toolset, records, mask } = handler;
  const { settings, key, recorded, log, progress, held, dropped } = run;
  const { definitions: tools, offered } = run.tools;
  const { taskId, nodePath } = request;
  const kinds = request.continuations ?? [];
  const templateTools = request.templateTools ?? [];
  const model = sessionModel(request, config);
  const trace = { parent: activeContext(), taskId, nodePath, content: deps.traceContent === true, mask };
  const call = sessionModelCall({
    call: tracedModel(handler.callModel, trace),
    settings,
    tools,
    maxOutputTokens: outputLimit(settings, config),
    stream: request.stream ?? config.streamDeltas ?? false,
    secrets: config.secrets ?? [],
    progress,
    answered: (input, reply, timing) =>
      log.turn(input, reply, {
        durationMs: timing.durationMs,
        retries: timing.retries,
        cost: costNote(config.prices, model, reply.model, reply.usage).cost,
      }),
  });
  return {
    // A run not yet holding its key's lease keeps the model's answer until it does (actors/handler/lease.ts).
    callModel: async (input, signal) => {
      if (dropped()) throw new Error(DROPPED);
      const reply = await call(input, signal);
      if (!(await held)) throw new Error(DROPPED);
      return reply;
    },
    countTokens: (input) => handler.countRequestTokens(input.model, input.messages, tools),
    ...(key && records
      ? {
          recordTurn: async (input: SessionCheckpoint) => {
            const running: TurnRecord = { v: RECORD_VERSION, status: "running", session: input, trace: log.trace() };
            await writeRecord(records, key, TurnRecord, maskDeep(running, mask), deps.log);
          },
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
      progress("context.warning", `context at ${params.used}/${params.limit} tokens (warning at ${Math.round(params.threshold * 100)} %)`, {
        ...params,
      }),
  };
}
