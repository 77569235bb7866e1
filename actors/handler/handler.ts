/**
 * The Handler role: runs each atomic task as one LLM session ({@link handlerSessionMachine}).
 * Serves `<root>.handler.execute` in queue group `handler`; reports turns, retries, tool calls and the context
 * warning as progress; aborts the session (its HTTP request, backoff wait or tool) when the task is cancelled.
 * `<root>.handler.script` (same queue group) runs the commands of `script` tasks with the `run_script` tool's limits.
 * A request for a session or command still running, here or in another Handler, joins it (actors/handler/lease.ts).
 */
import {
  CancelBroadcast,
  NodeAbort,
  decode,
  ExecuteRequest,
  Requests,
  ScriptRecord,
  ScriptRequest,
  TurnRecord,
  taskFailure,
  type ExecuteReply,
  type ScriptReply,
} from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { ActorDeps, RoleHandle } from "../deps.js";
import { publishProgress } from "../local.js";
import { sessionActors } from "./session.js";
import { sessionRunner } from "./session-run.js";
import { scriptRunner } from "./script-run.js";
import { liveRuns } from "./live-runs.js";
import { readSessionRecord, recordsBehind, scriptKey, turnKey } from "./records.js";
import { createLeases, createRunGate, HELD, type JoinedAt } from "./lease.js";
import type { CallModel } from "../model.js";
import { serve } from "../serve.js";
import { tokenCounter } from "./tokens.js";
import type { Toolset } from "./toolset.js";
import { HandlerPeers } from "./peers.js";
import { Semaphore } from "../limit.js";
import { missingToolsMessage, settingsOf, toolChoice, type HandlerConfig } from "./settings.js";
import { createMasker } from "../secrets.js";

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
    if (key === undefined || gate === undefined || records === undefined)
      return runSession(request, chosen, undefined, false, () => undefined, HELD);
    return gate.run(
      request.taskId,
      key,
      (before, finalWrite, held) => runSession(request, chosen, key, before, finalWrite, held),
      joinedEvent(request, "session"),
      async () => (await readSessionRecord(records, key, TurnRecord, deps.log))?.status === "done",
      // Nothing of the task ran before: the session asks the model while its marker is created.
      request.fresh === true,
    );
  };
  const runSession = sessionRunner({
    deps,
    config,
    callModel,
    toolset,
    records,
    behind,
    mask,
    actors,
    live,
    countRequestTokens,
  });
  const script = async (request: ScriptRequest): Promise<ScriptReply> => {
    const key = records ? scriptKey(request) : undefined;
    if (key === undefined || gate === undefined || records === undefined) return runScript(request, undefined);
    return gate.run(
      request.taskId,
      key,
      (_before, finalWrite) => runScript(request, key, finalWrite),
      joinedEvent(request, "script command"),
      async () => (await readSessionRecord(records, key, ScriptRecord, deps.log)) !== undefined,
    );
  };
  const runScript = scriptRunner({ deps, toolset, records, mask, live });

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
