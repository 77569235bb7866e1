/**
 * One script command as a Handler runs it (`<root>.handler.script`): its record's outcome replayed, or the command
 * run with the `run_script` tool's limits, its outcome masked and recorded unless it was stopped.
 */
import { RECORD_VERSION, ScriptRecord, type ScriptReply, type ScriptRequest } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { maskDeep, type Masker } from "../secrets.js";
import type { LiveRuns } from "./live-runs.js";
import { readSessionRecord, writeRecord } from "./records.js";
import { runScriptRequest, type Toolset } from "./toolset.js";

/** What a Handler's script runs share. */
export interface ScriptHandler {
  deps: ActorDeps;
  toolset: Toolset;
  /** The turns bucket; absent: nothing is recorded. */
  records?: TaskStore | undefined;
  mask: Masker;
  live: LiveRuns;
}

/** Runs a script command, or replays its record (`key`); `finalWrite` is handed the write of its record. */
export type RunScript = (
  request: ScriptRequest,
  key: string | undefined,
  finalWrite?: (written: Promise<boolean>) => void,
) => Promise<ScriptReply>;

/** The script runs of `handler`. */
export function scriptRunner({ deps, toolset, records, mask, live }: ScriptHandler): RunScript {
  return async (request, key, finalWrite) => {
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
        const written = writeRecord(records, key, ScriptRecord, { v: RECORD_VERSION, ...outcome }, deps.log);
        finalWrite?.(written);
        await written;
      }
      return reply;
    } finally {
      ended();
    }
  };
}
