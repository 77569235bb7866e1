/**
 * What a Handler answers for a session that ran (pure): the session's output priced, with the notes of the context
 * attached to it, and a suspended session keeping the task's settings, for its resume in any Handler.
 */
import type { ExecuteReply, ExecuteRequest, SessionSettings } from "../../protocol/index.js";
import { pricedResult, type Prices } from "./pricing.js";
import type { SessionOutput } from "./session-context.js";

/** How a session ran: the settings it ran under, the notes of its attached context, its prices and requested model. */
export interface SessionRan {
  settings: SessionSettings;
  attachedNotes: Record<string, unknown>;
  prices: Prices | undefined;
  model: string;
}

/** The reply to `request` of the session that ended with `output`. */
export function sessionReply(request: Pick<ExecuteRequest, "taskId" | "nodePath">, output: SessionOutput, ran: SessionRan): ExecuteReply {
  const { session: suspended, ...result } = output;
  const session = suspended && Object.keys(ran.settings).length > 0 ? { ...suspended, settings: ran.settings } : suspended;
  const priced = pricedResult(result, ran.prices, ran.model);
  return {
    type: "handler.result",
    taskId: request.taskId,
    nodePath: request.nodePath,
    result: { ...priced, notes: { ...ran.attachedNotes, ...priced.notes } },
    ...(session ? { session } : {}),
  };
}
