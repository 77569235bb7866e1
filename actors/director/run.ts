/**
 * The effects of the run protocol (machines/director/run.ts) for one intake delivery: claim, restore, checkpoint,
 * finish, ack and nak of that delivery's own task ({@link RunEffects}), reached by the run machine the Director
 * provides once ({@link runActors}). The task's machine (machines/director/task.ts) is the run actor's invoked child,
 * acting through ./task-effects.ts; its changes are sent to the run actor as `task.changed`, a takeover notice
 * (./takeover.ts) as `claim.superseded`.
 */
import { createActor, type Snapshot } from "xstate";
import {
  resumedSeq,
  resumeNotice,
  surelyFirst,
  type CheckpointOutput,
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type RestoreOutput,
  type RunContext,
  type RunEvent,
  type RunOutcome,
} from "../../machines/director/run.js";
import { CancelBroadcast, encode, FINAL_STATES, type TaskId, type TaskRecord } from "../../protocol/index.js";
import { isTaskItem, retryDelayMs, type TaskItem, type WorkItem } from "../bus.js";
import { messageOf } from "../deps.js";
import { inspectOption } from "../inspect-option.js";
import { queuedRecord } from "./intake.js";
import { ROOT_CONTEXT, startSpan } from "../tracing.js";
import type { PublishEvent } from "./event-publisher.js";
import { claimTask, pendingClaim, readTaskRecord, type Claim } from "./records.js";
import { finish, lastStoredEvent, publishLostResult } from "./results.js";
import { runActors, type RunActor, type RunEffects } from "./run-actors.js";
import type { RunEnv } from "./run-env.js";
import { restorable } from "./snapshot.js";
import { replacedAnother, tellPreviousOwner } from "./takeover.js";
import { taskEffects } from "./task-effects.js";
import { checkpointer, failedContext, stateOf, type RunningTask, type TaskActor, type TaskLaunch } from "./task.js";

export { runActors, type RunActor };
export type { PublishEvent };

/** Claims a task on a redelivery (or for an item of an older release): reads its record first. */
async function claimStored(
  env: RunEnv,
  delivery: { item: TaskItem },
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
  if (claimed.kind === "claimed")
    return { kind: "claimed", pending: claimed.claim.pending === true, seq: claimed.claim.record.seq ?? 1, claim: claimed.claim };
  if (claimed.kind === "contended") return { kind: "contended" };
  if (claimed.kind === "missing") deps.log.warn({ taskId }, "queued task has no record; dropped");
  if (claimed.kind === "duplicate") deps.log.info({ taskId }, "the task was queued again after the duplicate window; dropped");
  if (claimed.kind === "final") await publishLostResult(env, claimed.record);
  return { kind: "done" };
}

/**
 * Takes one intake delivery: runs it through the run protocol ({@link runDelivery}), unless this process runs its task
 * already (a redelivery: the newer delivery is the one to settle; another item of the same id, queued again after the
 * duplicate window, is dropped), the process is `draining` (handed back), its submission turned out a duplicate
 * (`dropped`: the item was removed), or it is unreadable or queued under an illegal task id (dropped).
 */
export async function deliver(
  env: RunEnv,
  item: WorkItem,
  draining: () => boolean,
  dropped: (item: TaskItem) => Promise<boolean>,
): Promise<void> {
  if (!isTaskItem(item)) {
    env.deps.log.warn({ taskId: item.id }, "intake item under an illegal task id; dropped");
    await item.ack();
    return;
  }
  const local = env.owned.get(item.id);
  if (local) {
    if (local.item.seq !== item.seq) await item.ack();
    else local.item = item;
    return;
  }
  if (draining()) return item.nak();
  if (await dropped(item)) return void (await item.ack().catch(() => undefined));
  const queued = queuedRecord(item.data);
  if (!queued.ok) {
    env.deps.log.warn({ taskId: item.id, err: queued.message }, "unreadable intake item; dropped");
    await item.ack();
    return;
  }
  // Returned, not awaited: a frame suspended here would be held for as long as the task runs.
  return runDelivery(env, item, queued.record, draining());
}

