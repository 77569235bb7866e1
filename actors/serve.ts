/**
 * The responder side of request/reply, shared by the actor shells: {@link serve} a request declared in
 * protocol/requests.ts, so the handler is typed by its schemas; decode at the edge, answer bad input with an error
 * reply, bound concurrency, and never let an exception escape a subscription. The requester side is actors/ask.ts.
 */
import type { z } from "zod";
import { decode, encodeJson, errorReply, validate, type Decoded, type ErrorReply, type RequestDefinition } from "../protocol/index.js";
import { RemoteError } from "./ask.js";
import type { BusMessage, BusSubscription } from "./bus.js";
import { KEEPALIVE_HEADER, MAX_STORED_VALUE_BYTES } from "./bus.js";
import { messageOf, type ActorDeps } from "./deps.js";
import { Semaphore, type Ticket } from "./limit.js";
import { inSpan, SpanKind, type Attributes } from "./tracing.js";

/** Options of {@link serve}. */
export interface ServeOptions<Req extends z.ZodType, Rep extends z.ZodType> {
  queue?: string;
  /**
   * At most this many requests are handled at once by this subscription; or the slots they run in, when someone else
   * reads them too (a Handler reports its free ones to its peers).
   */
  concurrency: number | Semaphore;
  /**
   * A request that finds every slot taken may be passed on to a peer with a free one (see {@link Overflow});
   * requests sent to `overflow.direct` are served here as well.
   */
  overflow?: Overflow;
  /**
   * Also take requests from roles of this process directly, as calls (`ActorDeps.local`, actors/local.ts). The call
   * is validated with the request schema here as a message would be, and its answer with the reply schema by `ask`.
   * Only for requests on a fixed subject (the local responders are found by the subject asked).
   */
  local?: boolean;
  /**
   * Produces the answer: the reply schema's input, or an error reply. A thrown {@link RemoteError} keeps its code;
   * anything else is `INTERNAL`. A request whose body is not read (`anyBody`) gets the request schema's value of `{}`.
   */
  handle(request: z.output<Req>, msg: BusMessage): Promise<z.input<Rep> | ErrorReply>;
}

/** Where a responder whose slots are all taken passes requests on (actors/handler/peers.ts). */
export interface Overflow {
  /** This process's own subject of the request, served without a queue group: where peers pass requests to it. */
  readonly direct: string;
  /** Passes `msg` on to a peer with a free slot and returns true, or returns false (none known: it waits here). */
  pass(msg: BusMessage): boolean;
  /**
   * `msg` waits here for a slot (`ticket`): should a peer report a free one meanwhile, the overflow cancels the ticket
   * and passes `msg` on to it. Returns the function that ends the wait's registration (the slot was granted).
   */
  waiting(msg: BusMessage, ticket: Ticket): () => void;
}

