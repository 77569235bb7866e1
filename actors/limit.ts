import { settled } from "./settled.js";

/** A counting semaphore: at most `size` holders at once, the rest wait in arrival order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`semaphore size must be a positive integer, got '${size}'`);
  }

  /** Runs `fn` once a slot is free. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    // A slot freed while others wait is handed to the first of them, never taken by a newcomer.
    if (this.free > 0) {
      this.take();
      return this.hold(fn);
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve)).then(() => this.hold(fn));
  }

  /** Runs `fn` in a slot taken, freed when it settles (a holder can wait for as long as a task's model call). */
  private hold<T>(fn: () => Promise<T>): Promise<T> {
    return settled(
      () => Promise.resolve(fn()),
      () => this.release(),
    );
  }

  /**
   * A place in line for a slot. `ready` resolves true once the slot is granted (free it with `release()` when done),
   * or false once `cancel()` gave the place up; `cancel()` returns false when the slot was granted already.
   */
  ticket(): Ticket {
    const release = () => this.release();
    if (this.free > 0) {
      this.take();
      return { ready: Promise.resolve(true), cancel: () => false, release };
    }
    let granted = false;
    let settle!: (granted: boolean) => void;
    const ready = new Promise<boolean>((resolve) => (settle = resolve));
    const grant = () => {
      granted = true;
      settle(true);
    };
    this.waiting.push(grant);
    const cancel = () => {
      if (granted) return false;
      const at = this.waiting.indexOf(grant);
      if (at >= 0) this.waiting.splice(at, 1);
      settle(false);
      return true;
    };
    return { ready, cancel, release };
  }

  /** Runs `fn` at once when a slot is free (and nobody waits for one); `undefined`, without running it, otherwise. */
  tryRun<T>(fn: () => Promise<T>): Promise<T> | undefined {
    if (this.free === 0) return undefined;
    this.take();
    let running: Promise<T>;
    try {
      running = fn();
    } catch (err) {
      this.release();
      return Promise.reject(err);
    }
    return running.finally(() => this.release());
  }

  private take(): void {
    this.active++;
    this.onChange?.();
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else {
      this.active--;
      this.onChange?.();
    }
  }

  /** Called when a slot is taken at once or freed with nobody waiting for it: {@link free} changed. */
  onChange: (() => void) | undefined;

  /** Slots a newcomer would get at once (none while anybody waits). */
  get free(): number {
    return this.waiting.length > 0 ? 0 : this.size - this.active;
  }

  /** Holders right now. */
  get inUse(): number {
    return this.active;
  }
}

/** A place in line for a slot of a {@link Semaphore} (`Semaphore.ticket`). */
export interface Ticket {
  readonly ready: Promise<boolean>;
  cancel(): boolean;
  release(): void;
}