/** One intake delivery as its run carries it out: the item, and once claimed, the task it runs. */
interface Delivery {
  /** The item delivered; a redelivery joining a claim under way replaces it ({@link claimStored}). */
  item: TaskItem;
  /** The record the item carries (absent for an item of an older release). */
  readonly queued: TaskRecord | undefined;
  /** The intake's first delivery of this item, surely: nothing of its task ran before. */
  readonly first: boolean;
  /** The task this process runs under its claim, once claimed. */
  task?: RunningTask;
  /** Where the task's actor starts, once the claim or the restore found it. */
  launch?: TaskLaunch;
  checkpoints?: Checkpoints;
  /** The store of the task's last event sent, once its events are closed (another Director owns the task). */
  closed?: Promise<void>;
}

type Checkpoints = ReturnType<typeof checkpointer>;

/**
 * Runs one intake delivery through the run protocol; resolves when its run actor has ended. `queued` is the record
 * the item carries (absent for an item of an older release); `draining`: the process was draining when it came.
 */
export function runDelivery(env: RunEnv, item: TaskItem, queued: TaskRecord | undefined, draining: boolean): Promise<void> {
  const { deps, owned } = env;
  const first = queued !== undefined && surelyFirst(item, env.ackWaitMs, deps.now().getTime());
  const delivery: Delivery = { item, queued, first };
  const { actor: run, release } = env.runActors.create(
    runEffects(
      env,
      delivery,
      (event) => run.send(event),
      () => env.claimsDue.add(run),
    ),
    // The run is the root of its delivery's actor system, the task its child: inspected as one.
    { ...inspectOption(deps, "director", item.id), input: { taskId: item.id, draining, first } },
  );
  const current = () => delivery.task?.item ?? delivery.item;
  return new Promise<void>((resolve) => {
    const ended = () => {
      const { task } = delivery;
      const state = task?.actor?.getSnapshot();
      if (state) task?.span?.span.setAttribute("dirigent.task.state", state.status === "error" ? "failed" : stateOf(state));
      task?.span?.end();
      task?.release?.();
      release();
      env.runs.delete(run);
      env.claimsDue.delete(run);
      if (task !== undefined && owned.get(task.claim.taskId) === task) owned.delete(task.claim.taskId);
      resolve();
    };
    run.subscribe({
      complete: ended,
      // The run machine broke (its effects' throws come as `effect.failed`): the delivery comes again after a pause.
      // XState stops no child of an actor in error: the task, should it still run, publishes nothing more.
      error: (err) => {
        deps.log.error({ taskId: item.id, err: messageOf(err) }, "task handling failed");
        delivery.task?.span?.fail(err);
        if (delivery.task) delivery.task.lost = true;
        current().nak(retryDelayMs(current().deliveries));
        ended();
      },
    });
    env.runs.set(run, () => delivery.task?.seq ?? 0);
    run.start();
  });
}

/** The effects of one delivery's run, reached by the Director's run machine (provided once: {@link runActors}). */
function runEffects(env: RunEnv, delivery: Delivery, send: (event: RunEvent) => void, started: () => void): RunEffects {
  return new DeliveryEffects(env, delivery, send, started);
}

/**
 * {@link runEffects} as a class: its methods are shared by every delivery, where an object of closures made sixteen
 * functions per task (about 0.9 KB held for as long as the task runs).
 */
class DeliveryEffects implements RunEffects {
  constructor(
    private readonly env: RunEnv,
    private readonly delivery: Delivery,
    private readonly send: (event: RunEvent) => void,
    /** The task started under its claim (its pending claim's delay counts from here). */
    private readonly started: () => void,
  ) {}

  private get taskId(): TaskId {
    return this.delivery.item.id;
  }

  private current(): TaskItem {
    return this.delivery.task?.item ?? this.delivery.item;
  }

  private claimed(): RunningTask {
    if (this.delivery.task === undefined) throw new Error(`task '${this.taskId}': no claim`);
    return this.delivery.task;
  }

  private checkpoints(): Checkpoints {
    if (this.delivery.checkpoints === undefined) throw new Error(`task '${this.taskId}': no checkpoints`);
    return this.delivery.checkpoints;
  }

  // A redelivery (or a delivery that may be one) reads the task's record first.
  async claim(): Promise<ClaimOutput> {
    const { env, delivery } = this;
    const found = await claimStored(env, delivery, delivery.queued);
    if (found.claim === undefined) return found;
    const { claim } = found;
    const { seq } = take(env, delivery, claim, this.send);
    return { kind: "claimed", pending: claim.pending === true, takenOver: replacedAnother(claim, env.owner), seq };
  }

