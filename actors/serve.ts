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
import { NoRespondersError, RequestAbortedError, RequestTimeoutError } from "./bus.js";
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
  /** Produces the reply body. A thrown {@link RemoteError} keeps its code; anything else is `INTERNAL`. */
  handle(request: z.infer<S>, msg: BusMessage): Promise<unknown>;
}

/** Subscribes to a request subject with validation and error replies. */
export function serve<S extends z.ZodType>(deps: ActorDeps, options: ServeOptions<S>): BusSubscription {
  const slots = new Semaphore(options.concurrency);
  const subscribeOptions = options.queue === undefined ? {} : { queue: options.queue };
  return deps.bus.subscribe(
    options.subject,
    async (msg) => {
      const decoded = decode(options.schema, msg.data);
      if (!decoded.ok) {
        deps.log.warn({ subject: msg.subject, err: decoded.error.message }, "rejected message");
        msg.respond(encodeJson(errorReply(decoded.error.kind === "too_large" ? "PAYLOAD_TOO_LARGE" : "INVALID_MESSAGE", decoded.error.message, { details: decoded.error.issues })));
        return;
      }
      await slots.run(async () => {
        try {
          const reply = await options.handle(decoded.value, msg);
          msg.respond(encodeJson(reply));
        } catch (err) {
          const code: ErrorCode = err instanceof RemoteError ? err.code : "INTERNAL";
          deps.log.error({ subject: msg.subject, err: messageOf(err) }, "request failed");
          msg.respond(encodeJson(errorReply(code, messageOf(err))));
        }
      });
    },
    subscribeOptions,
  );
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
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<z.infer<R>> {
  let bytes: Uint8Array;
  try {
    bytes = await deps.bus.request(subject, encodeJson(body), options);
  } catch (err) {
    if (err instanceof NoRespondersError) throw new RemoteError("NO_RESPONDERS", `no responders on '${subject}': is the role running?`, { cause: err });
    if (err instanceof RequestTimeoutError) throw new RemoteError("TIMEOUT", `no answer on '${subject}' within ${options.timeoutMs} ms`, { cause: err });
    if (err instanceof RequestAbortedError) throw new RemoteError("UNAVAILABLE", `request on '${subject}' was aborted`, { cause: err });
    throw err;
  }
  const json = decodeJson(bytes);
  if (!json.ok) throw new RemoteError("INVALID_MESSAGE", `answer on '${subject}': ${json.error.message}`);
  const remote = ErrorReply.safeParse(json.value);
  if (remote.success) throw new RemoteError(remote.data.error.code, remote.data.error.message);
  const reply = validate(replySchema, json.value);
  if (!reply.ok) throw new RemoteError("INVALID_MESSAGE", `answer on '${subject}': ${reply.error.message}`);
  return reply.value;
}
