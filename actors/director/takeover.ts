/**
 * Takeovers between live Directors. A task's intake message can be delivered to a second Director while the first
 * still runs it (its in-progress signals were lost, say with a killed stream leader); the second claims the task over
 * with a compare-and-set on its record, and the first would learn of it only at its next write. So the second tells
 * the first before it publishes anything of the task ({@link tellPreviousOwner}), and the first stops publishing the
 * task's events at once ({@link serveTakeovers}): no event of the first follows the second's `task.resumed`.
 */
import { decode, errorReply, Requests, TakeoverNotice, type TaskId } from "../../protocol/index.js";
import { supersedes } from "../../machines/director/run.js";
import { ask } from "../ask.js";
import type { BusSubscription } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { respond } from "../serve.js";
import type { Claim } from "./records.js";
import type { RunningTask } from "./task.js";

/**
 * How long a Director that took a task over waits for the previous owner's answer before it goes on: longer than one
 * attempt to store an event (runtime/nats/wire.ts), which the previous owner lets end before it answers. An events
 * stream that holds such an attempt up (electing a leader) holds the new owner's first event up as well.
 */
export const TAKEOVER_NOTICE_MS = 10_000;

/** Whether `claim` replaced another Director's claim on its task, which is then to be told. */
export function replacedAnother(claim: Claim, owner: string): boolean {
  return claim.previousOwner !== undefined && claim.previousClaimedAt !== undefined && claim.previousOwner !== owner;
}

/**
 * Tells the Director whose claim `claim` replaced that it no longer owns the task; resolves once it answered that it
 * stopped publishing, or at once when it is gone (no responder), or after {@link TAKEOVER_NOTICE_MS} (it finds the
 * claim lost at its next write then).
 */
export async function tellPreviousOwner(deps: ActorDeps, owner: string, claim: Claim): Promise<void> {
  const { previousOwner, previousClaimedAt } = claim;
  if (previousOwner === undefined || previousClaimedAt === undefined || previousOwner === owner) return;
  const notice = { type: "task.taken_over", taskId: claim.taskId, owner, previousOwner, previousClaimedAt } as const;
  try {
    const reply = await ask(deps, Requests.directorTakeover.at(previousOwner), notice, { timeoutMs: TAKEOVER_NOTICE_MS });
    if (reply.held) deps.log.info({ taskId: claim.taskId, previousOwner }, "the previous owner stopped publishing the task");
  } catch (err) {
    deps.log.debug({ taskId: claim.taskId, previousOwner, err: messageOf(err) }, "the previous owner did not answer the takeover");
  }
}

/**
 * Answers the takeover notices sent to this Director (`owner`): a task it runs under the claim a notice names is
 * stopped (its run publishes nothing more of it), and the answer goes once its event in flight, if any, is stored.
 */
export function serveTakeovers(deps: ActorDeps, owner: string, owned: ReadonlyMap<TaskId, RunningTask>): BusSubscription {
  return deps.bus.subscribe(deps.subjects.directorTakeover(owner), async (msg) => {
    const decoded = decode(TakeoverNotice, msg.data);
    if (!decoded.ok) return void respond(msg, Requests.directorTakeover, errorReply("INVALID_MESSAGE", decoded.error.message));
    const notice = decoded.value;
    const task = owned.get(notice.taskId);
    const held = task !== undefined && supersedes({ owner: notice.previousOwner, claimedAt: notice.previousClaimedAt }, task.claim);
    if (held) {
      deps.log.warn({ taskId: notice.taskId, newOwner: notice.owner }, "another Director took the task over and said so; stopping here");
      await task.supersede?.();
    }
    respond(msg, Requests.directorTakeover, { type: "task.released", taskId: notice.taskId, held });
  });
}
