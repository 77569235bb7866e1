/**
 * Request/reply plumbing shared by the actor shells: decode at the edge, answer bad input with an error reply,
 * bound concurrency, and never let an exception escape a subscription.
 */
import type { z } from "zod";
import {
  decode,
  decodeJson,
  encodeJson,
  ErrorReply,
  errorReply,
  validate,
  type ErrorCode,
} from "../protocol/index.js";
import type { BusMessage, BusSubscription } from "./bus.js";
import { KEEPALIVE_HEADER, NoRespondersError, RequestAbortedError, RequestTimeoutError, ResponderSilentError } from "./bus.js";
import { messageOf, type ActorDeps } from "./deps.js";
import { Semaphore } from "./limit.js";

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

/** Options of {@link serve}. */
export interface ServeOptions<S extends z.ZodType> {
  subject: string;
  queue?: string;
  schema: S;
  /** At most this many requests are handled at once by this subscription. */
  concurrency: number;
  /**
   * Also take requests from roles of this process directly, as calls (`ActorDeps.local`, actors/local.ts): for
   * requests whose schema has no defaults or transforms, since a call skips the decoding that applies them.
   */
  local?: boolean;
  /**
   * The body is not read: the answer depends on the subject alone (`get`, `cancel`, `list`), so any body, JSON or
   * not, empty or not, is a request; `handle` gets `undefined`.
   */
  anyBody?: boolean;
  /** Produces the reply body. A thrown {@link RemoteError} keeps its code; anything else is `INTERNAL`. */
  handle(request: z.infer<S>, msg: BusMessage): Promise<unknown>;
}

/** Subscribes to a request subject with validation and error replies. */
export function serve<S extends z.ZodType>(deps: ActorDeps, options: ServeOptions<S>): BusSubscription {
  const slots = new Semaphore(options.concurrency);
  const subscribeOptions = options.queue === undefined ? {} : { queue: options.queue };
  const failure = (subject: string, err: unknown) => {
    deps.log.error({ subject, err: messageOf(err) }, "request failed");
    return err instanceof RemoteError ? err : new RemoteError("INTERNAL", messageOf(err), { cause: err });
  };
  const unregister =
    options.local === true && deps.local !== undefined
      ? deps.local.register(options.subject, slots, (request) =>
          options.handle(request as z.infer<S>, localMessage(options.subject)).catch((err: unknown) => Promise.reject(failure(options.subject, err))),
        )
      : undefined;
  const subscription = deps.bus.subscribe(
    options.subject,
    async (msg) => {
      let decoded: ReturnType<typeof decode<S>>;
      try {
        decoded = options.anyBody === true ? { ok: true, value: undefined as z.infer<S> } : decode(options.schema, msg.data);
      } catch (err) {
        // decode returns its refusals; should it throw all the same, the sender still gets an answer.
        msg.respond(encodeJson(errorReply("INVALID_MESSAGE", `message could not be decoded: ${messageOf(err)}`)));
        return;
      }
      if (!decoded.ok) {
        deps.log.warn({ subject: msg.subject, err: decoded.error.message }, "rejected message");
        msg.respond(encodeJson(errorReply(decoded.error.kind === "too_large" ? "PAYLOAD_TOO_LARGE" : "INVALID_MESSAGE", decoded.error.message, { details: decoded.error.issues })));
        return;
      }
      const keepalive = keepaliveTimer(msg);
      try {
        await slots.run(async () => {
          try {
            const reply = await options.handle(decoded.value, msg);
            clearInterval(keepalive);
            msg.respond(encodeJson(reply));
          } catch (err) {
            clearInterval(keepalive);
            const remote = failure(msg.subject, err);
            msg.respond(encodeJson(errorReply(remote.code, remote.message)));
          }
        });
      } finally {
        clearInterval(keepalive);
      }
    },
    subscribeOptions,
  );
  return {
    unsubscribe() {
      unregister?.();
      return subscription.unsubscribe();
    },
  };
}

/** The longest keepalive period a sender may ask for, and the shortest: a timer can hold no more than 2^31-1 ms. */
const KEEPALIVE_MAX_MS = 60_000;
const KEEPALIVE_MIN_MS = 50;

/**
 * The sender asked for signs of life while the request waits for a slot and runs (see KEEPALIVE_HEADER): a period
 * in milliseconds, clamped (Node would run a timer of more than 2^31-1 ms every millisecond).
 */
