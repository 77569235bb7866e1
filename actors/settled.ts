/**
 * A call whose cleanup runs as soon as it settles. Written with promise callbacks rather than an `await` in a `try`:
 * a frame suspended in an async function keeps everything it holds for as long as the call runs, which for a task's
 * Handler call is its whole model call. Not `promise.finally(cleanup)` either: that runs `cleanup` a few microtasks
 * after the call settled, and a semaphore freed that late hands its slot to a newcomer before the first waiter.
 */

/** Runs `run`; `cleanup` runs once what it returns settles (in that reaction), or at once should `run` throw. */
export function settled<T>(run: () => Promise<T>, cleanup: () => void): Promise<T> {
  let running: Promise<T>;
  try {
    running = run();
  } catch (err) {
    cleanup();
    return Promise.reject(err);
  }
  return running.then(
    (value) => {
      cleanup();
      return value;
    },
    (err: unknown) => {
      cleanup();
      throw err;
    },
  );
}
