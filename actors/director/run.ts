/**
 * The effects of the run protocol (machines/director/run.ts) for one intake delivery: claim, restore, checkpoint,
 * finish, ack and nak of that delivery's own task ({@link RunEffects}), reached by the run machine the Director
 * provides once ({@link runActors}). The task's machine (machines/director/task.ts) runs beside it; its end and its changes are sent to the run
 * actor as `task.done` and `task.changed`, the checkpoints' findings as `claim.lost` and `checkpoint.refused`.
 */
import { finish, publishLostResult } from "./results.js";
import type { Snapshot } from "xstate";
import {
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type RestoreOutput,
  type RunContext,
  type RunOutcome,
} from "../../machines/director/run.js";
import { runActors, type RunActor, type RunEffects } from "./run-actors.js";
import type { RunEnv } from "./run-env.js";

export { runActors, type RunActor };
import {
  CancelBroadcast,
  encode,
  Requests,
  FINAL_STATES,
  type EvaluateRequest,
  type TaskRecord,
  type TaskState,
} from "../../protocol/index.js";
import { retryDelayMs, type WorkItem } from "../bus.js";
import { messageOf } from "../deps.js";
import { inspectOption } from "../inspect-option.js";
import { askRetrying } from "../ask.js";
import { compilePrompt } from "./compile.js";
import type { PublishEvent } from "./message-fit.js";
import { inSpan, ROOT_CONTEXT, startSpan } from "../tracing.js";

export type { PublishEvent };
import { claimLostBy, claimTask, PENDING_CLAIM_MS, pendingClaim, readTaskRecord, type Claim } from "./records.js";
import { restorable } from "./snapshot.js";
import { checkpointer, failedContext, heartbeatMs, stateOf, unstorableMessage, type RunningTask, type TaskEffects } from "./task.js";
import { replacedAnother, tellPreviousOwner } from "./takeover.js";

/**
 * Whether `item` is surely its first delivery. A nats-server before 2.10.16 can count a redelivery as a first delivery
 * ({@link WorkItem.queuedAt}); a redelivery comes an ack wait after the delivery before it, so a delivery counted as
 * the first of an item queued an ack wait ago or longer is claimed by reading its record, like any redelivery: an
 * earlier owner's claim is taken over at once, rather than found at the first write, one ack wait later.
 */
export function surelyFirst(item: WorkItem, ackWaitMs: number, now: number): boolean {
  return item.deliveries === 1 && (item.queuedAt === undefined || now - item.queuedAt < ackWaitMs);
}

/** Claims a task on a redelivery (or for an item of an older release): reads its record first. */
async function claimStored(
  env: RunEnv,
  delivery: { item: WorkItem },
  queued: TaskRecord | undefined,
): Promise<ClaimOutput & { claim?: Claim }> {
  const { deps, pendingClaims } = env;
  // A second delivery while this process is still claiming the task (the server redelivered after a restart):
  // the newer delivery is the one to settle, and the task is claimed once.
  const claiming = pendingClaims.get(delivery.item.id);
  if (claiming) {
    claiming.item = delivery.item;
    return { kind: "joined" };
  }
  pendingClaims.set(delivery.item.id, delivery);
  let claimed: Awaited<ReturnType<typeof claimTask>>;
  try {
    claimed = await claimTask(env.store, delivery.item.id, env.owner, deps.now, { queued, intakeSeq: delivery.item.seq });
  } finally {
    pendingClaims.delete(delivery.item.id);
  }
  const taskId = delivery.item.id;
  if (claimed.kind === "claimed") return { kind: "claimed", pending: claimed.claim.pending === true, claim: claimed.claim };
  if (claimed.kind === "contended") return { kind: "contended" };
  if (claimed.kind === "missing") deps.log.warn({ taskId }, "queued task has no record; dropped");
  if (claimed.kind === "duplicate") deps.log.info({ taskId }, "the task was queued again after the duplicate window; dropped");
  if (claimed.kind === "final") await publishLostResult(env, claimed.record);
  return { kind: "done" };
}