/** Subscribes to the subject of `definition` (its wildcard, for requests about one task or goal) with validation and error replies. */
export function serve<Req extends z.ZodType, Rep extends z.ZodType, Key extends string[]>(
  deps: ActorDeps,
  definition: RequestDefinition<Req, Rep, Key>,
  // A request about one task or goal is asked on its own subject, never the wildcard served: no local dispatch.
  options: ServeOptions<Req, Rep> & (Key extends [] ? unknown : { local?: false }),
): BusSubscription {
  const subject = definition.servedOn(deps.subjects);
  const slots = options.concurrency instanceof Semaphore ? options.concurrency : new Semaphore(options.concurrency);
  // The work of a role (a queue group `<root>.<role>`) is metered: requests running now, and how long each took.
  const role = options.queue?.slice(deps.subjects.root.length + 1);
  if (role !== undefined) deps.metrics?.inflight(role, () => slots.inUse);
  const handle: typeof options.handle =
    role === undefined || deps.metrics === undefined
      ? options.handle
      : async (request, msg) => {
          const started = performance.now();
          try {
            return await options.handle(request, msg);
          } finally {
            deps.metrics?.step(definition.name, (performance.now() - started) / 1000);
          }
        };
  const subscribeOptions = options.queue === undefined ? {} : { queue: options.queue };
  const failure = (subject: string, err: unknown) => {
    deps.log.error({ subject, err: messageOf(err) }, "request failed");
    return err instanceof RemoteError ? err : new RemoteError("INTERNAL", messageOf(err), { cause: err });
  };
  const refused = (subject: string, decoded: Decoded<unknown> & { ok: false }) => {
    deps.log.warn({ subject, err: decoded.error.message }, "rejected message");
    return errorReply(decoded.error.kind === "too_large" ? "PAYLOAD_TOO_LARGE" : "INVALID_MESSAGE", decoded.error.message, {
      details: decoded.error.issues,
    });
  };
  const unregister =
    options.local === true && deps.local !== undefined
      ? deps.local.register(subject, slots, (request) => {
          // A call skips the decoding: validate it as a message would be (defaults and transforms applied, refinements
          // checked), unless the definition takes it as it is (`localAsIs`: it never left the process).
          const valid = definition.localAsIs
            ? ({ ok: true, value: request as z.output<Req> } as const)
            : validate(definition.request, definition.anyBody ? {} : request);
          if (!valid.ok) return Promise.resolve(refused(subject, valid));
          return traced(definition.name, undefined, valid.value, () => handle(valid.value, localMessage(subject))).catch((err: unknown) =>
            Promise.reject(failure(subject, err)),
          );
        })
      : undefined;
  const { overflow } = options;
  const onMessage = async (msg: BusMessage): Promise<void> => {
    // Every slot taken: a peer with a free one takes it, unless a peer passed it here already.
    if (overflow !== undefined && slots.free === 0 && overflow.pass(msg)) return;
    let decoded: Decoded<z.output<Req>>;
    try {
      decoded = definition.anyBody ? validate(definition.request, {}) : decode(definition.request, msg.data, MAX_STORED_VALUE_BYTES);
    } catch (err) {
      // decode returns its refusals; should it throw all the same, the sender still gets an answer.
      msg.respond(encodeJson(errorReply("INVALID_MESSAGE", `message could not be decoded: ${messageOf(err)}`)));
      return;
    }
    if (!decoded.ok) {
      msg.respond(encodeJson(refused(msg.subject, decoded)));
      return;
    }
    const keepalive = keepaliveTimer(msg);
    const work = async () => {
      try {
        const reply = await traced(definition.name, msg.headers ?? undefined, decoded.value, () => handle(decoded.value, msg));
        clearInterval(keepalive);
        msg.respond(encodeJson(reply));
      } catch (err) {
        clearInterval(keepalive);
        const remote = failure(msg.subject, err);
        msg.respond(encodeJson(errorReply(remote.code, remote.message)));
      }
    };
    try {
      if (overflow === undefined) return await slots.run(work);
      // While it waits for a slot here, a peer that frees one may take it (the overflow cancels the wait first).
      const ticket = slots.ticket();
      const leave = overflow.waiting(msg, ticket);
      const granted = await ticket.ready;
      leave();
      if (!granted) return;
      try {
        await work();
      } finally {
        ticket.release();
      }
    } finally {
      clearInterval(keepalive);
    }
  };
  const subscriptions = [
    deps.bus.subscribe(subject, onMessage, subscribeOptions),
    ...(overflow === undefined ? [] : [deps.bus.subscribe(overflow.direct, onMessage)]),
  ];
  return {
    async unsubscribe() {
      unregister?.();
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
    },
  };
}

/**
 * Runs a request's handler in a span named after the request, under the asker's trace: its headers' `traceparent`, or
 * (a local call) the asker's active span.
 */
function traced<T>(name: string, headers: ReadonlyMap<string, string> | undefined, request: unknown, handle: () => Promise<T>): Promise<T> {
  return inSpan(name, { parent: headers, kind: SpanKind.SERVER, attributes: requestAttributes(request) }, handle);
}

/** The task and node a request is about, as span attributes. */
function requestAttributes(request: unknown): Attributes {
  if (typeof request !== "object" || request === null) return {};
  const { taskId, nodePath } = request as { taskId?: unknown; nodePath?: unknown };
  const attributes: Attributes = {};
  if (typeof taskId === "string") attributes["dirigent.task_id"] = taskId;
  if (typeof nodePath === "string") attributes["dirigent.node_path"] = nodePath;
  return attributes;
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

/** What a handler sees as the message of a request from its own process (it has no bytes and wants no answer). */
function localMessage(subject: string): BusMessage {
  return { subject, data: new Uint8Array(0), expectsReply: false, respond: () => false };
}

/**
 * Answers `msg` with `reply`, typed by `definition`: for responders that subscribe on their own (a raw XML body, one
 * task's input, an answer from every process) rather than through {@link serve}.
 */
export function respond<Rep extends z.ZodType, Key extends string[]>(
  msg: BusMessage,
  _definition: RequestDefinition<z.ZodType, Rep, Key>,
  reply: z.input<Rep> | ErrorReply,
): boolean {
  return msg.respond(encodeJson(reply));
}
