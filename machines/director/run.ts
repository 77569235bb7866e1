/**
 * The run protocol of one delivered task: what its Director does with one intake delivery, from the claim to the
 * ack. This is the part of a task's life that decides what survives a crash: the task's own lifecycle (queued →
 * running → completed | failed | cancelled) is the {@link taskMachine} of ./task.ts, which this machine invokes while
 * it is `running`: one actor system per delivery, the task its child. Leaving `running` stops the task; its end
 * (done, or in error) ends `running`.
 *
 * delivered → claiming → (telling →) restoring → running → finishing → settled. A first delivery (nothing of its task
 * ran before, {@link surelyFirst}) goes delivered → starting → created → running instead: it is claimed without reading
 * anything, under a pending claim its first write stores, and its task starts from its input, with no invoked actor
 * before it (`startFresh`, which answers `task.created`). Either way the task is invoked only in `running`, from where
 * the claim or the restore left it ({@link LaunchedTask}). On the way a task can be handed back (`drain`: the process
 * stops; or an effect failed: the delivery comes again after a pause), lost (another Director took the
 * claim over), or refused (the claim was not granted: contended, already final, dropped, or claimed here under an
 * earlier delivery). A claim that replaced another Director's claim tells that Director first (`telling`), which stops
 * publishing the task's events before this one publishes any; a Director told so (`claim.superseded`) stops its task
 * (leaves `running`) and publishes nothing more of it. A task submitted in words compiles inside its evaluation
 * (actors/director/task-effects.ts), so a task resumed after the compile does not compile again.
 *
 * While the task runs, its checkpoints are decided here too (`running`: `stored` → `writing` → `stored`, or `waiting`
 * for the next heartbeat after a write that failed; `handingBack`, a last one, when draining): a checkpoint is written
 * when the task published an event since the last one stored (its seq), or, under a pending claim, once the claim is
 * due; one at a time; a write that finds the claim gone ends the run as lost, one the store refuses for good fails the
 * task, once.
 *
 * Inbound (from the shell): `heartbeat` (one clock per Director, a third of the queue's ack wait, beats every run:
 * signal progress on the delivery and write a checkpoint if one is due), `claim.due` (a pending claim's delay since
 * the task started passed, also one clock per Director: it is stored by the first checkpoint after it), `drain`,
 * `task.changed` (with the task's last event seq), `claim.superseded`, `effect.failed`. The delay is the shell's, not
 * an `after` of this chart: XState keys a delayed event by its actor in an object of its system, and with thousands
 * of runs under way those keys made V8 give thousands of objects a hidden class of their own (about 1 KB more per task
 * in flight). Effects, provided by actors/director/run.ts: the actors `claim`, `tellPreviousOwner`,
 * `restore`, `task`, `checkpoint`, `finish`, `flush` and `readOwner`, and the actions `closeEvents`, `beat`, `ack`,
 * `nak`, `nakLater`, `cancelOthers` and `report`.
 */
import { assign, fromPromise, setup, type ActorLogic, type EventFromLogic, type SnapshotFrom } from "xstate";
import { notProvided } from "../not-provided.js";
import { messageOf } from "../../protocol/errors.js";
import type { TaskId } from "../../protocol/ids.js";
import type { Scoped } from "../scoped.js";
import type { taskMachine } from "./task.js";

/** Input of a run actor; its `scopeKey` names the delivery whose effects its actions and actors act through. */
export interface RunInput extends Scoped {
  taskId: TaskId;
  /** The process was already draining when the delivery arrived. */
  draining?: boolean;
  /** Surely the item's first delivery, its record with it ({@link surelyFirst}): claimed without reading anything. */
  first?: boolean;
}

/**
 * Whether a delivery is surely its item's first (`deliveries`, and when the queue tells, `queuedAt`: ms since the
 * epoch). A nats-server before 2.10.16 can count a redelivery as a first delivery; a redelivery comes an ack wait
 * after the delivery before it, so a delivery counted as the first of an item queued an ack wait ago or longer is
 * claimed by reading its record, like any redelivery: an earlier owner's claim is taken over at once, rather than
 * found at the first write, one ack wait later.
 */
