/**
 * A call whose cleanup runs as soon as it settles. Written with promise callbacks rather than an `await` in a `try`:
 * a frame suspended in an async function keeps everything it holds for as long as the call runs, which for a task's
 * Handler call is its whole model call. Not `promise.finally(cleanup)` either: that runs `cleanup` a few microtasks
 * after the call settled, and a semaphore freed that late hands its slot to a newcomer before the first waiter.
 */

/**
 * Runs `run`; once what it returns settles, `answer` makes the value to resolve with (while what `run` holds is still
 * there) and `cleanup` runs right after, in the same reaction, even when `answer` throws. `cleanup` runs at once should
 * `run` throw.
 */
export function settled<T, R = T>(run: () => Promise<T>, cleanup: () => void, answer?: (value: T) => R): Promise<R> {
  let running: Promise<T>;
  try {
    running = run();
  } catch (err) {
    cleanup();
    return Promise.reject(err);
  }
  return running.then(
    (value) => {
      try {
        return answer ? answer(value) : (value as unknown as R);
      } finally {
        cleanup();
      }
    },
    (err: unknown) => {
      cleanup();
      throw err;
    },
  );
}
