/**
 * The {@link Bus} over a NATS connection, and the one place the runtime opens NATS connections.
 * NATS errors are mapped to the transport errors of `actors/bus.ts`, with the NATS error as `cause`.
 */
import {
  ClosedConnectionError,
  connect,
  credsAuthenticator,
  DrainingConnectionError,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import {
  KEEPALIVE_HEADER,
  NoRespondersError,
  RequestAbortedError,
  RequestTimeoutError,
  ResponderSilentError,
  TransportError,
  type BusMessage,
  type BusSubscription,
  type RequestOptions,
  type SubscribeOptions,
  type TaskStore,
} from "../../actors/bus.js";
import { runHandler, type BusErrorHandler, type ClosableBus } from "../bus-handlers.js";
import { attachWire, wireOf, type NatsWire } from "./wire.js";
import { inboxPrefixFor } from "./conf/permissions.js";
import { BODY_HEADER, chunkBytes, loadBody, outgoing, withBody, type Outgoing } from "./chunks.js";
import { DEFAULT_INBOX_PREFIX } from "../../protocol/index.js";

export type { NatsConnection } from "@nats-io/transport-node";

/** Options of {@link connectNats}. */
export interface ConnectNatsOptions {
  /** Server URL(s), e.g. `nats://127.0.0.1:4222`. */
  servers: string | string[];
  /** Connection name shown by the server's monitoring (`/connz`), e.g. `dirigent-director`. */
  name: string;
  /** User name, with {@link pass}. */
  user?: string;
  /** Password, with {@link user}. */
  pass?: string;
  /** Authentication token. */
  token?: string;
  /** Contents of a `.creds` file (JWT and NKey seed; needs a server in operator mode). */
  creds?: Uint8Array;
  /** Prefix of this connection's reply subjects (default: `_INBOX_<user>` with a user, see `inboxPrefixFor`, else `_INBOX`). */
  inboxPrefix?: string;
  /** Wait between reconnect attempts; a random jitter of up to a quarter of it is added. Default 1000 ms. */
  reconnectTimeWaitMs?: number;
  /** Timeout of the first connect. Default 5000 ms. */
  timeoutMs?: number;
  /** Reconnect attempts per server after a loss before the connection closes for good; -1 (default): forever. */
  maxReconnectAttempts?: number;
}

/**
 * Opens a named connection that reconnects forever once established (unless `maxReconnectAttempts` says otherwise;
 * the server refusing the credentials twice in a row closes it too); the first connect fails fast when no server is
 * reachable.
 * @example
 * const nc = await connectNats({ servers: "nats://127.0.0.1:4222", name: "dirigent" });
 * const bus = new NatsBus(nc, { onError: (err, subject) => log.error({ err, subject }) });
 */
export async function connectNats(opts: ConnectNatsOptions): Promise<NatsConnection> {
  const wait = opts.reconnectTimeWaitMs ?? 1000;
  // Each user reads replies in inboxes of its own: the permissions give no user the shared `_INBOX.>`.
  const inboxPrefix = opts.inboxPrefix ?? inboxPrefixFor(undefined, opts.user);
  const nc = await connect({
    // `a,b,c` (NATS_URL, --nats): the nodes of a cluster; the client picks one and fails over to the others.
    servers:
      typeof opts.servers === "string"
        ? opts.servers
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "")
        : opts.servers,
    name: opts.name,
    maxReconnectAttempts: opts.maxReconnectAttempts ?? -1,
    reconnectTimeWait: wait,
    reconnectJitter: Math.ceil(wait / 4),
    waitOnFirstConnect: false,
    timeout: opts.timeoutMs ?? 5000,
    // No Error (with its stack capture) allocated up front for every request and KV call just in case it fails:
    // the same errors are thrown, with a shorter stack. It cost more CPU than anything else in the client.
    noAsyncTraces: true,
    ...(opts.user !== undefined ? { user: opts.user } : {}),
    ...(opts.pass !== undefined ? { pass: opts.pass } : {}),
    ...(opts.token !== undefined ? { token: opts.token } : {}),
    ...(opts.creds !== undefined ? { authenticator: credsAuthenticator(opts.creds) } : {}),
    ...(inboxPrefix !== DEFAULT_INBOX_PREFIX ? { inboxPrefix } : {}),
  });
  // The connection's own request/reply state (runtime/nats/wire.ts), shared by its bus, stores and work queue.
  attachWire(nc, inboxPrefix);
  return nc;
}

