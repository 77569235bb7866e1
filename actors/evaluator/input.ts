/**
 * `request_user_input`: while a session waits, the Evaluator running its task listens on `<root>.tasks.<id>.input`.
 * The first valid {@link UserInput} is the answer (a sender that asked for a reply gets `accepted`); malformed
 * messages get a coded error reply and the wait goes on. No answer within the timeout ends the wait with an error.
 */
import { decode, encodeJson, errorReply, Requests, type InputRequest } from "../../protocol/index.js";
import type { ActorDeps } from "../deps.js";
import { respond } from "../serve.js";

/** Longest wait for an answer when neither the request nor the configuration says otherwise: 10 minutes. */
export const DEFAULT_INPUT_TIMEOUT_MS = 600_000;

/** Waits for the answer to `request` of task `taskId`; rejects on timeout or when `signal` aborts. */
export function waitForInput(
  deps: ActorDeps,
  taskId: string,
  request: InputRequest,
  maxTimeoutMs: number,
  signal: AbortSignal,
): Promise<string> {
  const timeoutMs = Math.min(request.timeout_s === undefined ? maxTimeoutMs : request.timeout_s * 1000, maxTimeoutMs);
  const subject = Requests.taskInput.subjectOf(deps.subjects, taskId);
  return new Promise<string>((resolve, reject) => {
    let settled = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", aborted);
      void subscription.unsubscribe();
      outcome();
    };
    const subscription = deps.bus.subscribe(subject, (msg) => {
      if (settled) return;
      const decoded = decode(Requests.taskInput.request, msg.data);
      if (!decoded.ok) {
        msg.respond(encodeJson(errorReply("INVALID_MESSAGE", decoded.error.message, { details: decoded.error.issues })));
        return;
      }
      respond(msg, Requests.taskInput, { taskId, status: "accepted" });
      finish(() => resolve(decoded.value.text));
    });
    const timer = setTimeout(
      () => finish(() => reject(new Error(`no answer on ${subject} within ${Math.round(timeoutMs / 1000)} s`))),
      timeoutMs,
    );
    const aborted = () => finish(() => reject(signal.reason instanceof Error ? signal.reason : new Error("cancelled")));
    if (signal.aborted) aborted();
    else signal.addEventListener("abort", aborted, { once: true });
  });
}
