/**
 * The Director role: accepts submissions, decodes each intake delivery and runs it through the run protocol
 * (machines/director/run.ts, its effects in ./run.ts), which owns one task machine actor per task; publishes lifecycle
 * events and the result, and answers `get` and `cancel` for any task.
 *
 * Subjects: `<root>.tasks.submit`, `<root>.tasks.*.get`, `<root>.tasks.*.cancel` (queue group `director`),
 * the intake work queue, `<root>.progress.*` and `<root>.control.cancel` (every Director; each acts only on the
 * tasks it owns), and its own `<root>.director.<owner>.takeover` (./owned-tasks.ts).
 */
import { encodeJson, errorReply, Requests, type TaskId } from "../../protocol/index.js";
import type { BusMessage, LastPublished, PublishStored, TaskStore, WorkQueue } from "../bus.js";
import { messageOf, type ActorDeps, type RoleHandle } from "../deps.js";
import { submissionGates } from "./gates.js";
import { heartbeatMs, stateOf, taskActors, type RunningTask } from "./task.js";
import { serveSubmit } from "./intake.js";
import { taskRequests } from "./requests.js";
import { eventPublisher } from "./event-publisher.js";
import type { OrderedWrites } from "./vouching.js";
import { deliver, runActors, type RunActor } from "./run.js";
import { ClaimsDue } from "./claims-due.js";
import { PENDING_CLAIM_MS } from "./records.js";
import type { RunEnv } from "./run-env.js";
import type { SizeLimits } from "../size-limits.js";
import { createParseCache, type ParseCache } from "../../machines/language/parse-cache.js";
import { requeueEveryAckWait } from "./unqueued.js";
import { serveNodeReads } from "./node-reads.js";
import { serveRerun } from "../fork/rerun.js";
import { serveOwnedTasks } from "./owned-tasks.js";

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
  lastPublished?: LastPublished;
  /**
   * Stores a task's result or event in the events stream and waits for its acknowledgement, `id` naming it once (a
   * JetStream message id): one published while a replicated stream elects a leader is not lost. Absent: a plain publish.
   */
  publishStored?: PublishStored;
  /**
   * The events stream's writes stored in the order they are sent, even when one fails (`holds()`: on a server in no
   * cluster with an events stream of one replica, where no leader election can lose a write and keep a later one).
   * Then a task's events are sent without acknowledgement, vouched for by a later acknowledged write (its result, or
   * a fence), and its result right behind its last event (actors/director/event-publisher.ts). Absent, or not
   * holding: each waits for its predecessor's acknowledgement.
   */
  orderedWrites?: OrderedWrites;
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
  const owned = new Map<TaskId, RunningTask>();
  const owner = `director-${deps.newId()}`;
  const parseCache = config.parseCache ?? createParseCache();
  /** Deliveries wait for their submission's answer from this process (actors/director/gates.ts). */
  const gates = submissionGates();
  /** Set by `stop`: take no new task, hand back the ones running. */
  let draining = false;

  // A fork's events say what it was forked from.
  const publishEvent = eventPublisher(deps, {
    store: config.publishStored,
    ordered: config.orderedWrites,
    forkOf: (taskId) => owned.get(taskId)?.claim.record.forkOf,
  });
  /** The type of a template's entry task, for metrics. */
  const taskType = (xml: string) => {
    if (xml === "") return "prompt";
    const parsed = parseCache.parse(xml);
    const entry = parsed.ok ? parsed.document.entry : undefined;
    return entry === undefined ? "unknown" : entry.kind === "task" ? entry.type : entry.kind;
  };
  deps.metrics?.inflight("director", () => owned.size);

  const runs = new Map<RunActor, () => number>();
  const tasks = taskActors();
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
    claimsDue: new ClaimsDue(PENDING_CLAIM_MS),
    publishEvent,
    taskType,
    runActors: runActors(tasks),
    taskActors: tasks,
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

  const queueGroup = { queue: subjects.queue("director") };
  const subscriptions = [
    serveSubmit(deps, store, queue, {
      gates,
      parse: parseCache.parse,
      strictPlaceholders: config.substitution !== "lenient",
      publishEvent,
      ...(config.sizeLimits ? { sizeLimits: config.sizeLimits } : {}),
    }),
    bus.subscribe(Requests.taskGet.servedOn(subjects), guarded("get", get), queueGroup),
    bus.subscribe(Requests.taskCancel.servedOn(subjects), guarded("cancel", cancel), queueGroup),
    ...serveOwnedTasks(deps, owner, owned),
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
  ];
  const intake = queue.consume((item) => deliver(env, item, () => draining, gates.dropped), { concurrency: config.concurrency });
  // Tasks the store-first intake left stored but unqueued are queued here (actors/director/unqueued.ts).
  const stopRequeue = requeueEveryAckWait(deps, store, queue, () => !draining);
  // One clock for every task of this Director: each run signals progress on its delivery and checkpoints its task.
  const heartbeat = setInterval(() => {
    for (const [run, seq] of runs) run.send({ type: "heartbeat", seq: seq() });
  }, heartbeatMs(queue.ackWaitMs));
  heartbeat.unref();

  return {
    role: "director",
    /** Drains: stops pulling intake, hands the running tasks back (nak, so another Director resumes them at once). */
    async stop() {
      draining = true;
      stopRequeue();
      clearInterval(heartbeat);
      env.claimsDue.stop();
      const consuming = intake.unsubscribe();
      for (const run of runs.keys()) run.send({ type: "drain" });
      await Promise.all([consuming, ...subscriptions.map((s) => s.unsubscribe())]);
    },
  };
}