  // On its first delivery nothing of the task ran before: it starts at once under a pending claim, stored by its
  // first write (actors/director/records.ts), with nothing read and no actor invoked before it. Answered once the
  // run's action has returned.
  startFresh(): void {
    queueMicrotask(() => {
      const { env, delivery } = this;
      try {
        if (delivery.queued === undefined) throw new Error(`task '${this.taskId}': a first delivery without its record`);
        const running = take(env, delivery, pendingClaim(delivery.queued, env.owner, env.deps.now, delivery.item.seq), this.send);
        this.send({ type: "task.created", output: prepareTask(env, delivery, running), seq: running.seq });
      } catch (error) {
        this.send({ type: "effect.failed", error });
      }
    });
  }

  tellPreviousOwner(): Promise<void> {
    return tellPreviousOwner(this.env.deps, this.env.owner, this.claimed().claim);
  }

  // A task resumed from its record: its events go on from the last one stored (resumedSeq).
  async restore(): Promise<RestoreOutput> {
    const { env } = this;
    const running = this.claimed();
    running.seq = resumedSeq(running.seq, (await lastStoredEvent(env.lastPublished, env.deps.subjects, this.taskId))?.seq);
    const prepared = prepareTask(env, this.delivery, running);
    return prepared.kind === "ready" ? { kind: "ready", seq: running.seq } : prepared;
  }

  checkpoint(): Promise<CheckpointOutput> {
    return this.checkpoints().checkpoint();
  }

  async finish(input: FinishInput): Promise<FinishOutput> {
    const { env } = this;
    const running = this.claimed();
    const { record } = running.claim;
    if (input.failure !== undefined) return finish(env, running, failedContext(record, input.failure), "failed");
    await this.checkpoints().idle();
    if (running.lost || running.actor === undefined) return "lost";
    const ended = running.actor.getSnapshot();
    if (ended.status === "error")
      return finish(env, running, failedContext(record, `the task machine failed: ${messageOf(ended.error)}`), "failed");
    return finish(env, running, ended.context, stateOf(ended));
  }

  // Draining: the next Director resumes the task from its record (stored now, should its claim be pending) at once
  // instead of after the ack wait.
  async flush(): Promise<void> {
    return this.checkpoints().flush();
  }

  async readOwner(): Promise<{ final: boolean }> {
    const now = await readTaskRecord(this.env.store, this.taskId);
    return { final: now !== undefined && FINAL_STATES.has(now.record.state) };
  }

  // Kept first: should the launch be missing, the actor in error is what the finish reads the failure from.
  launch(actor: TaskActor): TaskLaunch {
    this.claimed().actor = actor;
    const { launch } = this.delivery;
    if (launch === undefined) throw new Error(`task '${this.taskId}': invoked before it was ready to start`);
    return launch;
  }

  launched(actor: TaskActor): void {
    const running = this.claimed();
    // Each change of the task's state is checkpointed at once (its snapshot and seq), not only at the heartbeat; its
    // end reaches the run as the end of its invoke, and the final record (finish) follows it.
    let lastState = "";
    actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status !== "active") return;
        const state = JSON.stringify(snapshot.value);
        if (state === lastState) return;
        lastState = state;
        this.send({ type: "task.changed", seq: running.seq });
      },
      // A machine error ends the task (failed, in finish); without a listener here xstate would rethrow it globally.
      error: () => undefined,
    });
    const { record, previousOwner } = running.claim;
    const resumed = resumeNotice(previousOwner, running.fresh, running.item.deliveries);
    if (resumed) this.env.publishEvent(record.taskId, ++running.seq, "task.resumed", "running", resumed.message, resumed.data);
    // Told once its start has returned: XState announces an actor (its first snapshot) only then, and the inspector
    // shows an event only to an actor it knows.
    queueMicrotask(() => actor.send(record.cancelRequested ? { type: "task.cancel" } : { type: "task.start" }));
    // The pending claim's delay counts from here.
    this.started();
  }

  closeEvents(): void {
    const { delivery } = this;
    if (delivery.task === undefined || delivery.closed !== undefined) return;
    delivery.task.lost = true;
    delivery.closed = this.env.publishEvent.cut(this.taskId);
  }

  beat(): void {
    this.claimed().item.working();
  }

  // The outcome is stored before this: a lost ack only costs a redelivery that is acked and ignored, so the
  // task's handler does not wait for the server's confirmation.
  ack(): void {
    const { taskId } = this;
    void this.current()
      .ack()
      .catch((err: unknown) => this.env.deps.log.warn({ taskId, err: messageOf(err) }, "ack failed; the redelivery will be ignored"));
  }

  nak(): void {
    this.current().nak();
  }

  nakLater(): void {
    this.current().nak(retryDelayMs(this.current().deliveries));
  }

  // What the Evaluator and the Handler still run of the task stops.
  cancelOthers(): void {
    const { deps } = this.env;
    deps.bus.publish(
      deps.subjects.cancelBroadcast,
      encode(CancelBroadcast, { type: "task.cancel", taskId: this.claimed().claim.record.taskId }),
    );
  }

  report(context: RunContext, outcome: RunOutcome): void {
    const { log } = this.env.deps;
    const { taskId } = this;
    if (outcome === "lost") log.info({ taskId }, "claim taken over; nothing published");
    else if (outcome === "handedBack" && context.error !== undefined) log.error({ taskId, err: context.error }, "task handling failed");
    else if (outcome === "handedBack") log.info({ taskId }, "task handed back: draining");
  }
}

