/**
 * The requester side of request/reply: {@link ask} a role (in this process when one of it has a slot free, over NATS
 * otherwise) with a request declared in protocol/requests.ts, so the body and the answer are typed by its schemas;
 * {@link askRetrying} for requests that are safe to repeat. The responder side is actors/serve.ts.
 */
import type { z } from "zod";
import { decodeJson, encodeJson, ErrorReply, validate, type ErrorCode, type RequestDefinition } from "../protocol/index.js";
import { MAX_STORED_VALUE_BYTES, NoRespondersError, RequestAbortedError, RequestTimeoutError, ResponderSilentError } from "./bus.js";
import type { ActorDeps } from "./deps.js";
import { traceHeaders } from "./tracing.js";

/** An error answered by a remote actor, or raised while asking it. Branch on `code`. */
export class RemoteError extends Error {
  override name = "RemoteError";
  constructor(
    /** The protocol error code. */
    readonly code: ErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Throws the {@link RemoteError} of an answer that is an error reply. */
function throwIfErrorReply(answer: unknown): void {
  if (typeof answer !== "object" || answer === null || !("error" in answer)) return;
  const remote = ErrorReply.safeParse(answer);
  if (remote.success) throw new RemoteError(remote.data.error.code, remote.data.error.message);
}

/**
 * A local call's answer, or its timeout, or the caller's abort, as over NATS: the answer, should it still come, is
 * dropped (the work goes on until the task's cancellation reaches it, as it would in another process).
 */
function localAnswer<T>(
  subject: string,
  running: Promise<T>,
  options: { timeoutMs: number; signal?: AbortSignal | undefined },
): Promise<T> {
  const { signal, timeoutMs } = options;
  return new Promise<T>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const give = (err: RemoteError) => {
      done();
      running.catch(() => undefined);
      reject(err);
    };
    const onAbort = () => give(new RemoteError("UNAVAILABLE", `request on '${subject}' was aborted`));
    const timer = setTimeout(() => give(new RemoteError("TIMEOUT", `no answer on '${subject}' within ${timeoutMs} ms`)), timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });
    running.then(
      (value) => (done(), resolve(value)),
      (err: unknown) => (done(), reject(err)),
    );
  });
}

/**
 * Sends `body` as a `request` and validates the answer with its reply schema, whether a role of this process answered
 * it directly (actors/local.ts) or one answered over NATS. Address a request about one task or goal with
 * `Requests.taskGet.at(taskId)`.
 * @throws {RemoteError} with the remote code, `INVALID_MESSAGE` for an answer that does not match the reply schema,
 * or `NO_RESPONDERS` / `TIMEOUT` for transport failures.
 */
export async function ask<Req extends z.ZodType, Rep extends z.ZodType>(
  deps: ActorDeps,
  request: RequestDefinition<Req, Rep>,
  body: z.input<Req>,
  options: { timeoutMs: number; signal?: AbortSignal; idleTimeoutMs?: number },
): Promise<z.output<Rep>> {
  const subject = request.subjectOf(deps.subjects);
  if (options.signal?.aborted !== true) {
    const local = deps.local?.dispatch(subject, body);
    if (local !== undefined)
      return localAnswer(subject, local, options).then((answer) =>
        request.localAsIs ? (throwIfErrorReply(answer), answer as z.output<Rep>) : replyOf(request, subject, answer),
      );
  }
  let bytes: Uint8Array;
  // The responder's span continues the asker's trace (a local call runs in the asker's context as it is).
  const headers = traceHeaders();
  const sent = Object.keys(headers).length > 0 ? { ...options, headers } : options;
  try {
    bytes = await deps.bus.request(subject, encodeJson(body), sent);
  } catch (err) {
    if (err instanceof NoRespondersError)
      throw new RemoteError("NO_RESPONDERS", `no responders on '${subject}': is the role running?`, { cause: err });
    if (err instanceof RequestTimeoutError)
      throw new RemoteError("TIMEOUT", `no answer on '${subject}' within ${options.timeoutMs} ms`, { cause: err });
    if (err instanceof RequestAbortedError) throw new RemoteError("UNAVAILABLE", `request on '${subject}' was aborted`, { cause: err });
    // The responder stopped sending keepalives: gone, or its answer was lost in a NATS restart.
    if (err instanceof ResponderSilentError) throw new RemoteError("UNAVAILABLE", err.message, { cause: err });
    throw err;
  }
  // A body larger than one message came by reference (runtime/nats/chunks.ts): no larger than a stored value.
  const json = decodeJson(bytes, MAX_STORED_VALUE_BYTES);
  if (!json.ok) throw new RemoteError("INVALID_MESSAGE", `answer on '${subject}': ${json.error.message}`);
  return replyOf(request, subject, json.value);
}