export function surelyFirst(item: { deliveries: number; queuedAt?: number | undefined }, ackWaitMs: number, now: number): boolean {
  return item.deliveries === 1 && (item.queuedAt === undefined || now - item.queuedAt < ackWaitMs);
}

/**
 * The `task.resumed` event a run publishes when it starts its task, if any: taken over from `previousOwner` (resumed
 * from its snapshot), or delivered before to a Director that stopped before it stored its claim (not `fresh`: the
 * task starts over, and the Handler's records replay what that run finished).
 */
export function resumeNotice(
  previousOwner: string | undefined,
  fresh: boolean,
  deliveries: number,
): { message: string; data: Record<string, unknown> } | undefined {
  if (previousOwner !== undefined) return { message: `resumed from ${previousOwner}`, data: { previousOwner } };
  if (!fresh) return { message: "resumed: delivered again, from its start", data: { deliveries } };
  return undefined;
}

/** What `claim` found: the task is this Director's, or why it is not run here. */
export type ClaimOutput =
  /**
   * Claimed: `pending` when nothing is stored yet (the first delivery runs at once, its claim stored later);
   * `takenOver` when the claim replaced another Director's, which is told before anything of the task is published.
   */
  | { kind: "claimed"; pending: boolean; takenOver?: boolean; seq: number }
  /** Another Director holds a live claim: asked again after a pause. */
  | { kind: "contended" }
  /** Nothing to run: the task is final (its result is published), has no record, or was queued again. */
  | { kind: "done" }
  /** A newer delivery joined a claim this process is still writing: that run settles it. */
  | { kind: "joined" };

/**
 * What a `checkpoint` came to: `written` (the task's snapshot and event seq `seq` stored under the claim), `skipped`
 * (the task ended before the write: its final record follows), `lost` (another Director owns the claim now), `refused`
 * (the store refuses it for good: too large; `message` says why), or `failed` (the store did not answer; tried again at
 * the next heartbeat).
 */
export type CheckpointOutput =
  | { kind: "written"; seq: number }
  | { kind: "skipped" }
  | { kind: "lost" }
  | { kind: "refused"; message: string }
  | { kind: "failed" };

/**
 * What `restore` found: the task is ready to start, from its input or its stored snapshot (its events going on from
 * `seq` when that is not the claim's: {@link resumedSeq}), or its stored snapshot cannot run on.
 */
export type RestoreOutput = { kind: "ready"; seq?: number } | { kind: "refused"; message: string };

/**
 * The seq a task's events go on from when its run resumes it from its record, whose checkpoint counted `checkpointed`
 * events: the last one stored in the events stream (`stored`), when it could be read. The checkpoint can count events
 * its writer never stored (a Director told of a takeover drops those not sent yet; one that dies loses those in
 * flight), or miss events stored after it; numbered from the last stored, the replay skips no seq.
 */
export function resumedSeq(checkpointed: number, stored: number | undefined): number {
  return stored ?? checkpointed;
}

/**
 * The task's machine ({@link taskMachine}) as its run invokes it: its input is the delivery's key, and the Director
 * starts it from where that delivery's claim (`startFresh`) or `restore` left it: the task's input, or its stored
 * snapshot.
 */
export type LaunchedTask = ActorLogic<SnapshotFrom<typeof taskMachine>, EventFromLogic<typeof taskMachine>, Scoped>;

/** The placeholder of {@link LaunchedTask}: the Director provides it (actors/director/run-actors.ts). */
const unlaunched: LaunchedTask = {
  transition: (snapshot) => snapshot,
  getInitialSnapshot: () => notProvided("run.task"),
  getPersistedSnapshot: (snapshot) => snapshot,
};

/** What `finish` did: the outcome was stored (and published), or the claim was gone. */
export type FinishOutput = "written" | "lost";

/** Input of `finish`: the failure that ends the task without its machine, when there is one. */
export interface FinishInput extends Scoped {
  failure?: string;
}

