/**
 * One run per record key across Handler processes. A session (or script command) that starts writes an in-flight
 * marker next to its record (`<key>.run`, created atomically) holding its process and a lease, and renews the lease
 * while it runs. Its final record, once stored, says the run ended: the marker is then left as it is (no write); a run
 * that ends without one (cancelled, stopped, its record refused) releases the marker instead. A request for the same
 * key that finds a live marker of another process waits (joins): once the key's record is final, or the marker
 * released, it reads the record and replays it; should the lease run out with no final record (the process died), it
 * takes the marker over with compare-and-set and continues from the last record. So only a Handler crash repeats
 * what it had in flight.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { decode, encode, RunMarker, type TaskId } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import { messageOf, type Logger } from "../deps.js";
import { RemoteError } from "../ask.js";
import { settled } from "../settled.js";

/** How often a running session renews its lease. */
export const LEASE_HEARTBEAT_MS = 2000;
/** How long a lease holds without renewal: three heartbeats, so a late one or two do not hand the run over. */
export const LEASE_MS = 3 * LEASE_HEARTBEAT_MS;
/** How often a joiner looks at the marker again. */
const POLL_MS = 200;

/** The key of the in-flight marker of the record at `key` (record keys end in a digest, never in `.run`). */
export const markerKey = (key: string): string => `${key}.run`;

/** A held lease on a key: renewed until released. */
export interface Lease {
  /**
   * The key's marker was there already: a run of it started before (and left its record, or died), whatever the
   * request says. False when this lease created the marker, or when the store failed (nothing known).
   */
  readonly before: boolean;
  /**
   * Stops renewing; releases the marker (unless another process took it over meanwhile) when the run left no final
   * record (`recorded` false): a stored final record says the run ended by itself. Never rejects.
   */
  release(recorded: boolean): Promise<void>;
}

/** Timing of {@link createLeases}; the defaults are the constants above. */
export interface LeaseTiming {
  heartbeatMs?: number;
  leaseMs?: number;
  pollMs?: number;
}

/** The leases of one Handler process. */
export interface Leases {
  /** This process's owner id, as written in its markers. */
  readonly owner: string;
  /**
   * Takes the lease of `key`: at once when nobody runs it, else once its run ended (`finished`: the key's record is
   * final; or the marker was released) or its lease ran out. `onWait` is told once when it has to wait for another
   * process's run. A store that fails gives a lease that holds nothing (the run goes ahead unguarded, as a record
   * that cannot be written does).
   * @throws the signal's reason when `signal` aborts while it waits.
   */
  acquire(key: string, signal: AbortSignal, finished: () => Promise<boolean>, onWait?: (marker: RunMarker) => void): Promise<Lease>;
  /**
   * Takes the lease of `key` if nobody ran it: its marker created now. Undefined when the marker is there already (a
   * run of the key came before) or the store failed: {@link acquire} then says what to do.
   */
  create(key: string): Promise<Lease | undefined>;
}

const NO_LEASE: Lease = { before: false, release: async () => undefined };