/**
 * The answer as the reply schema gives it: an error reply is thrown (a handler may answer with one instead of
 * throwing), an answer that does not match the schema is refused, local or not.
 */
function replyOf<Rep extends z.ZodType>(request: RequestDefinition<z.ZodType, Rep>, subject: string, answer: unknown): z.output<Rep> {
  throwIfErrorReply(answer);
  const reply = validate(request.reply, answer);
  if (!reply.ok) throw new RemoteError("INVALID_MESSAGE", `answer of ${request.name} on '${subject}': ${reply.error.message}`);
  return reply.value;
}

/**
 * How long a long-running request may go without an answer or a keepalive before the responder counts as gone.
 * Longer than a NATS server restart with the clients' reconnect wait, so an outage alone rarely triggers a retry.
 */
export const RESPONDER_IDLE_TIMEOUT_MS = 6000;

/** How long {@link askRetrying} keeps asking while nobody subscribes to the subject (a restart of the role, of NATS). */
export const NO_RESPONDERS_RETRY_MS = 30_000;

/** Codes after which asking again may succeed: nobody answered, or the one who took the request is gone. */
const RETRIABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(["NO_RESPONDERS", "UNAVAILABLE"]);

/**
 * {@link ask} with keepalives, asking again (with a growing pause) while nobody is there to answer or the
 * responder went silent (its process died, NATS restarted), until `timeoutMs` has passed in all or `signal`
 * aborts. Only for requests that are safe to repeat: the responder replays what it recorded.
 */
export function askRetrying<Req extends z.ZodType, Rep extends z.ZodType>(
  deps: ActorDeps,
  request: RequestDefinition<Req, Rep>,
  body: z.input<Req> | ((attempt: number) => z.input<Req>),
  options: {
    timeoutMs: number;
    signal?: AbortSignal;
    /** Runs before each new attempt; throws to stop asking (e.g. the caller no longer owns the work). */
    beforeRetry?: (attempt: number, err: RemoteError) => Promise<void>;
  },
): Promise<z.output<Rep>> {
  const subject = request.subjectOf(deps.subjects);
  const deadline = Date.now() + options.timeoutMs;
  let unanswered: number | undefined;
  // Each attempt waits with a promise callback, not an async frame: a task in flight holds one of these requests
  // (the Director's to the Evaluator, the Evaluator's to the Handler) for as long as its model call runs.
  const attemptAt = (attempt: number): Promise<z.output<Rep>> => {
    const left = deadline - Date.now();
    if (left <= 0) return Promise.reject(new RemoteError("TIMEOUT", `no answer on '${subject}' within ${options.timeoutMs} ms`));
    let asked: Promise<z.output<Rep>>;
    try {
      const payload: z.input<Req> = typeof body === "function" ? (body as (attempt: number) => z.input<Req>)(attempt) : body;
      asked = ask(deps, request, payload, {
        timeoutMs: left,
        idleTimeoutMs: RESPONDER_IDLE_TIMEOUT_MS,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (err) {
      asked = Promise.reject(err);
    }
    return asked.catch(async (err: unknown) => {
      if (!(err instanceof RemoteError) || !RETRIABLE.has(err.code) || options.signal?.aborted === true) throw err;
      // Nobody there for this long: the role is not running, not restarting.
      if (err.code !== "NO_RESPONDERS") unanswered = undefined;
      else if (Date.now() - (unanswered ??= Date.now()) > NO_RESPONDERS_RETRY_MS) throw err;
      deps.log.warn({ subject, attempt, err: err.message }, "request not answered; asking again");
      const pause = Math.min(2000, 250 * 2 ** Math.min(attempt - 1, 3));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(pause, Math.max(0, deadline - Date.now())));
        function done() {
          clearTimeout(timer);
          options.signal?.removeEventListener("abort", done);
          resolve();
        }
        options.signal?.addEventListener("abort", done, { once: true });
      });
      const signal: AbortSignal | undefined = options.signal;
      if (signal?.aborted === true) throw new RemoteError("UNAVAILABLE", `request on '${subject}' was aborted`);
      await options.beforeRetry?.(attempt + 1, err);
      return attemptAt(attempt + 1);
    });
  };
  return attemptAt(1);
}