/** A claim as a takeover notice names it: its owner and when it was made. */
export interface ClaimId {
  owner: string;
  claimedAt: string;
}

/** Whether a takeover notice naming the claim `replaced` is about `held`, the claim a Director runs its task under. */
export function supersedes(replaced: ClaimId, held: ClaimId): boolean {
  return replaced.owner === held.owner && replaced.claimedAt === held.claimedAt;
}

/** The final states of a run. */
export type RunOutcome = "settled" | "handedBack" | "lost" | "refused";

/** Context of a run actor. */
export interface RunContext extends Required<Omit<RunInput, "scopeKey">>, Scoped {
  /** The claim was pending when granted. */
  pending: boolean;
  /** Why the task fails without its machine (its snapshot cannot be restored, its checkpoint cannot be stored). */
  failure?: string;
  /** Work of the task still running elsewhere (the Evaluator, the Handler) is to be cancelled once it is finished. */
  cancelOthers: boolean;
  /** Why the delivery went back to the queue after an effect failed. */
  error?: string;
  /** Another Director's claim replaced this one (it said so): nothing of the task is published here any more. */
  superseded: boolean;
  /** The task's last event seq, as the shell last reported it. */
  seq: number;
  /** The last seq stored in the task's record. */
  checkpointed: number;
  /** A pending claim is due to be stored (`claim.due` came, or a heartbeat). */
  claimDue: boolean;
}

/** Events a run actor accepts. */
export type RunEvent =
  /** The Director's heartbeat: signal progress on the delivery and checkpoint if due; `seq`: the task's last event. */
  | { type: "heartbeat"; seq: number }
  /** The delay of a pending claim (first delivery: no record written yet) passed since the task started. */
  | { type: "claim.due" }
  /** The process is draining: hand the task back. */
  | { type: "drain" }
  /** A first delivery's pending claim taken (`startFresh`), its task ready to start or not: `seq`, the claim's last event. */
  | { type: "task.created"; output: RestoreOutput; seq: number }
  /** An effect the run set off failed unexpectedly (an action threw, `startFresh` failed): the delivery goes back to the queue. */
  | { type: "effect.failed"; error: unknown }
  /** The task's machine changed state: checkpoint it; `seq`: the task's last event. */
  | { type: "task.changed"; seq: number }
  /** The Director that took the task over said so (its claim replaced this one). */
  | { type: "claim.superseded" };

/** On an effect's failure: the delivery goes back to the queue, after a pause growing with its deliveries. */
const failed = {
  target: "#run.handedBack",
  actions: [{ type: "recordError", params: ({ event }: { event: { error: unknown } }) => ({ error: event.error }) }, "nakLater"],
} as const;

/** The input of an effect: the key of the delivery it acts for. */
const scoped = ({ context }: { context: RunContext }): Scoped => ({ scopeKey: context.scopeKey });

/** Hands the delivery back once a last checkpoint is written (`flush`): naked, for this or another Director. */
const handingBack = {
  invoke: { src: "flush", input: scoped, onDone: { target: "#run.handedBack", actions: "nak" }, onError: failed },
} as const;

/** A heartbeat: progress is signalled on the delivery, and a pending claim is due. */
const beating = ["beat", { type: "noteBeat", params: ({ event }: { event: { seq: number } }) => ({ seq: event.seq }) }] as const;

/** Notes the seq a restored task's events go on from ({@link RestoreOutput}). */
const noteResumed = { type: "noteResumed", params: ({ event }: { event: RestoreEvent }) => outputOf(event) } as const;

/**
 * What follows once the run knows where its task starts (`restore`, or `startFresh` then `task.created`): the event's
 * `output` says whether it can. Typed loosely: the same branches serve an invoked actor's done event and `task.created`.
 */
