/**
 * The seam between the actor shells and XState inspection: each shell passes `...inspectOption(deps, role, taskId)`
 * to `createActor` for the root actors it creates; the runtime's hook (runtime/inspect/publisher.ts) publishes them.
 */
import type { InspectionEvent } from "xstate";
import type { TaskId } from "../protocol/index.js";

/** Who created an inspected actor system: the role of the shell and the task it works on. */
export interface InspectScope {
  /** The role whose shell created the root actor. */
  role: "director" | "evaluator" | "handler" | "memory" | "compiler" | "supervisor";
  /** The task the actor system works on, when it works on one. */
  taskId?: TaskId | undefined;
}

/** Receives every inspection event of an actor system, with the scope its shell gave it. */
export type InspectHook = (event: InspectionEvent, scope: InspectScope) => void;

/**
 * The `inspect` option of `createActor` for a root actor: `{}` when inspection is off (XState then does no
 * inspection work at all), else a callback handing every event of the actor's system (children included) to the hook.
 *
 * @example createActor(machine, { ...inspectOption(deps, "handler", taskId), input })
 */
export function inspectOption(
  holder: { readonly inspect?: InspectHook | undefined },
  role: InspectScope["role"],
  taskId?: TaskId,
): { inspect?: (event: InspectionEvent) => void } {
  const hook = holder.inspect;
  if (!hook) return {};
  const scope: InspectScope = { role, taskId };
  return { inspect: (event) => hook(event, scope) };
}
