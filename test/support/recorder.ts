/**
 * Waiting in tests without sleeping: handlers record what they see, tests wait on a condition over
 * the records, woken by each new record, with a deadline.
 */

/** Values recorded by handlers, with a wait that wakes on every new value. */
export class Recorder<T> {
  /** Everything recorded so far, in order. */
  readonly values: T[] = [];
  readonly #waiters = new Set<() => void>();

  /** Records a value and wakes the waiters. */
  push(value: T): void {
    this.values.push(value);
    this.touch();
  }

  /** Wakes the waiters without recording, after some other state they look at changed. */
  touch(): void {
    for (const wake of this.#waiters) wake();
  }

  /** Resolves with the values once `condition` holds; rejects after `timeoutMs`, naming `what`. */
  async until(condition: (values: readonly T[]) => boolean, what: string, timeoutMs = 30_000): Promise<readonly T[]> {
    const deadline = Date.now() + timeoutMs;
    while (!condition(this.values)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; recorded: ${JSON.stringify(this.values)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        const wake = () => done();
        function done() {
          clearTimeout(timer);
          waiters.delete(wake);
          resolve();
        }
        const waiters = this.#waiters;
        waiters.add(wake);
      });
    }
    return this.values;
  }

  /** Waits until at least `n` values are recorded. */
  count(n: number, what = `${n} values`, timeoutMs?: number): Promise<readonly T[]> {
    return this.until((values) => values.length >= n, what, timeoutMs);
  }
}

/** A promise with its resolve function, to hold a handler until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Text ↔ bytes for test payloads. */
export const text = {
  encode: (value: string): Uint8Array => new TextEncoder().encode(value),
  decode: (bytes: Uint8Array): string => new TextDecoder().decode(bytes),
};
