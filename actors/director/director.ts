/**
 * The Director role: accepts submissions, owns one {@link taskMachine} actor per task, publishes lifecycle
 * events and the result, and answers `get` and `cancel` for any task.
 *
 * Subjects: `<root>.tasks.submit`, `<root>.tasks.*.get`, `<root>.tasks.*.cancel` (queue group `director`),
 * the intake work queue, `<root>.progress.*` and `<root>.control.cancel` (every Director; each acts only on the
 * tasks it owns).
 */
import type { Snapshot } from "xstate";
import type { TaskContext } from "../../machines/director/task.js";
import {
  CancelBroadcast,
  decode,
  encode,
  encodeJson,
  errorReply,
  FINAL_STATES,
  Progress,
  Requests,
  TaskEvent,
  TaskOutcome,
  type EvaluateRequest,
  type TaskId,
  type TaskRecord,
  type TaskState,
} from "../../protocol/index.js";
import { isPermanentStoreError, retryDelayMs, type BusMessage, type TaskStore, type WorkItem, type WorkQueue } from "../bus.js";
import { messageOf, type ActorDeps, type RoleHandle } from "../deps.js";
import { inspectOption } from "../inspect-option.js";
import { compilePrompt } from "./compile.js";
import { claimTask, holds, pendingClaim, readRecord, writeClaimed, type Claim } from "./records.js";
import { restorable } from "./snapshot.js";
import { submissionGates } from "./gates.js";
import { createTaskActor, failedContext, outcomeOf, startHeartbeat, stateOf, unstorableMessage, type RunningTask, type TaskEffects } from "./task.js";
import { handleSubmit, queuedRecord } from "./intake.js";
import { taskRequests } from "./requests.js";
import { fitEvent, fitOutcome } from "./message-fit.js";
import { askRetrying } from "../ask.js";
import type { SizeLimits } from "../size-limits.js";

/** Director configuration. */
export interface DirectorConfig {
  /** Tasks run at once by this process. */
  concurrency: number;
  /** Longest a task may run before it fails with a timeout. */
  taskTimeoutMs: number;
  /**
   * The last message stored on `subject` (the events stream): lets a redelivery publish a lost result, and `get` tell
   * the state of a task running under a pending claim in another Director.
   */
  lastPublished?: (subject: string) => Promise<Uint8Array | undefined>;
  /** Size limits of submissions; {@link DEFAULT_SIZE_LIMITS} when absent. */
  sizeLimits?: SizeLimits;
}

