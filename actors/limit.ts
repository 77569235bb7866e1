/** A counting semaphore: at most `size` holders at once, the rest wait in arrival order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`semaphore size must be a positive integer, got '${size}'`);
  }

  /** Runs `fn` once a slot is free. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    // A slot freed while others wait is handed to the first of them, never taken by a newcomer.
    if (this.active < this.size && this.waiting.length === 0) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  /** Runs `fn` at once when a slot is free (and nobody waits for one); `undefined`, without running it, otherwise. */
  tryRun<T>(fn: () => Promise<T>): Promise<T> | undefined {
    if (this.active >= this.size || this.waiting.length > 0) return undefined;
    this.active++;
    let running: Promise<T>;
    try {
      running = fn();
    } catch (err) {
      this.release();
      return Promise.reject(err);
    }
    return running.finally(() => this.release());
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  /** Slots a newcomer would get at once (none while anybody waits). */
  get free(): number {
    return this.waiting.length > 0 ? 0 : this.size - this.active;
  }

  /** Holders right now. */
  get inUse(): number {
    return this.active;
  }
}
