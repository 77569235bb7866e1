/** A task's result as a Director publishes it. */
import type { ActorDeps } from "../deps.js";
import { messageOf } from "../../protocol/errors.js";
import type { RunEnv } from "./run.js";

/** Publishes a task's result: stored with an acknowledgement where the transport can, else (or when that fails) sent. */
export async function publishResult(
  deps: ActorDeps,
  publishStored: RunEnv["publishStored"],
  taskId: string,
  body: Uint8Array,
): Promise<void> {
  const subject = deps.subjects.taskResult(taskId);
  if (publishStored) {
    try {
      await publishStored(subject, body, `${subject}.final`);
      return;
    } catch (err) {
      deps.log.info({ taskId, err: messageOf(err) }, "result not stored in the events stream; published without acknowledgement");
    }
  }
  deps.bus.publish(subject, body);
}
