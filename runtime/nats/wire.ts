/**
 * Request/reply and JetStream writes on one NATS connection through a single reply subscription of its own
 * (`<inbox prefix>.<nuid>.<token>`), shared by the connection's bus, task stores and work queue. Each request's token
 * is crypto-random: one who sees a reply subject (a tool service answering its call) cannot tell the next ones.
 *
 * Why not `nc.request` and the JetStream client: each of their requests allocates errors (with a stack) and
 * deferreds whether or not it fails, and the JetStream client wraps every publish in more of the same. On the task
 * path, where every task makes a handful of these calls, that was the largest cost in the process (BENCHMARKS.md).
 * Here a request is one publish with a reply subject, one map entry and one timer; a JetStream write is a request
 * whose answer is the stream's JSON acknowledgement.
 *
 * Every write of the connection's bus, stores and work queue goes through its wire, in the order made. A write that
 * nobody waits for (a task's event, where the events stream keeps one connection's order) may be held for the next
 * one, at most {@link WITH_NEXT_MS}, and goes out just before it: one socket write and one read by nats-server
 * instead of two. One task at a time, a one-call task made 13 socket writes, 5 of them an event alone (BENCHMARKS.md,
 * sixteenth round).
 */
import { randomUUID } from "node:crypto";
import {
  createInbox,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type PublishOptions,
} from "@nats-io/transport-node";
import { NoRespondersError, RequestTimeoutError, TransportError } from "../../actors/bus.js";
import { MSG_ID_HEADER, DEFAULT_INBOX_PREFIX, jetStreamApi } from "../../protocol/index.js";

/** How long a JetStream write waits for the stream's acknowledgement by default (as the JetStream client does). */
export const STORE_TIMEOUT_MS = 5000;

/** The longest a write sent with the next ({@link NatsWire.sendWithNext}) waits for another write of its connection. */
export const WITH_NEXT_MS = 2;

/** Held writes of this many bytes in all go out at once, whatever comes next. */
const WITH_NEXT_MAX_BYTES = 64 * 1024;

/** The JetStream API error code of a write whose expected last sequence did not match (a lost compare-and-set). */
export const WRONG_LAST_SEQUENCE = 10071;

/** A JetStream write or API call the server refused; `errCode` is JetStream's own code (e.g. {@link WRONG_LAST_SEQUENCE}). */
export class StoreError extends TransportError {
  override name = "StoreError";
  constructor(
    message: string,
    subject: string,
    /** JetStream's error code (`err_code`), 0 when the answer had none. */
    readonly errCode: number,
    /** The HTTP-like status of the answer (`code`). */
    readonly status: number,
  ) {
    super(message, subject);
  }
}

/** The acknowledgement of a stored message. */
export interface StoredAck {
  readonly stream: string;
  readonly seq: number;
  /** The stream already held a message with this message id (within its duplicate window). */
  readonly duplicate: boolean;
}

/** Options of a JetStream write. */
export interface StoreOptions {
  /** De-duplication id (`Nats-Msg-Id`). */
  msgId?: string;
  /** Write only if the subject's last message has this sequence; 0: only if the subject has none (KV create / update). */
  expectedLastSubjectSequence?: number;
  /** More headers stored with the message. */
  headers?: Record<string, string>;
  timeoutMs?: number;
}

interface Pending {
  /** One answer: settles and forgets the entry. */
  settle?: (err: Error | undefined, msg: Msg | undefined) => void;
  /** Many answers: each is handed over until the caller cancels. */
  each?: (msg: Msg) => void;
  timer?: ReturnType<typeof setTimeout> | undefined;
  subject: string;
  /** Sends the request again (after a reconnect) instead of failing it. */
  resend?: (reply: string) => void;
}

const decoder = new TextDecoder();

