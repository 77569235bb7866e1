/** A task's result as a Director publishes it. */
import { messageOf } from "../../protocol/errors.js";
import { encode, TaskOutcome } from "../../protocol/index.js";
import type { RunEnv } from "./run.js";
import { fitOutcome } from "./message-fit.js";

/**
 * Publishes a task's result: stored with an acknowledgement where the transport can, else (or when that fails) sent.
 * The task's events kept for its history are stored first, on the same connection, so the stream holds them before
 * the result; both writes are awaited together.
 */
export async function publishResult(
  env: Pick<RunEnv, "deps" | "publishStored" | "history">,
  taskId: string,
  outcome: TaskOutcome,
): Promise<void> {
  const { deps, publishStored, history } = env;
  const subject = deps.subjects.taskResult(taskId);
  // Cut to fit one message (actors/director/message-fit.ts); the record keeps it whole.
  const body = encode(TaskOutcome, fitOutcome(outcome, deps.bus.maxMessageBytes));
  const events = history.flush(taskId);
  if (publishStored) {
    try {
      await Promise.all([publishStored(subject, body, `${subject}.final`), events]);
      return;
    } catch (err) {
      deps.log.info({ taskId, err: messageOf(err) }, "result not stored in the events stream; published without acknowledgement");
    }
  }
  deps.bus.publish(subject, body);
  await events;
}