/** The leases of a Handler process over `store` (the turns bucket). */
export function createLeases(store: TaskStore, log: Logger, timing: LeaseTiming = {}): Leases {
  const heartbeatMs = timing.heartbeatMs ?? LEASE_HEARTBEAT_MS;
  const leaseMs = timing.leaseMs ?? LEASE_MS;
  const pollMs = timing.pollMs ?? POLL_MS;
  const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const held = (): Uint8Array => encode(RunMarker, { v: 1, owner, until: Date.now() + leaseMs });

  const hold = (key: string, first: number, before: boolean): Lease => {
    const marker = markerKey(key);
    let revision = first;
    let lost = false;
    let beat: Promise<void> = Promise.resolve();
    const renew = async () => {
      try {
        const next = await store.update(marker, held(), revision);
        if (next !== undefined) revision = next;
        else {
          lost = true;
          clearInterval(timer);
          log.warn({ key }, "lease taken over by another Handler (this one was thought gone): the run may be made twice");
        }
      } catch (err) {
        // An outage: the next heartbeat tries again; a lease outlives a couple of missed ones.
        log.debug({ key, err: messageOf(err) }, "lease not renewed");
      }
    };
    const timer = setInterval(() => (beat = beat.then(renew)), heartbeatMs);
    timer.unref();
    return {
      before,
      async release(recorded) {
        clearInterval(timer);
        await beat;
        if (lost || recorded) return;
        try {
          await store.update(marker, encode(RunMarker, { v: 1, owner, until: 0, released: true }), revision);
        } catch (err) {
          log.warn({ key, err: messageOf(err) }, "lease not released: a request for this run waits until it runs out");
        }
      },
    };
  };

  /** The lease of `key` with its marker created now; undefined when the marker is there already. */
  const createMarker = async (key: string): Promise<Lease | undefined> => {
    const created = await store.createWithRevision(markerKey(key), held());
    return created === undefined ? undefined : hold(key, created, false);
  };

  return {
    owner,
    create: (key) => createMarker(key).catch(() => undefined),
    async acquire(key, signal, finished, onWait) {
      const marker = markerKey(key);
      /** The marker revision last seen and since when (this process's clock): a lease renewed is seen to change. */
      let seen: { revision: number; since: number } | undefined;
      let told = false;
      let failing: number | undefined;
      let absent = true;
      for (;;) {
        signal.throwIfAborted();
        try {
          // Creating first costs one write when nobody runs the key (the usual case); a waiter then only reads.
          if (absent) {
            const created = await createMarker(key);
            if (created !== undefined) return created;
          }
          const current = await store.getWithRevision(marker);
          absent = current === undefined;
          if (current === undefined) continue;
          const decoded = decode(RunMarker, current.value);
          const now = Date.now();
          if (seen?.revision !== current.revision) seen = { revision: current.revision, since: now };
          // Ran out by the owner's clock and not renewed for longer than a heartbeat by ours: clocks that disagree
          // by a few seconds cannot hand a live run over.
          const expired = decoded.ok && decoded.value.until < now && now - seen.since > heartbeatMs * 1.5;
          const ended = !decoded.ok || decoded.value.released === true || decoded.value.owner === owner || (await finished());
          if (ended || expired) {
            if (!ended)
              log.warn(
                { key, owner: decoded.value.owner },
                "the Handler running this session stopped renewing its lease: taking the session over",
              );
            const taken = await store.update(marker, held(), current.revision);
            if (taken !== undefined) return hold(key, taken, true);
            continue;
          }
          if (!told) {
            told = true;
            onWait?.(decoded.value);
          }
          failing = undefined;
        } catch (err) {
          // A NATS restart passes; a store failing for longer than a lease does not hold the run back.
          if (Date.now() - (failing ??= Date.now()) > leaseMs) {
            log.warn({ key, err: messageOf(err) }, "in-flight marker unreadable: the run goes ahead unguarded");
            return NO_LEASE;
          }
        }
        await pause(pollMs, signal);
      }
    },
  };
}

/** Resolves after `ms`, or at once when `signal` aborts (the caller's loop then throws). */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Where a request found the run it joined: in this process, or in another Handler process. */
export type JoinedAt = "here" | "elsewhere";

/**
 * The work of one record key as the run gate runs it: `before` (a run of the key came before: a record may be there),
 * `finalWrite` to hand over the write of its final record (resolving true once stored), and `held`, which resolves
 * true once the run holds the key's lease: work started before it (a `fresh` request's) does nothing but ask the
 * model until then, and drops its answer when it resolves false.
 */
export type GatedRun<T> = (before: boolean, finalWrite: (written: Promise<boolean>) => void, held: Promise<boolean>) => Promise<T>;