/** Request/reply and JetStream writes over one reply subscription. Get it with {@link wireOf}. */
export class NatsWire {
  readonly #nc: NatsConnection;
  readonly #prefix: string;
  /** The connection's inbox prefix (`_INBOX`, or a role's own). */
  readonly inboxPrefix: string;
  readonly #pending = new Map<string, Pending>();
  #disconnects = 0;
  /** Whether each stream read so far answers direct gets (from its configuration, asked once). */
  readonly #direct = new Map<string, Promise<boolean>>();
  /** Writes held for the next one ({@link sendWithNext}), in the order sent; their bytes; the timer that sends them alone. */
  #held: { subject: string; data: Uint8Array; options: PublishOptions }[] = [];
  #heldBytes = 0;
  #heldTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(nc: NatsConnection, inboxPrefix: string) {
    this.#nc = nc;
    this.inboxPrefix = inboxPrefix;
    this.#prefix = `${createInbox(inboxPrefix)}.`;
    nc.subscribe(`${this.#prefix}*`, { callback: (err, msg) => (err === null ? this.#deliver(msg) : undefined) });
    // An answer to what was sent before a disconnect is lost with the connection's subscriptions (and what was sent may
    // be lost too). Requests fail now rather than at their timeout, so their callers retry (or give up) as soon as
    // the connection is back; JetStream writes are sent again once it is back (see `store`).
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === "disconnect") {
          this.#disconnects++;
          this.#failPending(false);
        }
        // Closed for good: nothing will be sent again, so even JetStream writes fail now instead of at their timeout.
        else if (status.type === "close") this.#failPending(true);
        else if (status.type === "reconnect") this.#resendPending();
      }
    })().catch(() => undefined);
  }

  /** How often the connection was lost so far: what was sent without an answer before a loss may be lost with it. */
  get disconnects(): number {
    return this.#disconnects;
  }

  /** Publishes a message, after the writes held for the next one ({@link sendWithNext}). */
  publish(subject: string, data: Uint8Array, options?: PublishOptions): void {
    if (this.#held.length > 0) this.release();
    this.#nc.publish(subject, data, options);
  }

  /** Answers `msg`, after the writes held for the next one: an answer never overtakes what was sent before it. */
  respond(msg: Msg, data: Uint8Array, options?: PublishOptions): boolean {
    if (this.#held.length > 0) this.release();
    return msg.respond(data, options);
  }

  /**
   * Sends a message with `options`' headers (e.g. a JetStream write's message id), asking for no answer, with the
   * connection's next write: it goes out just before that one, or alone after {@link WITH_NEXT_MS}, in the order sent.
   * For writes nobody waits for, whose order with the connection's other writes is all that counts.
   */
  sendWithNext(subject: string, data: Uint8Array, options: StoreOptions = {}): void {
    const h = storeHeaders(options);
    this.#held.push({ subject, data, options: h ? { headers: h } : {} });
    this.#heldBytes += data.byteLength;
    if (this.#heldBytes >= WITH_NEXT_MAX_BYTES) this.release();
    else this.#heldTimer ??= setTimeout(this.#release, WITH_NEXT_MS);
  }

  /**
   * Hands the writes held for the next one to the connection, in the order sent. One the connection refuses (closed,
   * draining) is dropped, as the connection drops what it had buffered when it closes; the next ones still go.
   */
  release(): void {
    clearTimeout(this.#heldTimer);
    this.#heldTimer = undefined;
    const held = this.#held;
    this.#held = [];
    this.#heldBytes = 0;
    for (const write of held) {
      try {
        this.#nc.publish(write.subject, write.data, write.options);
      } catch {
        // Closed or draining: nothing more goes out on this connection.
      }
    }
  }

  readonly #release = () => this.release();

  #failPending(closed: boolean): void {
    for (const [token, pending] of this.#pending) {
      if (pending.settle === undefined || (pending.resend !== undefined && !closed)) continue;
      this.#pending.delete(token);
      clearTimeout(pending.timer);
      pending.settle(
        new TransportError(`connection to NATS ${closed ? "closed" : "lost"} before the answer on '${pending.subject}'`, pending.subject),
        undefined,
      );
    }
  }

  #resendPending(): void {
    for (const [token, pending] of this.#pending) {
      if (pending.resend === undefined) continue;
      try {
        pending.resend(this.#prefix + token);
      } catch {
        // Sent again at the next reconnect, or failed by its timeout.
      }
    }
  }

  #deliver(msg: Msg): void {
    const token = msg.subject.slice(this.#prefix.length);
    const pending = this.#pending.get(token);
    if (pending === undefined) return;
    if (pending.each !== undefined) return pending.each(msg);
    this.#pending.delete(token);
    clearTimeout(pending.timer);
    if (msg.data.length === 0 && msg.headers?.code === 503)
      pending.settle?.(new NoRespondersError(`no responders on '${pending.subject}'`, pending.subject), undefined);
    else pending.settle?.(undefined, msg);
  }

  /**
   * A request's reply token: 122 random bits (Node draws them from a cached pool, so this costs no system call per
   * request). Not a counter: a service that answered one request could otherwise predict the reply subjects of the
   * connection's next ones and answer them first (issue 31).
   */
  #token(): string {
    return randomUUID();
  }

  /**
   * Publishes `data` with a reply subject and resolves with the first answer.
   * @throws {NoRespondersError} when nobody listens on `subject`.
   * @throws {RequestTimeoutError} when no answer came within `timeoutMs`.
   */
  request(subject: string, data: Uint8Array, options: { timeoutMs: number; headers?: MsgHdrs; resend?: boolean }): Promise<Msg> {
    const token = this.#token();
    return new Promise<Msg>((resolve, reject) => {
      const pending: Pending = {
        subject,
        settle: (err, msg) => (err === undefined ? resolve(msg as Msg) : reject(err)),
        ...(options.resend === true
          ? {
              resend: (reply: string) => this.publish(subject, data, { reply, ...(options.headers ? { headers: options.headers } : {}) }),
            }
          : {}),
      };
      // Checked once more after the event loop's next I/O phase: under load the answer may be waiting, unread, in the
      // socket when the timer runs (timers run before I/O in each turn of the loop).
      pending.timer = setTimeout(
        () =>
          setImmediate(() => {
            if (this.#pending.get(token) !== pending) return;
            this.#pending.delete(token);
            reject(new RequestTimeoutError(`no answer on '${subject}' within ${options.timeoutMs} ms`, subject));
          }),
        options.timeoutMs,
      );
      this.#pending.set(token, pending);
      try {
        this.publish(subject, data, { reply: this.#prefix + token, ...(options.headers ? { headers: options.headers } : {}) });
      } catch (err) {
        this.#pending.delete(token);
        clearTimeout(pending.timer);
        reject(err);
      }
    });
  }

  /**
   * Publishes `data` with a reply subject and hands every answer to `each` (a 503 status when nobody listens) until
   * the returned function is called.
   */
  requestMany(subject: string, data: Uint8Array, each: (msg: Msg) => void, headers?: MsgHdrs): () => void {
    const token = this.#token();
    this.#pending.set(token, { subject, each });
    try {
      this.publish(subject, data, { reply: this.#prefix + token, ...(headers ? { headers } : {}) });
    } catch (err) {
      this.#pending.delete(token);
      throw err;
    }
    return () => void this.#pending.delete(token);
  }

  /**
   * The last message stored on `subject` in `stream`: a direct get, or `STREAM.MSG.GET` on a stream made without
   * `allow_direct` (a stream made by an older release, or by hand). `undefined` when the stream holds none.
   */
  async lastBySubject(stream: string, subject: string): Promise<StoredMessage | undefined> {
    if (!(await this.#allowsDirect(stream))) return this.#lastBySubjectApi(stream, subject);
    const direct = jetStreamApi.directGet(stream, subject);
    const answer = await this.request(direct, new Uint8Array(0), { timeoutMs: STORE_TIMEOUT_MS });
    const h = answer.headers;
    if (h?.code === 404) return undefined;
    if (h === undefined || h.hasError)
      throw new StoreError(
        `cannot read '${subject}' of ${stream}: ${h?.code ?? ""} ${h?.description ?? "no headers in the answer"}`,
        direct,
        0,
        h?.code ?? 0,
      );
    return { data: answer.data, seq: Number(h.get("Nats-Sequence")), header: (name) => h.get(name) || undefined };
  }

  /** Whether `stream` answers direct gets: its configuration, asked once (a direct get to one that does not is never answered). */
  #allowsDirect(stream: string): Promise<boolean> {
    let known = this.#direct.get(stream);
    if (known === undefined) {
      const api = jetStreamApi.streamInfo(stream);
      known = this.request(api, new Uint8Array(0), { timeoutMs: STORE_TIMEOUT_MS }).then((answer) => {
        const config = parseApiAnswer(answer, api)["config"] as { allow_direct?: boolean } | undefined;
        return config?.allow_direct === true;
      });
      known.catch(() => this.#direct.delete(stream));
      this.#direct.set(stream, known);
    }
    return known;
  }

  /** {@link lastBySubject} through the stream API (its answer carries the message and its headers in base64). */
  async #lastBySubjectApi(stream: string, subject: string): Promise<StoredMessage | undefined> {
    const api = jetStreamApi.streamMsgGet(stream);
    const answer = await this.request(api, new TextEncoder().encode(JSON.stringify({ last_by_subj: subject })), {
      timeoutMs: STORE_TIMEOUT_MS,
    });
    let body: Record<string, unknown>;
    try {
      body = parseApiAnswer(answer, api);
    } catch (err) {
      // 10037: no message found.
      if (err instanceof StoreError && err.errCode === 10037) return undefined;
      throw err;
    }
    const message = body["message"] as { data?: string; seq?: number; hdrs?: string } | undefined;
    if (message === undefined || typeof message.seq !== "number") throw new StoreError(`unexpected answer from ${api}`, api, 0, 0);
    return {
      data: message.data ? new Uint8Array(Buffer.from(message.data, "base64")) : new Uint8Array(0),
      seq: message.seq,
      header: headerBlock(message.hdrs ? Buffer.from(message.hdrs, "base64").toString("utf8") : ""),
    };
  }

  /**
   * Stores a message in the stream that captures `subject` and resolves with the stream's acknowledgement.
   * @throws {StoreError} when the stream refused it (e.g. {@link WRONG_LAST_SEQUENCE}) or no stream captures `subject`.
   */
  async store(subject: string, data: Uint8Array, options: StoreOptions = {}): Promise<StoredAck> {
    const h = storeHeaders(options);
    let answer: Msg;
    try {
      // Sent again after a reconnect: safe, since a write that did land is refused the second time (a message id seen, or
      // an expected sequence passed), and its writer reads the record to tell (see actors/director/records.ts).
      answer = await this.request(subject, data, {
        timeoutMs: options.timeoutMs ?? STORE_TIMEOUT_MS,
        resend: true,
        ...(h ? { headers: h } : {}),
      });
    } catch (err) {
      if (err instanceof NoRespondersError) throw new StoreError(`no stream stores '${subject}' (is JetStream enabled?)`, subject, 0, 503);
      throw err;
    }
    const ack = parseApiAnswer(answer, subject) as { stream?: unknown; seq?: unknown; duplicate?: unknown };
    if (typeof ack.stream !== "string" || typeof ack.seq !== "number")
      throw new StoreError(`unexpected acknowledgement for '${subject}'`, subject, 0, 0);
    return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate === true };
  }
}

/** The headers of a JetStream write with `options`; undefined when it has none. */
function storeHeaders(options: StoreOptions): MsgHdrs | undefined {
  if (options.msgId === undefined && options.expectedLastSubjectSequence === undefined && options.headers === undefined) return undefined;
  const h = natsHeaders();
  for (const [name, value] of Object.entries(options.headers ?? {})) h.set(name, value);
  if (options.msgId !== undefined) h.set(MSG_ID_HEADER, options.msgId);
  if (options.expectedLastSubjectSequence !== undefined)
    h.set("Nats-Expected-Last-Subject-Sequence", String(options.expectedLastSubjectSequence));
  return h;
}

/** Decodes a JetStream API answer; throws its error as a {@link StoreError}. */
export function parseApiAnswer(answer: Msg, subject: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(decoder.decode(answer.data));
  } catch {
    throw new StoreError(`unreadable answer for '${subject}'`, subject, 0, 0);
  }
  if (typeof body !== "object" || body === null) throw new StoreError(`unreadable answer for '${subject}'`, subject, 0, 0);
  const error = (body as { error?: { code?: number; err_code?: number; description?: string } }).error;
  if (error !== undefined)
    throw new StoreError(`${error.description ?? "JetStream error"} ('${subject}')`, subject, error.err_code ?? 0, error.code ?? 0);
  return body as Record<string, unknown>;
}

/** A message read back from a stream: its body, its stream sequence, and its headers by name. */
export interface StoredMessage {
  readonly data: Uint8Array;
  readonly seq: number;
  header(name: string): string | undefined;
}

/** The header values of a header block as the stream API returns it (`NATS/1.0\r\nName: value\r\n…`). */
function headerBlock(text: string): (name: string) => string | undefined {
  const values = new Map<string, string>();
  for (const line of text.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) values.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return (name) => values.get(name.toLowerCase());
}

/** The key of a connection's own {@link ConnectionWire} (a property of the connection object, not a module-level map). */
const WIRE = Symbol("dirigent.wire");

/** What one connection carries for this module: its inbox prefix, and its {@link NatsWire} once first used. */
class ConnectionWire {
  #wire: NatsWire | undefined;
  constructor(
    readonly nc: NatsConnection,
    readonly inboxPrefix: string,
  ) {}
  get wire(): NatsWire {
    return (this.#wire ??= new NatsWire(this.nc, this.inboxPrefix));
  }
}

type Carrier = NatsConnection & { [WIRE]?: ConnectionWire };

/**
 * Gives a connection just opened (by `connectNats`, runtime/nats/bus.ts) its own wire state, with the inbox prefix
 * it was opened with; the wire and its reply subscription are made on first use.
 */
export function attachWire(nc: NatsConnection, inboxPrefix: string): void {
  Object.defineProperty(nc, WIRE, { value: new ConnectionWire(nc, inboxPrefix), enumerable: false });
}

/** The connection's {@link NatsWire}, made (and its reply subscription opened) on first use; `_INBOX` for a connection opened elsewhere. */
export function wireOf(nc: NatsConnection): NatsWire {
  const carrier = nc as Carrier;
  if (carrier[WIRE] === undefined) attachWire(nc, DEFAULT_INBOX_PREFIX);
  return (carrier[WIRE] as ConnectionWire).wire;
}