/** Options of {@link NatsBus}. */
export interface NatsBusOptions {
  /** Receives every error a subscription handler throws or rejects with. */
  onError: BusErrorHandler;
  /** Where a request or answer larger than one message has its body, sent by reference (runtime/nats/chunks.ts). */
  bodies?: TaskStore;
}

/**
 * {@link Bus} over NATS core. Handlers of one subscription are started in arrival order and may
 * overlap when they are async; `unsubscribe` waits for those in progress.
 */
export class NatsBus implements ClosableBus {
  readonly #nc: NatsConnection;
  readonly #wire: NatsWire;
  readonly #onError: BusErrorHandler;
  readonly #bodies: TaskStore | undefined;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #reconnectListeners = new Set<() => void>();
  #watchingStatus = false;

  /** The server's `max_payload` less room for subject and headers (runtime/nats/chunks.ts). */
  get maxMessageBytes(): number {
    return chunkBytes(this.#nc.info?.max_payload ?? 1024 * 1024, -1);
  }

  /** Takes ownership of `nc`: {@link close} drains it. */
  constructor(nc: NatsConnection, options: NatsBusOptions) {
    this.#nc = nc;
    this.#wire = wireOf(nc);
    this.#onError = options.onError;
    this.#bodies = options.bodies;
  }

  /** `data` as sent: a body larger than one message is stored, and the message carries its key in a header. */
  #outgoing(data: Uint8Array, headers: Record<string, string> | undefined): Promise<Outgoing> {
    return outgoing(this.#bodies, this.maxMessageBytes, data, headers);
  }

  /** The body of a received message: read back from the bodies bucket when it was sent by reference. */
  #incoming(msg: Msg): Uint8Array | Promise<Uint8Array> {
    const reference = msg.headers?.get(BODY_HEADER);
    return reference ? loadBody(this.#bodies, reference, msg.subject) : msg.data;
  }

  /** The underlying connection, for JetStream (`openTaskStore`, `openWorkQueue`). */
  get connection(): NatsConnection {
    return this.#nc;
  }

  /** The server currently connected to, e.g. `nats://127.0.0.1:4222`. */
  get description(): string {
    return `nats://${this.#nc.getServer()}`;
  }

  /** Subscription handlers running now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Resolves when the connection is closed for good, with the reason (e.g. an authorization error) when there was one. */
  async closed(): Promise<Error | undefined> {
    return (await this.#nc.closed()) ?? undefined;
  }

  /** Whether the connection is closed for good. */
  isClosed(): boolean {
    return this.#nc.isClosed();
  }

  /** Drops the connection and connects again; every subscription is sent to the server again. */
  reconnect(): Promise<void> {
    return this.#nc.reconnect();
  }

  onReconnect(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    if (!this.#watchingStatus) {
      this.#watchingStatus = true;
      // The status iterator ends when the connection closes.
      void (async () => {
        for await (const status of this.#nc.status()) {
          if (status.type === "reconnect") for (const notify of [...this.#reconnectListeners]) notify();
        }
      })().catch(() => undefined);
    }
    return () => void this.#reconnectListeners.delete(listener);
  }

  publish(subject: string, data: Uint8Array, headers?: Record<string, string>): void {
    try {
      this.#wire.publish(subject, data, headers !== undefined ? { headers: toMsgHdrs(headers) } : undefined);
    } catch (err) {
      throw mapClosed(err, subject);
    }
  }

  subscribe(subject: string, handler: (msg: BusMessage) => void | Promise<void>, options: SubscribeOptions = {}): BusSubscription {
    const inFlight = new Set<Promise<void>>();
    const all = this.#inFlight;
    const onError = this.#onError;
    let sub: Subscription;
    try {
      sub = this.#nc.subscribe(subject, {
        ...(options.queue !== undefined ? { queue: options.queue } : {}),
        callback: (err, msg) => {
          if (err !== null) {
            onError(err, subject);
            return;
          }
          const message = this.#toBusMessage(msg);
          const body = this.#incoming(msg);
          const run = body instanceof Promise ? withBody(handler, body) : handler;
          const running = runHandler(run, message, (e) => onError(e, msg.subject));
          if (running === undefined) return;
          inFlight.add(running);
          all.add(running);
          void running.finally(() => {
            inFlight.delete(running);
            all.delete(running);
          });
        },
      });
    } catch (err) {
      throw mapClosed(err, subject);
    }
    return {
      async unsubscribe() {
        // drain() also hands over messages already received; it rejects once the connection is closed.
        await sub.drain().catch(() => undefined);
        await Promise.all(inFlight);
      },
    };
  }

  async request(subject: string, body: Uint8Array, options: RequestOptions): Promise<Uint8Array> {
    const { signal, timeoutMs } = options;
    if (signal?.aborted === true) throw aborted(subject, signal);
    const { data, headers } = await this.#outgoing(body, options.headers);
    if (options.idleTimeoutMs !== undefined)
      return this.#requestWithKeepalives(subject, data, {
        ...options,
        ...(headers ? { headers } : {}),
        idleTimeoutMs: options.idleTimeoutMs,
      });
    const sent = headers !== undefined ? { timeoutMs, headers: toMsgHdrs(headers) } : { timeoutMs };
    const reply = this.#wire.request(subject, data, sent).then(
      (msg) => this.#incoming(msg),
      (err: unknown) => Promise.reject(mapClosed(err, subject)),
    );
    if (signal === undefined) return reply;
    let onAbort: (() => void) | undefined;
    const abort = new Promise<never>((_, reject) => {
      onAbort = () => reject(aborted(subject, signal));
      signal.addEventListener("abort", onAbort, { once: true });
    });
    // The answer may still arrive (or time out) after an abort; it is dropped.
    reply.catch(() => undefined);
    try {
      return await Promise.race([reply, abort]);
    } finally {
      if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * A request whose responder sends keepalives (empty bodies) while it works: the first non-empty message is the
   * answer; silence for `idleTimeoutMs` means the responder is gone (its process died, or the connection broke and
   * the answer was lost), and the caller may ask again.
   */
  #requestWithKeepalives(subject: string, data: Uint8Array, options: RequestOptions & { idleTimeoutMs: number }): Promise<Uint8Array> {
    const { timeoutMs, idleTimeoutMs, signal } = options;
    const h = toMsgHdrs(options.headers ?? {});
    h.set(KEEPALIVE_HEADER, String(Math.max(100, Math.floor(idleTimeoutMs / 5))));
    return new Promise<Uint8Array>((resolve, reject) => {
      let cancel: () => void = () => undefined;
      let idleTimer: ReturnType<typeof setTimeout> | undefined;
      let settled = false;
      const finish = (err: unknown, answer?: Uint8Array) => {
        if (settled) return;
        settled = true;
        cancel();
        clearTimeout(idleTimer);
        clearTimeout(totalTimer);
        signal?.removeEventListener("abort", onAbort);
        if (err === undefined) resolve(answer as Uint8Array);
        else reject(err);
      };
      const armIdle = () => {
        clearTimeout(idleTimer);
        idleTimer = setTimeout(
          () =>
            finish(
              new ResponderSilentError(
                `no answer and no keepalive on '${subject}' for ${idleTimeoutMs} ms: the responder stopped or the connection broke`,
                subject,
              ),
            ),
          idleTimeoutMs,
        );
      };
      const onAbort = () => finish(aborted(subject, signal as AbortSignal));
      signal?.addEventListener("abort", onAbort, { once: true });
      const totalTimer = setTimeout(
        () => finish(new RequestTimeoutError(`no answer on '${subject}' within ${timeoutMs} ms`, subject)),
        timeoutMs,
      );
      try {
        cancel = this.#wire.requestMany(
          subject,
          data,
          (msg) => {
            if (msg.headers?.get(BODY_HEADER)) {
              const body = this.#incoming(msg) as Promise<Uint8Array>;
              return void body.then((answer) => finish(undefined, answer), finish);
            }
            if (msg.data.length > 0) return finish(undefined, msg.data);
            if (msg.headers?.code === 503) return finish(new NoRespondersError(`no responders on '${subject}'`, subject));
            armIdle(); // a keepalive
          },
          h,
        );
      } catch (err) {
        finish(mapClosed(err, subject));
        return;
      }
      armIdle();
    });
  }

  flush(): Promise<void> {
    this.#wire.release();
    return this.#nc.flush();
  }

  /**
   * Drains the connection (subscriptions get what was already sent to them, pending publishes are
   * flushed, then it closes) and waits for handlers still running.
   */
  async close(): Promise<void> {
    this.#wire.release();
    if (this.#nc.isDraining()) await this.#nc.closed();
    else if (!this.#nc.isClosed()) await this.#nc.drain();
    await Promise.all(this.#inFlight);
  }

  /** `msg` for a handler; its answer, larger than one message, is sent by reference. */
  #toBusMessage(msg: Msg): BusMessage {
    const wire = this.#wire;
    return toBusMessage(msg, wire, (data) => {
      if (this.#bodies === undefined || data.byteLength <= this.maxMessageBytes) return wire.respond(msg, data);
      if (!msg.reply) return false;
      void this.#outgoing(data, undefined).then(
        (sent) => wire.respond(msg, sent.data, sent.headers ? { headers: toMsgHdrs(sent.headers) } : undefined),
        (err: unknown) => this.#onError(err, msg.subject),
      );
      return true;
    });
  }
}

function toMsgHdrs(values: Record<string, string>): MsgHdrs {
  const h = natsHeaders();
  for (const [key, value] of Object.entries(values)) h.set(key, value);
  return h;
}

function toBusMessage(msg: Msg, wire: NatsWire, respond: (data: Uint8Array) => boolean): BusMessage {
  let headers: Map<string, string> | undefined;
  if (msg.headers !== undefined) {
    headers = new Map();
    for (const [key, values] of msg.headers) {
      const first = values[0];
      if (first !== undefined) headers.set(key, first);
    }
  }
  return {
    subject: msg.subject,
    data: msg.data,
    ...(headers !== undefined ? { headers } : {}),
    expectsReply: msg.reply !== undefined && msg.reply.length > 0,
    respond,
    forward: (subject, added) => {
      const h = natsHeaders();
      for (const [key, values] of msg.headers ?? []) for (const value of values) h.append(key, value);
      for (const [key, value] of Object.entries(added)) h.set(key, value);
      wire.publish(subject, msg.data, { headers: h, ...(msg.reply ? { reply: msg.reply } : {}) });
    },
  };
}

function mapClosed(err: unknown, subject: string): unknown {
  if (err instanceof ClosedConnectionError || err instanceof DrainingConnectionError) {
    return new TransportError(`connection ${err instanceof ClosedConnectionError ? "closed" : "draining"}`, subject, { cause: err });
  }
  return err;
}

function aborted(subject: string, signal: AbortSignal): RequestAbortedError {
  return new RequestAbortedError(`request on '${subject}' aborted`, subject, { cause: signal.reason });
}
