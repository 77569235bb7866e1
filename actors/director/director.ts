/**
 * The Director role: accepts submissions, decodes each intake delivery and runs it through the run protocol
 * (machines/director/run.ts, its effects in ./run.ts), which owns one task machine actor per task; publishes lifecycle
 * events and the result, and answers `get` and `cancel` for any task.
 *
 * Subjects: `<root>.tasks.submit`, `<root>.tasks.*.get`, `<root>.tasks.*.cancel` (queue group `director`),
 * the intake work queue, `<root>.progress.*` and `<root>.control.cancel` (every Director; each acts only on the
 * tasks it owns).
 */
import { CancelBroadcast, decode, encodeJson, errorReply, Progress, Requests } from "../../protocol/index.js";
import type { BusMessage, TaskStore, WorkItem, WorkQueue } from "../bus.js";
import { messageOf, type ActorDeps, type RoleHandle } from "../deps.js";
import { submissionGates } from "./gates.js";
import { heartbeatMs, stateOf, taskActors, type RunningTask } from "./task.js";
import { handleSubmit, queuedRecord } from "./intake.js";
import { taskRequests } from "./requests.js";
import { eventPublisher } from "./message-fit.js";
import { runActors, runDelivery, type RunActor } from "./run.js";
import type { RunEnv } from "./run-env.js";
import type { SizeLimits } from "../size-limits.js";
import { createParseCache, type ParseCache } from "../../machines/language/parse-cache.js";
import { requeueUnqueued } from "./unqueued.js";
import { serveNodeReads } from "./node-reads.js";
import { serveRerun } from "../fork/rerun.js";
import { serveTakeovers } from "./takeover.js";

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
  /**
   * Stores a task's result or event in the events stream and waits for its acknowledgement, `id` naming it once (a
   * JetStream message id): one published while a replicated stream elects a leader is not lost. Absent: a plain publish.
   */
  publishStored?: (subject: string, data: Uint8Array, id: string, signal?: AbortSignal) => Promise<void>;
  /** `{{var}}` substitution of the deployment: under `strict` (the default) a placeholder nothing can fill is refused at submission. */
  substitution?: "strict" | "lenient";
  /** Size limits of submissions; {@link DEFAULT_SIZE_LIMITS} when absent. */
  sizeLimits?: SizeLimits;
  /** The system's parse cache (shared with its Evaluator); absent: the Director keeps its own. */
  parseCache?: ParseCache;
  /** The turns bucket holding the node records, and how long it keeps them: the Director answers `nodes` and `node`. */
  records?: { store: TaskStore; maxAgeMs: number } | undefined;
}