/** The effects of a task's machine: its evaluation (compiling a task submitted in words first) and its events. */
function taskEffects(env: RunEnv, task: RunningTask, fresh: boolean): TaskEffects {
  const { deps, owner } = env;
  const { claim } = task;
  const record = claim.record;
  // Once another Director owns the task, nothing of it is published here.
  const emit = (type: string, state: TaskState, message?: string, data?: Record<string, unknown>) => {
    if (!task.lost) env.publishEvent(record.taskId, ++task.seq, type, state, message, data);
  };
  return {
    evaluate: async (input, signal) => {
      // The compiled template is in the record (stored before the evaluation is asked for); the machine's
      // input, restored from a snapshot taken before the compile, still holds the empty one.
      let xml = record.xml;
      if (xml === "" && record.prompt !== undefined) {
        const compiled = await compilePrompt(deps, env.store, claim, record.prompt, {
          timeoutMs: env.taskTimeoutMs,
          signal,
          announce: (type, message, data) => emit(type, "running", message, data),
        });
        if (!compiled.ok) return compiled.result;
        xml = compiled.xml;
      }
      const request = (attempt: number): EvaluateRequest => ({
        type: "evaluator.evaluate",
        taskId: record.taskId,
        // A new attempt (the Evaluator went silent) supersedes the old one, should it still run somewhere.
        owner: attempt === 1 ? owner : `${owner}~${attempt}`,
        // The first delivery's first request: nothing of this task ran before, so nothing is looked for or stopped.
        ...(attempt === 1 && fresh ? { fresh: true } : {}),
        xml,
        inputs: input.inputs,
        ...(record.budget ? { budget: record.budget } : {}),
        ...(record.stream === undefined ? {} : { stream: record.stream }),
        ...(record.replay ? { replay: record.replay } : {}),
      });
      const asked = { parent: task.span?.context ?? record.trace ?? ROOT_CONTEXT, attributes: { "dirigent.task_id": record.taskId } };
      const reply = await inSpan("director.evaluate", asked, () =>
        askRetrying(deps, Requests.evaluate, request, {
          timeoutMs: env.taskTimeoutMs,
          signal,
          // Ask again only while this Director still holds the task: a stale retry would supersede the new owner.
          beforeRetry: async () => {
            // A read that fails or may be stale (around a leader election) does not stop it: the heartbeat notices a
            // lost claim for sure.
            const now = await readTaskRecord(env.store, record.taskId).catch(() => undefined);
            if (claimLostBy(now, claim)) throw new Error(`task '${record.taskId}': claim lost; not asking again`);
          },
        }),
      );
      return reply.result;
    },
    announce: (a) => emit(a.event, a.state, a.message, a.data),
  };
}

/**
 * Runs one intake delivery through the run protocol; resolves when its run actor has ended. `queued` is the record
 * the item carries (absent for an item of an older release); `draining`: the process was draining when it came.
 */