const restored = [
  { guard: "superseded", target: "checkingOwner" },
  {
    guard: { type: "restoreRefused", params: ({ event }: { event: RestoreEvent }) => outputOf(event) },
    target: "finishing",
    actions: {
      type: "noteFailure",
      params: ({ event }: { event: RestoreEvent }) => {
        const output = outputOf(event);
        return { failure: output.kind === "refused" ? `cannot resume the task: ${output.message}` : "" };
      },
    },
  },
  { guard: "draining", target: "handingBack", actions: noteResumed },
  { target: "running", actions: noteResumed },
] as const;

/** An event that carries a {@link RestoreOutput}: an invoked `restore`'s done event, or `task.created`. */
type RestoreEvent = { type: string; output?: unknown };
const outputOf = (event: RestoreEvent): RestoreOutput => event.output as RestoreOutput;

/** The run protocol machine. */
export const runMachine = setup({
  types: {
    input: {} as RunInput,
    context: {} as RunContext,
    events: {} as RunEvent,
  },
  actions: {
    /**
     * A first delivery: takes a pending claim, readies the task to start from its input and answers `task.created`
     * (or `effect.failed`), once this action has returned.
     */
    startFresh: () => notProvided("run.startFresh"),
    /** Publishes no more event of the task, and drops those not sent yet: another Director owns it. */
    closeEvents: () => notProvided("run.closeEvents"),
    beat: () => notProvided("run.beat"),
    ack: () => notProvided("run.ack"),
    nak: () => notProvided("run.nak"),
    nakLater: () => notProvided("run.nakLater"),
    cancelOthers: () => notProvided("run.cancelOthers"),
    /** Logs what the run came to. */
    report: (_, _params: { outcome: RunOutcome }) => undefined,
    markDraining: assign({ draining: true }),
    noteFailure: assign((_, params: { failure: string }) => ({ failure: params.failure })),
    markSuperseded: assign({ superseded: true }),
    recordError: assign((_, params: { error: unknown }) => ({ error: messageOf(params.error) })),
    /** The claim granted: its seq is the last one stored; a pending claim is due at once only when not pending. */
    noteClaim: assign((_, output: ClaimOutput) => {
      if (output.kind !== "claimed") return {};
      const pending = output.pending && output.takenOver !== true;
      return { pending, seq: output.seq, checkpointed: output.seq, claimDue: !pending };
    }),
    /** A task resumed from its record numbers its events from the last one stored: its checkpoint is taken to be there. */
    noteResumed: assign((_, output: RestoreOutput) =>
      output.kind === "ready" && output.seq !== undefined ? { seq: output.seq, checkpointed: output.seq } : {},
    ),
    noteBeat: assign((_, params: { seq: number }) => ({ seq: params.seq, claimDue: true })),
  },
  actors: {
    claim: fromPromise<ClaimOutput, Scoped>(async () => notProvided("run.claim")),
    /** Tells the Director whose claim this one replaced; resolves once it stopped publishing (or did not answer). */
    tellPreviousOwner: fromPromise<void, Scoped>(async () => notProvided("run.tellPreviousOwner")),
    restore: fromPromise<RestoreOutput, Scoped>(async () => notProvided("run.restore")),
    /** The task's machine, started from its input or its stored snapshot (`running` invokes it). */
    task: unlaunched,
    /** Writes the task's snapshot and event seq under the claim, once what the last change set off went out. */
    checkpoint: fromPromise<CheckpointOutput, Scoped>(async () => notProvided("run.checkpoint")),
    finish: fromPromise<FinishOutput, FinishInput>(async () => notProvided("run.finish")),
    flush: fromPromise<void, Scoped>(async () => notProvided("run.flush")),
    /** Whether the Director that took the task over has finished it (then this delivery's ack is as safe as its own). */
    readOwner: fromPromise<{ final: boolean }, Scoped>(async () => notProvided("run.readOwner")),
  },
  guards: {
    claimed: (_, output: ClaimOutput) => output.kind === "claimed",
    takenOver: (_, output: ClaimOutput) => output.kind === "claimed" && output.takenOver === true,
    contended: (_, output: ClaimOutput) => output.kind === "contended",
    nothingToRun: (_, output: ClaimOutput) => output.kind === "done",
    restoreRefused: (_, output: RestoreOutput) => output.kind === "refused",
    first: ({ context }) => context.first,
    draining: ({ context }) => context.draining,
    superseded: ({ context }) => context.superseded,
    pending: ({ context }) => context.pending,
    cancellingOthers: ({ context }) => context.cancelOthers,
    writtenCancellingOthers: ({ context }, output: FinishOutput) => output === "written" && context.cancelOthers,
    written: (_, output: FinishOutput) => output === "written",
    takenOverFinished: (_, output: { final: boolean }) => output.final,
    /** A checkpoint is due: a pending claim once it is due, else an event published since the last seq stored. */
    checkpointDue: ({ context }) => (context.pending ? context.claimDue : context.seq > context.checkpointed),
    checkpointWritten: (_, output: CheckpointOutput) => output.kind === "written" || output.kind === "skipped",
    checkpointLost: (_, output: CheckpointOutput) => output.kind === "lost",
    checkpointRefused: (_, output: CheckpointOutput) => output.kind === "refused",
  },
}).createMachine({
  id: "run",
  context: ({ input }) => ({
    draining: false,
    first: false,
    ...input,
    pending: false,
    cancelOthers: false,
    superseded: false,
    seq: 0,
    checkpointed: 0,
    claimDue: false,
  }),
  initial: "delivered",
  on: {
    drain: { actions: "markDraining" },
    "claim.superseded": { actions: ["markSuperseded", "closeEvents"] },
    "effect.failed": failed,
  },
  states: {
    delivered: {
      description: "A delivery arrived: surely its item's first (nothing of its task ran before, its record with it), or not.",
      always: [{ guard: "first", target: "starting" }, { target: "claiming" }],
    },
    starting: {
      description:
        "A first delivery: claimed at once under a pending claim, stored by its first write; its task is to start from its input.",
      entry: "startFresh",
      on: {
        "task.created": {
          target: "created",
          actions: { type: "noteClaim", params: ({ event }) => ({ kind: "claimed", pending: true, seq: event.seq }) },
        },
      },
    },
    created: {
      description: "The first delivery's claim was taken, or its task cannot start: on as after a restore.",
      always: restored,
    },
    claiming: {
      description:
        "Claims the task by reading its record (a delivery that may not be its item's first): the task's, or why it is not run here.",
      invoke: {
        src: "claim",
        input: scoped,
        onDone: [
          {
            guard: { type: "takenOver", params: ({ event }) => event.output },
            target: "telling",
            actions: { type: "noteClaim", params: ({ event }) => event.output },
          },
          {
            guard: { type: "claimed", params: ({ event }) => event.output },
            target: "restoring",
            actions: { type: "noteClaim", params: ({ event }) => event.output },
          },
          { guard: { type: "contended", params: ({ event }) => event.output }, target: "refused", actions: "nakLater" },
          { guard: { type: "nothingToRun", params: ({ event }) => event.output }, target: "refused", actions: "ack" },
          { target: "refused" },
        ],
        onError: failed,
      },
    },
    telling: {
      description:
        "The claim replaced another Director's: that Director is told, and stops publishing the task's events, before anything is published here. Unanswered (it is gone), the run goes on. Each heartbeat keeps the delivery in progress meanwhile, as while restoring.",
      invoke: { src: "tellPreviousOwner", input: scoped, onDone: "restoring", onError: "restoring" },
      on: { heartbeat: { actions: "beat" } },
    },
    restoring: {
      description:
        "Finds where the task starts: from its stored snapshot when taken over, else from its input; a snapshot that cannot run on fails the task.",
      invoke: { src: "restore", input: scoped, onDone: restored, onError: failed },
      on: { heartbeat: { actions: "beat" } },
    },
    running: {
      description:
        "The task's machine runs, invoked here: leaving this state stops it, and its end (done, or in error) finishes the run. Each change of its state is checkpointed under the claim, and each heartbeat signals progress on the delivery and writes a checkpoint if one is due.",
      invoke: { id: "task", src: "task", input: scoped, onDone: "finishing", onError: "finishing" },
      on: {
        heartbeat: { actions: beating },
        "claim.due": { guard: "pending", actions: assign({ claimDue: true }) },
        "task.changed": { actions: assign({ seq: ({ event }) => event.seq }) },
        "claim.superseded": { target: "checkingOwner", actions: ["markSuperseded", "closeEvents"] },
        drain: ".handingBack",
      },
      initial: "stored",
      states: {
        stored: {
          description: "Nothing is being written; a checkpoint starts once one is due.",
          always: { guard: "checkpointDue", target: "writing" },
        },
        writing: {
          description: "A checkpoint is being written; a change meanwhile is written after it.",
          invoke: {
            src: "checkpoint",
            input: scoped,
            onDone: [
              {
                guard: { type: "checkpointWritten", params: ({ event }) => event.output },
                target: "stored",
                actions: assign(({ context, event }) => {
                  const stored = event.output.kind === "written" ? event.output.seq : context.seq;
                  return { pending: false, checkpointed: stored, seq: Math.max(context.seq, stored) };
                }),
              },
              {
                guard: { type: "checkpointLost", params: ({ event }) => event.output },
                target: "#run.checkingOwner",
                actions: "closeEvents",
              },
              {
                guard: { type: "checkpointRefused", params: ({ event }) => event.output },
                target: "#run.finishing",
                actions: assign({
                  failure: ({ event }) => (event.output.kind === "refused" ? event.output.message : undefined),
                  cancelOthers: true,
                }),
              },
              { target: "waiting" },
            ],
            onError: "waiting",
          },
        },
        waiting: {
          description: "A checkpoint failed (the store did not answer): written again at the next heartbeat.",
          on: { heartbeat: { target: "writing", actions: beating } },
        },
        handingBack: {
          description:
            "Draining: writes a last checkpoint of the running task, so the next Director resumes it from there at once; the task stops once it is written. A task that ends meanwhile is finished here instead.",
          on: { drain: {} },
          ...handingBack,
        },
      },
    },
    handingBack: {
      description:
        "Draining before the task started: writes its claim (its stored snapshot kept), so the next Director resumes it at once.",
      ...handingBack,
    },
    finishing: {
      description:
        "Stores the outcome under the claim, then publishes the last event and the result, after the task's events (stored through a leader election, they can take seconds): each heartbeat keeps the delivery in progress until then, so that it is not redelivered and its result published by another Director ahead of them.",
      on: { heartbeat: { actions: "beat" } },
      invoke: {
        src: "finish",
        input: ({ context }) => ({ ...scoped({ context }), ...(context.failure === undefined ? {} : { failure: context.failure }) }),
        onDone: [
          {
            guard: { type: "writtenCancellingOthers", params: ({ event }) => event.output },
            target: "settled",
            actions: ["ack", "cancelOthers"],
          },
          { guard: { type: "written", params: ({ event }) => event.output }, target: "settled", actions: "ack" },
          { guard: "cancellingOthers", target: "checkingOwner", actions: "cancelOthers" },
          { target: "checkingOwner" },
        ],
        onError: failed,
      },
    },
    checkingOwner: {
      description: "The claim was taken over: nothing is published here; the delivery is acked once the new owner has finished.",
      invoke: {
        src: "readOwner",
        input: scoped,
        onDone: [
          { guard: { type: "takenOverFinished", params: ({ event }) => event.output }, target: "lost", actions: "ack" },
          { target: "lost" },
        ],
        onError: failed,
      },
    },
    settled: {
      description: "The outcome is stored and published; the delivery is acked.",
      type: "final",
      entry: { type: "report", params: { outcome: "settled" } },
    },
    handedBack: {
      description: "The delivery went back to the queue (naked) for this or another Director.",
      type: "final",
      entry: { type: "report", params: { outcome: "handedBack" } },
    },
    lost: { description: "Another Director owns the task now.", type: "final", entry: { type: "report", params: { outcome: "lost" } } },
    refused: {
      description: "The task is not run here: its claim was not granted.",
      type: "final",
      entry: { type: "report", params: { outcome: "refused" } },
    },
  },
});