/** Takes `claim` as the delivery's: the task this process now runs, with its span and its checkpoints. */
function take(env: RunEnv, delivery: Delivery, claim: Claim, send: (event: RunEvent) => void): RunningTask {
  const { deps } = env;
  const at = delivery.item;
  deps.log.info({ taskId: at.id, owner: env.owner, deliveries: at.deliveries, previousOwner: claim.previousOwner }, "task claimed");
  const seq = claim.record.seq ?? 1;
  const running: RunningTask = {
    claim,
    item: at,
    seq,
    lost: false,
    actor: undefined,
    // Surely the first delivery (one delivery, within an ack wait of its queuing): nats-server 2.9 can redeliver with a
    // count of 1, so the count alone could call a task resumed after a crash fresh.
    fresh: delivery.first && claim.previousOwner === undefined,
    // One span per delivery run here, in the trace stored with the task: a Director taking it over continues it.
    span: startSpan("director.run", {
      parent: claim.record.trace ?? ROOT_CONTEXT,
      attributes: {
        "dirigent.task_id": at.id,
        "dirigent.owner": env.owner,
        "dirigent.deliveries": at.deliveries,
        ...(claim.previousOwner === undefined ? {} : { "dirigent.previous_owner": claim.previousOwner }),
      },
    }),
    supersede: () => {
      send({ type: "claim.superseded" });
      return delivery.closed ?? Promise.resolve();
    },
  };
  delivery.task = running;
  delivery.checkpoints = checkpointer(deps, env.store, running);
  // This process runs the task from its claim on: a redelivery that comes meanwhile (while the previous owner is told,
  // say) joins this run ({@link deliver}) rather than claim the task a second time here.
  env.owned.set(running.claim.taskId, running);
  return running;
}

/**
 * Readies the task to start (its actor is the run's child, invoked once `running`): from its stored snapshot when taken
 * over, else from its input; its effects registered. A snapshot that cannot run on is refused, once, clearly.
 */
function prepareTask(env: RunEnv, delivery: Delivery, running: RunningTask): RestoreOutput {
  const { deps } = env;
  const { record, previousOwner } = running.claim;
  const refuse = (problem: string): RestoreOutput => {
    deps.log.error({ taskId: record.taskId, problem }, "task snapshot cannot be restored; the task fails");
    return { kind: "refused", message: problem };
  };
  // A task taken over resumes from its machine's stored snapshot (actors/director/snapshot.ts).
  const restore = previousOwner === undefined ? ({ kind: "none" } as const) : restorable(record);
  if (restore.kind === "refused") return refuse(restore.message);
  const input = { taskId: record.taskId, xml: record.xml, inputs: record.inputs };
  if (restore.kind === "snapshot") {
    if (restore.migratedFrom !== undefined) deps.log.info({ taskId: record.taskId, from: restore.migratedFrom }, "task snapshot migrated");
    const snapshot = restore.snapshot as Snapshot<unknown>;
    // A snapshot xstate cannot restore would leave the actor in error before it starts: tried here, on an actor of its
    // own never started, so that the task fails with the reason (only a task taken over pays for it).
    const tried = createActor(env.taskActors.machine, { input, snapshot }).getSnapshot();
    if (tried.status === "error") return refuse(`stored snapshot cannot be restored: ${messageOf(tried.error)}`);
    delivery.launch = { input, snapshot };
  } else delivery.launch = { input };
  running.release = env.taskActors.register(record.taskId, taskEffects(env, running));
  env.owned.set(record.taskId, running);
  return { kind: "ready" };
}
