/** The commands of `script` tasks, as a Handler runs them (`<root>.handler.script`). */
import type { ScriptReply, ScriptRequest } from "../../protocol/index.js";
import type { Toolset } from "./toolset.js";

/** Runs one command of a `script` task with the `run_script` tool's confinement and limits. */
export async function runScriptRequest(toolset: Toolset, request: ScriptRequest, signal: AbortSignal): Promise<ScriptReply> {
  const base = { type: "handler.script_result" as const, taskId: request.taskId, nodePath: request.nodePath };
  const ran = await toolset.script(
    {
      argv: request.argv,
      timeoutMs: request.timeoutMs,
      ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
      ...(request.env ? { env: request.env } : {}),
      ...(request.inheritEnv === undefined ? {} : { inheritEnv: request.inheritEnv }),
    },
    signal,
  );
  if ("error" in ran) return { ...base, exitCode: null, timedOut: false, stdout: "", stderr: "", error: ran.error };
  const { exitCode, timedOut, stdout, stderr } = ran.outcome;
  return { ...base, exitCode, timedOut, stdout, stderr };
}
