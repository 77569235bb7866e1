/**
 * When the pending claims of one Director's runs are due to be stored: one timer for them all, where each run had an
 * XState `after` delay of its own. XState keys a delayed event by its actor (`x:123.xstate.after…`) in objects of its
 * system; with thousands of runs under way those distinct keys filled V8's transitions from the empty object, and
 * every object built by adding properties meanwhile got a hidden class of its own (about 1 KB more per task in
 * flight). Every run waits the same delay, so the order runs start in is the order they are due.
 */
import type { RunActor } from "./run-actors.js";

/** Sends `claim.due` to each run added, once {@link ClaimsDue.delayMs} passed since it was added. */
export class ClaimsDue {
  readonly #due = new Map<RunActor, number>();
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly delayMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** `run`'s task started under its claim: it is told `claim.due` after the delay (its chart ignores it unless pending). */
  add(run: RunActor): void {
    this.#due.set(run, this.now() + this.delayMs);
    this.#timer ??= this.#arm(this.delayMs);
  }

  /** `run` ended: it is told nothing more. */
  delete(run: RunActor): void {
    this.#due.delete(run);
  }

  /** The Director stops: no run is told anything more. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#due.clear();
  }

  #arm(ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => this.#fire(), ms);
    // Like the heartbeat: the clock alone does not keep the process up.
    timer.unref();
    return timer;
  }

  #fire(): void {
    this.#timer = undefined;
    const now = this.now();
    for (const [run, at] of this.#due) {
      if (at > now) {
        this.#timer = this.#arm(at - now);
        return;
      }
      this.#due.delete(run);
      run.send({ type: "claim.due" });
    }
  }
}
