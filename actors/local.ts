/**
 * Local dispatch: a request to a role that runs in this same process, with a slot free, is handed to it directly,
 * as a call, instead of over NATS. Nothing is encoded or sent, and no keepalives are needed (a responder in this
 * process cannot die on its own); the call and its answer are validated with the request's schemas all the same
 * (`serve` and `ask`), since the compiler does not check refinements and defaults, except for the requests that
 * take a local call as it is (`localAsIs` in protocol/requests.ts: the Director's evaluate, the Evaluator's execute). When this process has
 * no responder on the subject, or all of its slots are busy, the request goes over NATS as always, to whichever
 * process of the role takes it. Temporal calls the same idea eager dispatch.
 */
import { encode, Progress, type Subjects } from "../protocol/index.js";
import type { Bus } from "./bus.js";
import type { Semaphore } from "./limit.js";
import type { Metrics } from "./metrics.js";

/** A responder of this process: runs `request` in one of its slots, or says it has none free (`undefined`). */
type Responder = (request: unknown) => Promise<unknown> | undefined;

/** The responders of one process by subject; shared by the roles of that process (`ActorDeps.local`). */
export class LocalResponders {
  readonly #bySubject = new Map<string, Responder[]>();
  #progress: ((progress: Progress) => boolean) | undefined;

  /**
   * Takes the progress reports of this process's tasks (the Director); `sink` tells whether the task is its own.
   * Returns the function that removes it.
   */
  onProgress(sink: (progress: Progress) => boolean): () => void {
    this.#progress = sink;
    return () => {
      if (this.#progress === sink) this.#progress = undefined;
    };
  }

  /** Hands `progress` to this process's Director when it runs the task; false when it does not. */
  deliverProgress(progress: Progress): boolean {
    return this.#progress?.(progress) ?? false;
  }

  /** Registers `handle` on `subject`, run in a slot of `slots`; returns the function that removes it. */
  register(subject: string, slots: Semaphore, handle: (request: unknown) => Promise<unknown>): () => void {
    // The slot is taken at once; the handler runs on the next microtask, never inside the asker's stack (an XState
    // action that asks would otherwise run the responder's actors inside that action).
    const responder: Responder = (request) => slots.tryRun(() => Promise.resolve(request).then(handle));
    const list = this.#bySubject.get(subject) ?? [];
    this.#bySubject.set(subject, [...list, responder]);
    return () => {
      const left = (this.#bySubject.get(subject) ?? []).filter((r) => r !== responder);
      if (left.length > 0) this.#bySubject.set(subject, left);
      else this.#bySubject.delete(subject);
    };
  }

  /** Runs `request` on a responder of this process with a free slot; `undefined` when there is none. */
  dispatch(subject: string, request: unknown): Promise<unknown> | undefined {
    const list = this.#bySubject.get(subject);
    if (list === undefined) return undefined;
    for (const responder of list) {
      const running = responder(request);
      if (running !== undefined) return running;
    }
    return undefined;
  }
}

/** What a progress report travels by: an actor's deps (`ActorDeps`) hold them all. */
export interface ProgressRoute {
  readonly bus: Bus;
  readonly subjects: Subjects;
  readonly local?: LocalResponders | undefined;
  readonly metrics?: Metrics | undefined;
}

/**
 * Reports a task's progress to the Director that runs it: directly when that is this process's Director (so a report
 * never arrives after the answer it came before), over `<root>.progress.<id>` otherwise.
 */
export function publishProgress(deps: ProgressRoute, progress: Progress): void {
  deps.metrics?.progress(progress);
  if (deps.local?.deliverProgress(progress) === true) return;
  deps.bus.publish(deps.subjects.progress(progress.taskId), encode(Progress, progress));
}
