/**
 * A session's model fallback (pure): the models a call tries in order (the task's `<model fallback>`), and which
 * failures let the next one answer.
 */

/** The models a call tries, in order: `first`, then each of `fallbacks` other than `first`. */
export function modelsToTry(first: string, fallbacks: readonly string[]): string[] {
  return [first, ...fallbacks.filter((m) => m !== first)];
}

/**
 * Whether a model call that failed for good with HTTP `status` says the model is unavailable, so another may
 * answer: not found or not allowed (404, 403), overloaded or failing after the retries (408, 409, 429, 5xx), or
 * unreachable (no status). A request the server refused for its content (400, 413, 422) or a bad API key (401)
 * would fail with any model.
 */
export function unavailableStatus(status: number | undefined): boolean {
  return status === undefined || status === 403 || status === 404 || status === 408 || status === 409 || status === 429 || status >= 500;
}

/** The model to try after the `index`th of `models` failed; undefined: none, the failure stands. */
export function nextModel(
  models: readonly string[],
  index: number,
  failure: { unavailable: boolean; aborted: boolean },
): string | undefined {
  return failure.unavailable && !failure.aborted ? models[index + 1] : undefined;
}