export function runDelivery(env: RunEnv, item: WorkItem, queued: TaskRecord | undefined, draining: boolean): Promise<void> {
  const { deps, owned } = env;
  const { log } = deps;
  const delivery = { item };
  let task: RunningTask | undefined;
  let fresh = false;
  /** The intake's first delivery of this item, surely: nothing of its task ran before. */
  const firstOfItsTask = surelyFirst(item, env.ackWaitMs, deps.now().getTime());
  let checkpoints: ReturnType<typeof checkpointer> | undefined;
  /** The store of the task's last event sent, once its events are closed (another Director owns the task). */
  let closed: Promise<void> | undefined;
  const current = () => task?.item ?? delivery.item;
  const claimed = () => {
    if (task === undefined) throw new Error(`task '${item.id}': no claim`);
    return task;
  };
  const checkpointsOf = () => {
    if (checkpoints === undefined) throw new Error(`task '${item.id}': no checkpoints`);
    return checkpoints;
  };

  /** Takes `claim` as this delivery's: the task this process now runs, with its span and its checkpoints. */
  const take = (claim: Claim): void => {
    const at = delivery.item;
    fresh = at.deliveries === 1 && claim.previousOwner === undefined;
    log.info({ taskId: at.id, owner: env.owner, deliveries: at.deliveries, previousOwner: claim.previousOwner }, "task claimed");
    const seq = claim.record.seq ?? 1;
    const running: RunningTask = { claim, item: at, seq, checkpointed: seq, lost: false, actor: undefined };
    // One span per delivery run here, in the trace stored with the task: a Director taking it over continues it.
    running.span = startSpan("director.run", {
      parent: claim.record.trace ?? ROOT_CONTEXT,
      attributes: {
        "dirigent.task_id": at.id,
        "dirigent.owner": env.owner,
        "dirigent.deliveries": at.deliveries,
        ...(claim.previousOwner === undefined ? {} : { "dirigent.previous_owner": claim.previousOwner }),
      },
    });
    running.supersede = () => {
      run.send({ type: "claim.superseded" });
      return closed ?? Promise.resolve();
    };
    task = running;
    checkpoints = checkpointer(deps, env.store, running, {
      lost: () => {
        log.warn({ taskId: claim.taskId }, "another Director took the task over; stopping here");
        run.send({ type: "claim.lost" });
      },
      // The task's state cannot be stored (too large): retrying cannot help, and running on unstored would lose it
      // at the next takeover. It fails once, through the normal finish.
      refused: (err) => run.send({ type: "checkpoint.refused", message: unstorableMessage("checkpoint (its state and template)", err) }),
    });
  };
  /** Creates the task's actor: from its stored snapshot when taken over, else from its start. */
  const create = (): RestoreOutput => {
    const running = claimed();
    const { record, previousOwner } = running.claim;
    const refuse = (problem: string): RestoreOutput => {
      log.error({ taskId: record.taskId, problem }, "task snapshot cannot be restored; the task fails");
      return { kind: "refused", message: problem };
    };
    // A task taken over resumes from its machine's stored snapshot (actors/director/snapshot.ts).
    const restore = previousOwner === undefined ? ({ kind: "none" } as const) : restorable(record);
    if (restore.kind === "refused") return refuse(restore.message);
    if (restore.kind === "snapshot" && restore.migratedFrom !== undefined)
      log.info({ taskId: record.taskId, from: restore.migratedFrom }, "task snapshot migrated");
    const actor = env.taskActors.create(taskEffects(env, running, fresh), {
      ...inspectOption(deps, "director", record.taskId),
      input: { taskId: record.taskId, xml: record.xml, inputs: record.inputs },
      ...(restore.kind === "snapshot" ? { snapshot: restore.snapshot as Snapshot<unknown> } : {}),
    });
    // A snapshot xstate cannot restore leaves the actor in error before it starts: fail the task once, clearly.
    const restored = actor.getSnapshot();
    if (restored.status === "error") return refuse(`stored snapshot cannot be restored: ${messageOf(restored.error)}`);
    running.actor = actor;
    owned.set(record.taskId, running);
    // Each change of the task's state is checkpointed at once (its snapshot and seq), not only at the heartbeat;
    // the final state is not: the final record (finish) follows it at once.
    let lastState = "";
    actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status !== "active") return;
        const state = JSON.stringify(snapshot.value);
        if (state === lastState) return;
        lastState = state;
        run.send({ type: "task.changed" });
      },
      // A machine error ends the task (failed, in finish); without a listener here xstate would rethrow it globally.
      error: () => run.send({ type: "task.done" }),
      complete: () => run.send({ type: "task.done" }),
    });
    return { kind: "ready" };
  };

  // This delivery's effects, reached by the Director's run machine (provided once: {@link runActors}) through its system.
  const effects: RunEffects = {
    claim: async (): Promise<ClaimOutput> => {
      let claim: Claim;
      // On its first delivery nothing of the task ran before: it starts at once under a pending claim, stored by its
      // first write (actors/director/records.ts). Here only while draining: otherwise such a delivery comes to its
      // run claimed already (see `firstDelivery` below). A redelivery reads the record first.
      if (queued !== undefined && firstOfItsTask) claim = pendingClaim(queued, env.owner, deps.now, item.seq);
      else {
        const found = await claimStored(env, delivery, queued);
        if (found.claim === undefined) return found;
        claim = found.claim;
      }
      take(claim);
      return { kind: "claimed", pending: claim.pending === true, takenOver: replacedAnother(claim, env.owner) };
    },
    tellPreviousOwner: () => tellPreviousOwner(deps, env.owner, claimed().claim),
    restore: async (): Promise<RestoreOutput> => create(),
    finish: async (input: FinishInput): Promise<FinishOutput> => {
      const running = claimed();
      const { record } = running.claim;
      if (input.failure !== undefined) return finish(env, running, failedContext(record, input.failure), "failed");
      await checkpointsOf().idle();
      if (running.lost || running.actor === undefined) return "lost";
      const ended = running.actor.getSnapshot();
      if (ended.status === "error")
        return finish(env, running, failedContext(record, `the task machine failed: ${messageOf(ended.error)}`), "failed");
      return finish(env, running, ended.context, stateOf(ended));
    },
    // Draining: the next Director resumes the task from its record (stored now, should its claim be pending) at once
    // instead of after the ack wait.
    flush: async () => checkpointsOf().flush(),
    readOwner: async (): Promise<{ final: boolean }> => {
      const now = await readTaskRecord(env.store, item.id);
      return { final: now !== undefined && FINAL_STATES.has(now.record.state) };
    },
    startTask: () => {
      const running = claimed();
      const { record, previousOwner } = running.claim;
      running.actor?.start();
      if (previousOwner !== undefined) {
        env.publishEvent(record.taskId, ++running.seq, "task.resumed", "running", `resumed from ${previousOwner}`, { previousOwner });
      } else if (!fresh) {
        // Delivered before, to a Director that stopped before it stored its claim: the task starts over (the Handler's
        // records replay what that run finished).
        env.publishEvent(record.taskId, ++running.seq, "task.resumed", "running", "resumed: delivered again, from its start", {
          deliveries: running.item.deliveries,
        });
      }
      running.actor?.send(record.cancelRequested ? { type: "task.cancel" } : { type: "task.start" });
    },
    stopTask: () => task?.actor?.stop(),
    closeEvents: () => {
      if (task === undefined || closed !== undefined) return;
      task.lost = true;
      closed = env.publishEvent.cut(task.claim.taskId);
    },
    beat: () => checkpointsOf().beat(),
    checkpoint: () => checkpointsOf().checkpoint(),
    dueClaim: () => checkpointsOf().due(),
    // The outcome is stored before this: a lost ack only costs a redelivery that is acked and ignored, so the
    // task's handler does not wait for the server's confirmation.
    ack: () =>
      void current()
        .ack()
        .catch((err: unknown) => log.warn({ taskId: item.id, err: messageOf(err) }, "ack failed; the redelivery will be ignored")),
    nak: () => current().nak(),
    nakLater: () => current().nak(retryDelayMs(current().deliveries)),
    // What the Evaluator and the Handler still run of the task stops.
    cancelOthers: () =>
      deps.bus.publish(
        deps.subjects.cancelBroadcast,
        encode(CancelBroadcast, { type: "task.cancel", taskId: claimed().claim.record.taskId }),
      ),
    report: (context: RunContext, outcome: RunOutcome) => {
      if (outcome === "lost") log.info({ taskId: item.id }, "claim taken over; nothing published");
      else if (outcome === "handedBack" && context.error !== undefined)
        log.error({ taskId: item.id, err: context.error }, "task handling failed");
      else if (outcome === "handedBack") log.info({ taskId: item.id }, "task handed back: draining");
    },
  };
  // A first delivery reads nothing before it runs: its pending claim is taken and its task created here, before its
  // run starts (an actor created inside one of the run's actions would have XState warn), and the run goes on at once.
  const firstDelivery = queued !== undefined && firstOfItsTask && !draining;
  const run = env.runActors.create(effects, {
    input: {
      taskId: item.id,
      heartbeatMs: heartbeatMs(env.ackWaitMs),
      pendingClaimMs: PENDING_CLAIM_MS,
      draining,
      firstDelivery,
    },
  });
  return new Promise<void>((resolve) => {
    const ended = () => {
      const state = task?.actor?.getSnapshot();
      if (state) task?.span?.span.setAttribute("dirigent.task.state", state.status === "error" ? "failed" : stateOf(state));
      task?.span?.end();
      env.runs.delete(run);
      if (task !== undefined && owned.get(task.claim.taskId) === task) owned.delete(task.claim.taskId);
      resolve();
    };
    run.subscribe({
      complete: ended,
      // An action that threw (starting the task): the delivery comes again after a pause.
      error: (err) => {
        log.error({ taskId: item.id, err: messageOf(err) }, "task handling failed");
        task?.span?.fail(err);
        task?.actor?.stop();
        current().nak(retryDelayMs(current().deliveries));
        ended();
      },
    });
    env.runs.add(run);
    if (firstDelivery && queued !== undefined) {
      try {
        take(pendingClaim(queued, env.owner, deps.now, item.seq));
        const created = create();
        if (created.kind === "refused") throw new Error(created.message);
      } catch (err) {
        // Not expected (nothing is restored): the delivery comes again after a pause, as when starting the task fails.
        log.error({ taskId: item.id, err: messageOf(err) }, "task handling failed");
        task?.span?.fail(err);
        current().nak(retryDelayMs(current().deliveries));
        ended();
        return;
      }
    }
    run.start();
  });
}
