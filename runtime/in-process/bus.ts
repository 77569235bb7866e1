/**
 * In-process {@link Bus} for the embedded single-process mode and fast unit tests. Same semantics as the NATS
 * implementation (wildcards, queue groups, request errors), minus durability. The in-process store and work queue
 * are in store.ts.
 */
import {
  NoRespondersError,
  RequestAbortedError,
  RequestTimeoutError,
  TransportError,
  type BusMessage,
  type BusSubscription,
  type RequestOptions,
  type SubscribeOptions,
} from "../../actors/bus.js";
import { runHandler, type BusErrorHandler, type ClosableBus } from "../bus-handlers.js";
import { copyOf } from "./store.js";

/**
 * Whether `subject` matches `pattern` token by token: `*` matches one token, a final `>` one or more.
 * @example subjectMatches("a.*.c", "a.b.c") // true
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  return tokensMatch(pattern.split("."), subject.split("."));
}

/** {@link subjectMatches} on subjects split into tokens (a subscription splits its pattern once, a message its subject). */
function tokensMatch(p: readonly string[], s: readonly string[]): boolean {
  for (let i = 0; i < p.length; i++) {
    const token = p[i];
    if (token === ">" && i === p.length - 1) return s.length > i;
    if (i >= s.length) return false;
    if (token !== "*" && token !== s[i]) return false;
  }
  return p.length === s.length;
}

interface MemorySub {
  /** The subscribed subject, split into tokens. */
  readonly pattern: readonly string[];
  readonly queue: string | undefined;
  active: boolean;
  deliver(msg: BusMessage): void;
}

/** Options of {@link MemoryBus}. */
export interface MemoryBusOptions {
  /** Receives every error a subscription handler throws or rejects with. */
  onError: BusErrorHandler;
}

/**
 * In-process {@link Bus}. Delivery is always asynchronous (a microtask), so `publish` never runs a
 * handler inside the caller; handlers of one subscription start in arrival order and may overlap
 * when async, as with `NatsBus`. Queue groups hand out messages round-robin.
 */
export class MemoryBus implements ClosableBus {
  readonly description = "in-process";
  readonly #subs = new Set<MemorySub>();
  readonly #turns = new Map<string, number>();
  readonly #onError: BusErrorHandler;
  readonly #subscriptions = new Set<BusSubscription>();
  #closed = false;

  constructor(options: MemoryBusOptions) {
    this.#onError = options.onError;
  }

  publish(subject: string, data: Uint8Array, headers?: Record<string, string>): void {
    this.#checkOpen(subject);
    this.#dispatch(subject, data, headers, undefined);
  }

  subscribe(subject: string, handler: (msg: BusMessage) => void | Promise<void>, options: SubscribeOptions = {}): BusSubscription {
    this.#checkOpen(subject);
    const inFlight = new Set<Promise<void>>();
    const onError = this.#onError;
    const sub: MemorySub = {
      pattern: subject.split("."),
      queue: options.queue,
      active: true,
      deliver(msg) {
        if (!sub.active) return;
        const running = runHandler(handler, msg, (err) => onError(err, msg.subject));
        if (running === undefined) return;
        inFlight.add(running);
        void running.finally(() => inFlight.delete(running));
      },
    };
    this.#subs.add(sub);
    const subscription: BusSubscription = {
      unsubscribe: async () => {
        sub.active = false;
        this.#subs.delete(sub);
        this.#subscriptions.delete(subscription);
        await Promise.all(inFlight);
      },
    };
    this.#subscriptions.add(subscription);
    return subscription;
  }

  request(subject: string, data: Uint8Array, options: RequestOptions): Promise<Uint8Array> {
    const { signal, timeoutMs } = options;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.#checkOpen(subject);
      if (signal?.aborted === true) {
        reject(new RequestAbortedError(`request on '${subject}' aborted`, subject, { cause: signal.reason }));
        return;
      }
      let settled = false;
      const finish = (settle: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        settle();
      };
      const timer = setTimeout(
        () => finish(() => reject(new RequestTimeoutError(`no answer on '${subject}' within ${timeoutMs} ms`, subject))),
        timeoutMs,
      );
      const onAbort = () =>
        finish(() => reject(new RequestAbortedError(`request on '${subject}' aborted`, subject, { cause: signal?.reason })));
      signal?.addEventListener("abort", onAbort, { once: true });
      const receivers = this.#dispatch(subject, data, options.headers, (answer) => finish(() => resolve(copyOf(answer))));
      if (receivers === 0) {
        // NATS reports no responders asynchronously too (a 503 status reply from the server).
        queueMicrotask(() => finish(() => reject(new NoRespondersError(`no responders on '${subject}'`, subject))));
      }
    });
  }

  /** Resolves after every delivery queued so far has been handed to its handler. */
  flush(): Promise<void> {
    return new Promise((resolve) => setImmediate(resolve));
  }

  /** Stops every subscription and waits for handlers in progress; later calls throw {@link TransportError}. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((s) => s.unsubscribe()));
  }

  /** Hands a copy of the message to each plain subscriber and to one member of each queue group; returns how many. */
  #dispatch(
    subject: string,
    data: Uint8Array,
    headers: Record<string, string> | undefined,
    reply: ((answer: Uint8Array) => void) | undefined,
  ): number {
    const targets: MemorySub[] = [];
    const groups = new Map<string, MemorySub[]>();
    const tokens = subject.split(".");
    for (const sub of this.#subs) {
      if (!tokensMatch(sub.pattern, tokens)) continue;
      if (sub.queue === undefined) {
        targets.push(sub);
      } else {
        const members = groups.get(sub.queue) ?? [];
        members.push(sub);
        groups.set(sub.queue, members);
      }
    }
    for (const [queue, members] of groups) {
      const turn = this.#turns.get(queue) ?? 0;
      this.#turns.set(queue, turn + 1);
      const chosen = members[turn % members.length];
      if (chosen !== undefined) targets.push(chosen);
    }
    const headerMap = headers !== undefined ? new Map(Object.entries(headers)) : undefined;
    for (const target of targets) {
      const msg: BusMessage = {
        subject,
        data: copyOf(data),
        ...(headerMap !== undefined ? { headers: new Map(headerMap) } : {}),
        expectsReply: reply !== undefined,
        respond: (answer) => {
          if (reply === undefined) return false;
          reply(answer);
          return true;
        },
      };
      queueMicrotask(() => target.deliver(msg));
    }
    return targets.length;
  }

  #checkOpen(subject: string): void {
    if (this.#closed) throw new TransportError("in-process bus is closed", subject);
    if (subject.length === 0 || /\s/.test(subject)) throw new TransportError(`illegal subject '${subject}'`, subject);
  }
}

export { MemoryTaskStore, MemoryWorkQueue, type MemoryWorkQueueOptions } from "./store.js";