/** Runs each record key once at a time, in this process and across Handler processes ({@link createRunGate}). */
export interface RunGate {
  /**
   * Runs `run` as the one run of `key`, or joins the run of it going on: one in this process answers this request
   * too; one in another process is waited for (until `finished` says the key's record is final, or its marker is
   * released), and then `run` runs (it finds that run's final record, or, if its lease ran out, continues from its
   * last one). `run` is told whether a run of the key came before this one (it waited for one, or found its marker):
   * a `fresh` request then has a record to read after all. A request here joins the run until the write of its final
   * record has resolved, and a run with no final record stored releases its marker.
   *
   * A `fresh` request (nothing of its task ran before) starts `run` at once, while its marker is created, so the
   * marker's round trip overlaps the model call rather than coming before it. Should the marker be there already (a
   * request counted as fresh that was not, or the same request sent twice), that run's answer is dropped once `held`
   * says so and the request goes the usual way: it waits for the other run or reads what it left.
   * @throws a {@link RemoteError} `UNAVAILABLE` when the task is cancelled or the Handler stops while it waits.
   */
  run<T>(
    taskId: TaskId,
    key: string,
    run: GatedRun<T>,
    joined: (at: JoinedAt) => void,
    finished: () => Promise<boolean>,
    fresh?: boolean,
  ): Promise<T>;
  /** Stops the waits of a task's requests (the task was cancelled). */
  cancel(taskId: TaskId): void;
  /** Stops every wait (the Handler stops). */
  stop(): void;
}

/** The `held` of work that runs once its lease is held. */
export const HELD: Promise<boolean> = Promise.resolve(true);

/** The run gate of a Handler process over its leases. */
export function createRunGate(leases: Leases): RunGate {
  const inflight = new Map<string, Promise<unknown>>();
  const waits = new Map<string, Set<AbortController>>();
  const abortAll = (controllers: Iterable<AbortController>, why: string) => {
    for (const controller of controllers) controller.abort(new RemoteError("UNAVAILABLE", why));
  };
  /** Waits for the lease of `key` (joining a run elsewhere), stopped by a cancel of the task. */
  const acquire = async (taskId: TaskId, key: string, finished: () => Promise<boolean>, joined: (at: JoinedAt) => void) => {
    const controller = new AbortController();
    const live = waits.get(taskId) ?? new Set();
    waits.set(taskId, live.add(controller));
    let waited = false;
    try {
      const lease = await leases.acquire(key, controller.signal, finished, () => {
        waited = true;
        joined("elsewhere");
      });
      return { lease, before: waited || lease.before };
    } finally {
      live.delete(controller);
      if (live.size === 0) waits.delete(taskId);
    }
  };
  return {
    run<T>(
      taskId: TaskId,
      key: string,
      run: GatedRun<T>,
      joined: (at: JoinedAt) => void,
      finished: () => Promise<boolean>,
      fresh = false,
    ): Promise<T> {
      const going = inflight.get(key);
      if (going !== undefined) {
        joined("here");
        return going as Promise<T>;
      }
      /** `work` under `lease`, which ends once the write of its final record (`written()`, once it settled) resolved. */
      const under = (lease: Lease, work: Promise<T>, written: () => Promise<boolean>): Promise<T> => {
        const ended = () => {
          // Until the final record's write resolved, a request for the key here joins this run (its answer is known).
          void written()
            .then(
              (stored) => lease.release(stored),
              () => lease.release(false),
            )
            .finally(() => {
              if (inflight.get(key) === running) inflight.delete(key);
            });
        };
        return settled(() => work, ended);
      };
      const running = (async () => {
        let written: Promise<boolean> = Promise.resolve(false);
        const finalWrite = (w: Promise<boolean>) => void (written = w);
        if (fresh) {
          const created = leases.create(key);
          const speculative = run(
            false,
            finalWrite,
            created.then((lease) => lease !== undefined),
          );
          // Handled at once, so a failure is not reported as unhandled while the marker is made.
          const over = speculative.catch(() => undefined);
          const lease = await created;
          if (lease !== undefined) return under(lease, speculative, () => written);
          // The marker was there: this run's answer is dropped (it waited for `held` before doing anything with it).
          await over;
          written = Promise.resolve(false);
        }
        const { lease, before } = await acquire(taskId, key, finished, joined);
        return under(lease, run(before, finalWrite, HELD), () => written);
      })();
      inflight.set(key, running);
      running.catch(() => {
        if (inflight.get(key) === running) inflight.delete(key);
      });
      return running;
    },
    cancel(taskId) {
      abortAll(waits.get(taskId) ?? [], `task '${taskId}' was cancelled while its session ran in another Handler`);
    },
    stop() {
      for (const live of waits.values()) abortAll(live, "the Handler stopped while the session ran in another one");
    },
  };
}