/** Starts the Director role. */
export function startDirector(deps: ActorDeps, store: TaskStore, queue: WorkQueue, config: DirectorConfig): RoleHandle {
  const { bus, subjects, log } = deps;
  const owned = new Map<string, RunningTask>();
  const owner = `director-${deps.newId()}`;
  /** Deliveries wait for their submission's answer from this process (actors/director/gates.ts). */
  const gates = submissionGates();
  /** Tasks whose claim is being written, with their latest delivery. */
  const pendingClaims = new Map<string, { item: WorkItem }>();
  /** Set by `stop`: take no new task, hand back the ones running. */
  let draining = false;

  const publishEvent = (taskId: string, seq: number, type: string, state: TaskState, message?: string, data?: Record<string, unknown>) => {
    const event: TaskEvent = {
      taskId: taskId as TaskId,
      seq,
      type,
      state,
      at: deps.now().toISOString(),
      ...(message === undefined ? {} : { message }),
      ...(data === undefined ? {} : { data }),
    };
    bus.publish(subjects.taskEvents(taskId), fitEvent(event, bus.maxMessageBytes));
  };

  /**
   * Stores the final state under the claim, then publishes the last event and the result: stored before announced. An
   * outcome the store refuses for good (too large) is replaced by a failure saying so, stored and published once.
   */
  const finish = async (task: RunningTask, context: TaskContext, state: TaskState): Promise<boolean> => {
    let outcome = outcomeOf(task.claim.record.taskId, context, state);
    const seq = task.seq + 1;
    const write = () =>
      writeClaimed(store, task.claim, (current) => ({
        ...current,
        state,
        result: outcome,
        seq,
        updatedAt: deps.now().toISOString(),
      }));
    let written: Awaited<ReturnType<typeof write>>;
    try {
      written = await write();
    } catch (err) {
      if (!isPermanentStoreError(err) || (state === "failed" && outcome.content === "")) throw err;
      log.error({ taskId: task.claim.taskId, bytes: err.bytes, err: err.message }, "task outcome refused by the store; the task fails");
      context = failedContext(task.claim.record, unstorableMessage("outcome", err));
      state = "failed";
      outcome = outcomeOf(task.claim.record.taskId, context, state);
      written = await write();
    }
    if (written === "lost") return false;
    publishEvent(task.claim.taskId, seq, `task.${state}`, state, state === "failed" ? context.result?.error?.message : undefined);
    bus.publish(subjects.taskResult(task.claim.taskId), encode(TaskOutcome, fitOutcome(outcome, bus.maxMessageBytes)));
    return true;
  };

  /**
   * A redelivered task is final: its owner stored the outcome, and usually published it and lost only the ack. When
   * it died between storing and publishing, the result is not in the events stream: publish it now, once.
   */
  const publishLostResult = async (record: TaskRecord) => {
    if (config.lastPublished === undefined || record.result === undefined) return;
    if ((await config.lastPublished(subjects.taskResult(record.taskId))) !== undefined) return;
    log.warn({ taskId: record.taskId }, "final task's result was never published; publishing it");
    publishEvent(record.taskId, record.seq ?? 1, `task.${record.state}`, record.state, record.state === "failed" ? record.result.error?.message : undefined);
    bus.publish(subjects.taskResult(record.taskId), encode(TaskOutcome, fitOutcome(record.result, bus.maxMessageBytes)));
  };

  /** Fails a task taken over whose stored snapshot cannot run on: once, through the normal finish. */
  const refuse = async (task: RunningTask, problem: string) => {
    const { record } = task.claim;
    log.error({ taskId: record.taskId, problem }, "task snapshot cannot be restored; the task fails");
    if (await finish(task, failedContext(record, `cannot resume the task: ${problem}`), "failed")) settle(task.item, record.taskId);
  };

  // The outcome is stored before this: a lost ack only costs a redelivery that is acked and ignored, so the
  // task's handler does not wait for the server's confirmation.
  const settle = (item: WorkItem, taskId: string) =>
    void item.ack().catch((err: unknown) => log.warn({ taskId, err: messageOf(err) }, "ack failed; the redelivery will be ignored"));

  /** Claims a task on a redelivery (or for an item of an older release): reads its record first. */
  const claimStored = async (item: WorkItem, queued: TaskRecord | undefined): Promise<{ claim: Claim; item: WorkItem } | undefined> => {
    // A second delivery while this process is still claiming the task (the server redelivered after a restart):
    // the newer delivery is the one to settle, and the task is claimed once.
    const claiming = pendingClaims.get(item.id);
    if (claiming) {
      claiming.item = item;
      return undefined;
    }
    const slot = { item };
    pendingClaims.set(item.id, slot);
    let claimed: Awaited<ReturnType<typeof claimTask>>;
    try {
      claimed = await claimTask(store, item.id, owner, deps.now, { queued, intakeSeq: item.seq });
    } finally {
      pendingClaims.delete(item.id);
    }
    item = slot.item;
    if (claimed.kind === "claimed") return { claim: claimed.claim, item };
    if (claimed.kind === "missing") log.warn({ taskId: item.id }, "queued task has no record; dropped");
    if (claimed.kind === "duplicate") log.info({ taskId: item.id }, "the task was queued again after the duplicate window; dropped");
    if (claimed.kind === "contended") item.nak(retryDelayMs(item.deliveries));
    else {
      if (claimed.kind === "final") await publishLostResult(claimed.record);
      await item.ack();
    }
    return undefined;
  };

  const run = async (item: WorkItem) => {
    const local = owned.get(item.id);
    if (local) {
      // Redelivered to the process that runs it (a late heartbeat): the new delivery is the one to settle. Another
      // item of the same id (the task queued again after the duplicate window) is dropped.
      if (local.item.seq !== item.seq) await item.ack();
      else local.item = item;
      return;
    }
    if (draining) return item.nak();
    // The submission turned out a duplicate, and this item, queued for it, was removed: not to be run.
    if (await gates.dropped(item)) return void (await item.ack().catch(() => undefined));
    const queued = queuedRecord(item.data);
    if (!queued.ok) {
      log.warn({ taskId: item.id, err: queued.message }, "unreadable intake item; dropped");
      await item.ack();
      return;
    }
    // On its first delivery nothing of the task ran before: it starts at once under a pending claim, stored by its
    // first write (actors/director/records.ts). A redelivery reads the record first.
    let claim: Claim;
    if (queued.record !== undefined && item.deliveries === 1) claim = pendingClaim(queued.record, owner, deps.now, item.seq);
    else {
      const claimed = await claimStored(item, queued.record);
      if (claimed === undefined) return;
      ({ claim, item } = claimed);
    }
    const fresh = item.deliveries === 1 && claim.previousOwner === undefined;
    const record = claim.record;
    log.info({ taskId: item.id, owner, deliveries: item.deliveries, previousOwner: claim.previousOwner }, "task claimed");
    const task: RunningTask = { claim, item, seq: record.seq ?? 1, checkpointed: record.seq ?? 1, lost: false, actor: undefined };
    const restore = claim.previousOwner === undefined ? ({ kind: "none" } as const) : restorable(record);
    if (restore.kind === "refused") return refuse(task, restore.message);
    if (restore.kind === "snapshot" && restore.migratedFrom !== undefined) log.info({ taskId: record.taskId, from: restore.migratedFrom }, "task snapshot migrated");
    const effects: TaskEffects = {
      evaluate: async (input, signal) => {
        // The compiled template is in the record (stored before the evaluation is asked for); the machine's
        // input, restored from a snapshot taken before the compile, still holds the empty one.
        let xml = record.xml;
        if (xml === "" && record.prompt !== undefined) {
          const compiled = await compilePrompt(deps, store, claim, record.prompt, {
            timeoutMs: config.taskTimeoutMs,
            signal,
            announce: (type, message, data) => publishEvent(record.taskId, ++task.seq, type, "running", message, data),
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
        });
        const reply = await askRetrying(deps, Requests.evaluate, request, {
          timeoutMs: config.taskTimeoutMs,
          signal,
          // Ask again only while this Director still holds the task: a stale retry would supersede the new owner.
          // A record that cannot be read now (NATS restarting) does not stop it: the heartbeat notices a lost claim.
          beforeRetry: async () => {
            const now = await readRecord(store, record.taskId).catch(() => "unknown" as const);
            // A pending claim has no record yet; any record found is someone else's.
            const lost = now === undefined ? claim.pending !== true : now !== "unknown" && !holds(now.record, claim);
            if (lost) throw new Error(`task '${record.taskId}': claim lost; not asking again`);
          },
        });
        return reply.result;
      },
      announce: (a) => publishEvent(record.taskId, ++task.seq, a.event, a.state, a.message, a.data),
    };
    // A task taken over resumes from its machine's stored snapshot (actors/director/snapshot.ts).
    const actor = createTaskActor(effects, {
      ...inspectOption(deps, "director", record.taskId),
      input: { taskId: record.taskId, xml: record.xml, inputs: record.inputs },
      ...(restore.kind === "snapshot" ? { snapshot: restore.snapshot as Snapshot<unknown> } : {}),
    });
    // A snapshot xstate cannot restore leaves the actor in error before it starts: fail the task once, clearly.
    const restored = actor.getSnapshot();
    if (restored.status === "error") return refuse(task, `stored snapshot cannot be restored: ${messageOf(restored.error)}`);
    task.actor = actor;
    owned.set(record.taskId, task);
    const done = new Promise<void>((resolve) => actor.subscribe({ complete: resolve, error: () => resolve() }));
    let handedBack = false;
    const released = new Promise<void>((resolve) => (task.release = () => ((handedBack = true), resolve())));
    if (draining) task.release?.();
    const heartbeat = startHeartbeat(deps, store, queue.ackWaitMs, task, () => {
      task.lost = true;
      log.warn({ taskId: record.taskId }, "another Director took the task over; stopping here");
      actor.stop();
    });
    // Each change of the task's state is checkpointed at once (its snapshot and seq), not only at the heartbeat; the
    // final state is not: the final record (finish, below) follows it at once.
    let lastState = "";
    actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status !== "active") return;
        const state = JSON.stringify(snapshot.value);
        if (state === lastState) return;
        lastState = state;
        heartbeat.checkpoint();
      },
      // A machine error ends the task (failed, below); without a listener here xstate would rethrow it globally.
      error: () => undefined,
    });
    try {
      actor.start();
      if (claim.previousOwner !== undefined) {
        publishEvent(record.taskId, ++task.seq, "task.resumed", "running", `resumed from ${claim.previousOwner}`, { previousOwner: claim.previousOwner });
      } else if (!fresh) {
        // Delivered before, to a Director that stopped before it stored its claim: the task starts over (the Handler's
        // records replay what that run finished).
        publishEvent(record.taskId, ++task.seq, "task.resumed", "running", "resumed: delivered again, from its start", { deliveries: item.deliveries });
      }
      actor.send(record.cancelRequested ? { type: "task.cancel" } : { type: "task.start" });
      const refused = await Promise.race([done, heartbeat.lost, released, heartbeat.refused]);
      heartbeat.stop();
      if (refused !== undefined && !task.lost) {
        // The task's state cannot be stored (too large): retrying cannot help, and running on unstored would lose it at
        // the next takeover. It fails once, through the normal finish.
        actor.stop();
        if (await finish(task, failedContext(record, unstorableMessage("checkpoint (its state and template)", refused)), "failed")) settle(task.item, record.taskId);
        // What the Evaluator and the Handler still run of it stops.
        bus.publish(subjects.cancelBroadcast, encode(CancelBroadcast, { type: "task.cancel", taskId: record.taskId }));
        return;
      }
      if (handedBack) {
        // Draining: the next Director resumes the task from its record (stored now, should its claim be pending) at
        // once instead of after the ack wait.
        await heartbeat.flush();
        actor.stop();
        task.item.nak();
        log.info({ taskId: record.taskId }, "task handed back: draining");
        return;
      }
      await heartbeat.idle();
      const ended = actor.getSnapshot();
      const context = ended.status === "error" ? failedContext(record, `the task machine failed: ${messageOf(ended.error)}`) : ended.context;
      if (task.lost || !(await finish(task, context, ended.status === "error" ? "failed" : stateOf(ended)))) {
        log.info({ taskId: record.taskId }, "claim taken over; nothing published");
        // Once the new owner has finished, this delivery's ack is as safe as its own.
        const now = await readRecord(store, record.taskId);
        if (now && FINAL_STATES.has(now.record.state)) settle(task.item, record.taskId);
        return;
      }
      settle(task.item, record.taskId);
    } catch (err) {
      log.error({ taskId: record.taskId, err: messageOf(err) }, "task handling failed");
      actor.stop();
      task.item.nak(retryDelayMs(task.item.deliveries));
    } finally {
      heartbeat.stop();
      owned.delete(record.taskId);
    }
  };

  const { get, cancel } = taskRequests(deps, store, queue, {
    liveState: (taskId) => {
      const actor = owned.get(taskId)?.actor;
      return actor === undefined ? undefined : stateOf(actor.getSnapshot());
    },
    publishEvent,
    ...(config.lastPublished ? { lastPublished: config.lastPublished } : {}),
  });

  const guarded = (name: string, fn: (msg: BusMessage) => Promise<void>) => async (msg: BusMessage) => {
    try {
      await fn(msg);
    } catch (err) {
      log.error({ subject: msg.subject, err: messageOf(err) }, `${name} failed`);
      msg.respond(encodeJson(errorReply("INTERNAL", messageOf(err))));
    }
  };

  const stopLocalProgress = deps.local?.onProgress((progress) => {
    const actor = owned.get(progress.taskId)?.actor;
    if (actor === undefined) return false;
    actor.send(progress);
    return true;
  });
  const queueGroup = { queue: subjects.queue("director") };
  const subscriptions = [
    bus.subscribe(
      subjects.submit,
      async (msg) => {
        let announced: ((discarded: number | undefined) => void) | undefined;
        const queuing = (taskId: string) => void (announced = gates.submitting(taskId));
        let accepted: Awaited<ReturnType<typeof handleSubmit>>;
        try {
          accepted = await handleSubmit(deps, store, queue, msg, queuing, config.sizeLimits);
          if (accepted?.reply.status === "accepted") publishEvent(accepted.reply.taskId, 1, "task.queued", "queued", "queued");
        } finally {
          announced?.(accepted?.discarded);
        }
      },
      queueGroup,
    ),
    bus.subscribe(subjects.anyTaskGet, guarded("get", get), queueGroup),
    bus.subscribe(subjects.anyTaskCancel, guarded("cancel", cancel), queueGroup),
    bus.subscribe(subjects.anyProgress, (msg) => {
      const decoded = decode(Progress, msg.data);
      if (decoded.ok) owned.get(decoded.value.taskId)?.actor?.send(decoded.value);
    }),
    // Reports of roles in this process come as calls (actors/local.ts).
    { unsubscribe: async () => stopLocalProgress?.() },
    bus.subscribe(subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (decoded.ok) owned.get(decoded.value.taskId)?.actor?.send({ type: "task.cancel" });
    }),
  ];
  const intake = queue.consume(run, { concurrency: config.concurrency });

  return {
    role: "director",
    /** Drains: stops pulling intake, hands the running tasks back (nak, so another Director resumes them at once). */
    async stop() {
      draining = true;
      const consuming = intake.unsubscribe();
      for (const task of owned.values()) task.release?.();
      await Promise.all([consuming, ...subscriptions.map((s) => s.unsubscribe())]);
      for (const task of owned.values()) task.actor?.stop();
    },
  };
}