/** Starts the Director role. */
export function startDirector(deps: ActorDeps, store: TaskStore, queue: WorkQueue, config: DirectorConfig): RoleHandle {
  const { bus, subjects, log } = deps;
  const owned = new Map<string, RunningTask>();
  const owner = `director-${deps.newId()}`;
  const parseCache = config.parseCache ?? createParseCache();
  /** Deliveries wait for their submission's answer from this process (actors/director/gates.ts). */
  const gates = submissionGates();
  /** Set by `stop`: take no new task, hand back the ones running. */
  let draining = false;

  // A fork's events say what it was forked from.
  const publishEvent = eventPublisher(deps, config.publishStored, (taskId) => owned.get(taskId)?.claim.record.forkOf);
  /** The type of a template's entry task, for metrics. */
  const taskType = (xml: string) => {
    if (xml === "") return "prompt";
    const parsed = parseCache.parse(xml);
    const entry = parsed.ok ? parsed.document.entry : undefined;
    return entry === undefined ? "unknown" : entry.kind === "task" ? entry.type : entry.kind;
  };
  deps.metrics?.inflight("director", () => owned.size);

  const runs = new Set<RunActor>();
  /** What the run of each delivery shares (actors/director/run.ts). */
  const env: RunEnv = {
    deps,
    store,
    owner,
    ackWaitMs: queue.ackWaitMs,
    taskTimeoutMs: config.taskTimeoutMs,
    ...(config.lastPublished ? { lastPublished: config.lastPublished } : {}),
    ...(config.publishStored ? { publishStored: config.publishStored } : {}),
    owned,
    pendingClaims: new Map(),
    runs,
    publishEvent,
    taskType,
    runActors: runActors(),
    taskActors: taskActors(),
  };

  /** Decodes one intake delivery and runs it through the run protocol (actors/director/run.ts). */
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
    await runDelivery(env, item, queued.record, draining);
  };

  const { get, cancel } = taskRequests(deps, store, queue, {
    liveState: (taskId) => {
      const actor = owned.get(taskId)?.actor;
      return actor === undefined ? undefined : stateOf(actor.getSnapshot());
    },
    publishEvent,
    ...(config.lastPublished ? { lastPublished: config.lastPublished } : {}),
    taskType,
  });

  const guarded = (name: string, fn: (msg: BusMessage) => Promise<void>) => async (msg: BusMessage) => {
    try {
      await fn(msg);
    } catch (err) {
      log.error({ subject: msg.subject, err: messageOf(err) }, `${name} failed`);
      msg.respond(encodeJson(errorReply("INTERNAL", messageOf(err))));
    }
  };

  // A report that arrives once the task's machine has ended (a node finishing after a cancel) has nothing to change.
  const toTask = (progress: Progress): boolean => {
    const actor = owned.get(progress.taskId)?.actor;
    if (actor === undefined) return false;
    if (actor.getSnapshot().status === "active") actor.send(progress);
    return true;
  };
  const stopLocalProgress = deps.local?.onProgress(toTask);
  const queueGroup = { queue: subjects.queue("director") };
  const subscriptions = [
    bus.subscribe(
      Requests.submit.servedOn(subjects),
      async (msg) => {
        let announced: ((discarded: number | undefined) => void) | undefined;
        const queuing = (taskId: string) => void (announced = gates.submitting(taskId));
        let accepted: Awaited<ReturnType<typeof handleSubmit>>;
        try {
          accepted = await handleSubmit(deps, store, queue, msg, queuing, config.sizeLimits, parseCache.parse, {
            strictPlaceholders: config.substitution !== "lenient",
          });
          if (accepted?.reply.status === "accepted") publishEvent(accepted.reply.taskId, 1, "task.queued", "queued", "queued");
        } finally {
          announced?.(accepted?.discarded);
        }
      },
      queueGroup,
    ),
    bus.subscribe(Requests.taskGet.servedOn(subjects), guarded("get", get), queueGroup),
    bus.subscribe(Requests.taskCancel.servedOn(subjects), guarded("cancel", cancel), queueGroup),
    bus.subscribe(subjects.anyProgress, (msg) => {
      const decoded = decode(Progress, msg.data);
      if (decoded.ok) toTask(decoded.value);
    }),
    // Reports of roles in this process come as calls (actors/local.ts).
    { unsubscribe: async () => stopLocalProgress?.() },
    ...(config.records
      ? [
          ...serveNodeReads(deps, store, {
            records: config.records.store,
            maxAgeMs: config.records.maxAgeMs,
            concurrency: config.concurrency,
          }),
          serveRerun(deps, {
            tasks: store,
            queue,
            records: config.records.store,
            maxAgeMs: config.records.maxAgeMs,
            parseCache,
            sizeLimits: config.sizeLimits,
            publishEvent,
            concurrency: config.concurrency,
            gates,
          }),
        ]
      : []),
    serveTakeovers(deps, owner, owned),
    bus.subscribe(subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (decoded.ok) owned.get(decoded.value.taskId)?.actor?.send({ type: "task.cancel" });
    }),
  ];
  const intake = queue.consume(run, { concurrency: config.concurrency });
  // Tasks the store-first intake left stored but unqueued are queued here, looked for every ack wait (only a queue
  // with an item size limit has that path: actors/director/unqueued.ts).
  let requeueing = false;
  const requeue = async () => {
    if (requeueing || draining) return;
    requeueing = true;
    try {
      await requeueUnqueued(deps, store, queue, queue.ackWaitMs);
    } catch (err) {
      log.warn({ err: messageOf(err) }, "could not look at the unqueued tasks; trying again later");
    } finally {
      requeueing = false;
    }
  };
  const requeueTimer = queue.maxItemBytes === undefined ? undefined : setInterval(() => void requeue(), queue.ackWaitMs);
  requeueTimer?.unref();
  // One clock for every task of this Director: each run signals progress on its delivery and checkpoints its task.
  const heartbeat = setInterval(() => {
    for (const delivery of runs) delivery.send({ type: "heartbeat" });
  }, heartbeatMs(queue.ackWaitMs));
  heartbeat.unref();

  return {
    role: "director",
    /** Drains: stops pulling intake, hands the running tasks back (nak, so another Director resumes them at once). */
    async stop() {
      draining = true;
      clearInterval(requeueTimer);
      clearInterval(heartbeat);
      const consuming = intake.unsubscribe();
      for (const delivery of runs) delivery.send({ type: "drain" });
      await Promise.all([consuming, ...subscriptions.map((s) => s.unsubscribe())]);
      for (const task of owned.values()) task.actor?.stop();
    },
  };
}