function keepaliveTimer(msg: BusMessage): ReturnType<typeof setInterval> | undefined {
  const every = Number(msg.headers?.get(KEEPALIVE_HEADER));
  if (!Number.isFinite(every) || every <= 0) return undefined;
  return setInterval(() => msg.respond(new Uint8Array(0)), Math.min(KEEPALIVE_MAX_MS, Math.max(KEEPALIVE_MIN_MS, every)));
}

/** Throws the {@link RemoteError} of an answer that is an error reply. */
function throwIfErrorReply(answer: unknown): void {
  if (typeof answer !== "object" || answer === null || !("error" in answer)) return;
  const remote = ErrorReply.safeParse(answer);
  if (remote.success) throw new RemoteError(remote.data.error.code, remote.data.error.message);
}

/** What a handler sees as the message of a request from its own process (it has no bytes and wants no answer). */
function localMessage(subject: string): BusMessage {
  return { subject, data: new Uint8Array(0), expectsReply: false, respond: () => false };
}

/**
 * A local call's answer, or its timeout, or the caller's abort, as over NATS: the answer, should it still come, is
 * dropped (the work goes on until the task's cancellation reaches it, as it would in another process).
 */
function localAnswer<T>(subject: string, running: Promise<T>, options: { timeoutMs: number; signal?: AbortSignal | undefined }): Promise<T> {
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
 * Sends a request and decodes the answer with `replySchema`.
 * @throws {RemoteError} with the remote code, or `NO_RESPONDERS` / `TIMEOUT` for transport failures.
 */
export async function ask<R extends z.ZodType>(
  deps: ActorDeps,
  subject: string,
  body: unknown,
  replySchema: R,
  options: { timeoutMs: number; signal?: AbortSignal; idleTimeoutMs?: number },
): Promise<z.infer<R>> {
  if (options.signal?.aborted !== true) {
    const local = deps.local?.dispatch(subject, body);
    if (local !== undefined) {
      // A handler may answer with an error reply instead of throwing; over NATS that is an error too.
      return localAnswer(subject, local, options).then((answer) => (throwIfErrorReply(answer), answer as z.infer<R>));
    }
  }
  let bytes: Uint8Array;
  try {
    bytes = await deps.bus.request(subject, encodeJson(body), options);
  } catch (err) {
    if (err instanceof NoRespondersError) throw new RemoteError("NO_RESPONDERS", `no responders on '${subject}': is the role running?`, { cause: err });
    if (err instanceof RequestTimeoutError) throw new RemoteError("TIMEOUT", `no answer on '${subject}' within ${options.timeoutMs} ms`, { cause: err });
    if (err instanceof RequestAbortedError) throw new RemoteError("UNAVAILABLE", `request on '${subject}' was aborted`, { cause: err });
    // The responder stopped sending keepalives: gone, or its answer was lost in a NATS restart.
    if (err instanceof ResponderSilentError) throw new RemoteError("UNAVAILABLE", err.message, { cause: err });
    throw err;
  }
  const json = decodeJson(bytes);
  if (!json.ok) throw new RemoteError("INVALID_MESSAGE", `answer on '${subject}': ${json.error.message}`);
  throwIfErrorReply(json.value);
  const reply = validate(replySchema, json.value);
  if (!reply.ok) throw new RemoteError("INVALID_MESSAGE", `answer on '${subject}': ${reply.error.message}`);
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
export async function askRetrying<R extends z.ZodType>(
  deps: ActorDeps,
  subject: string,
  body: unknown | ((attempt: number) => unknown),
  replySchema: R,
  options: {
    timeoutMs: number;
    signal?: AbortSignal;
    /** Runs before each new attempt; throws to stop asking (e.g. the caller no longer owns the work). */
    beforeRetry?: (attempt: number, err: RemoteError) => Promise<void>;
  },
): Promise<z.infer<R>> {
  const deadline = Date.now() + options.timeoutMs;
  let unanswered: number | undefined;
  for (let attempt = 1; ; attempt++) {
    const left = deadline - Date.now();
    if (left <= 0) throw new RemoteError("TIMEOUT", `no answer on '${subject}' within ${options.timeoutMs} ms`);
    try {
      const payload = typeof body === "function" ? (body as (attempt: number) => unknown)(attempt) : body;
      return await ask(deps, subject, payload, replySchema, {
        timeoutMs: left,
        idleTimeoutMs: RESPONDER_IDLE_TIMEOUT_MS,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (err) {
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
    }
  }
}
