/**
 * The model client's default HTTP: a keep-alive HTTP/1.1 client of its own, given to the `openai` SDK as its `fetch`.
 *
 * A model call is one small request and one small answer on a connection kept open. `node:http` spends most of such
 * an exchange in its machinery (the request object, the agent's bookkeeping, writable and readable streams, header
 * objects made twice), about 160 µs of CPU per call one at a time on the 2-core machine of BENCHMARKS.md; this client
 * writes the request in one socket write and reads the answer from the socket's data as it comes, with no stream
 * unless the answer is an event stream, for less than half of that (BENCHMARKS.md, seventeenth round).
 *
 * What it covers is what the SDK sends: `http:` and `https:` URLs (TLS by `node:tls`, the server's certificate checked
 * as `node:https` checks it), a method, headers (checked as `node:http` checks them: a name or value that would break
 * the request's framing is refused), a string or byte body, an abort signal. Anything else (a `Request` object, a
 * stream or form body) goes to the global `fetch`. Answers: framed by `content-length`, by chunks (extensions and
 * trailers read and dropped), or by the end of the connection; informational (1xx) heads skipped; gzip, deflate and
 * br bodies decoded, as `fetch` does. A JSON answer is read whole and handed over as a {@link BufferedResponse}; an
 * event stream (`text/event-stream`) as a `Response` whose body streams as it comes. An answer this client cannot read
 * (a malformed head or chunk, a head over {@link MAX_HEAD_BYTES}, an upgrade) fails the request with an error that
 * says why, and its connection is closed.
 *
 * Connections are kept per origin (at most `maxSockets`, default 256; more requests wait for one), reused only after
 * an answer whose end was known, and closed when the server closes them or a second before the idle time it names
 * (`keep-alive: timeout=N`) runs out; an idle one keeps no process alive. A request whose reused connection the
 * server closed before any answer is sent again on a new one ({@link STALE_SOCKET_RETRIES}).
 */
import http from "node:http";
import net from "node:net";
import { Readable } from "node:stream";
import tls from "node:tls";
import { BufferedResponse } from "./buffered-response.js";
import { decoderOf, streamDecoderOf } from "./content-coding.js";
import { coveredUrl, STALE_SOCKET_RETRIES } from "./own-requests.js";

/** Options of {@link createHttp1Fetch}. */
export interface Http1Options {
  /** Most connections per origin (default 256). */
  maxSockets?: number;
}

/** The largest response head read (status line and headers); a larger one fails the request. */
export const MAX_HEAD_BYTES = 64 * 1024;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;
const ASCII = /^[\x00-\x7f]*$/;
const CRLF = Buffer.from("\r\n");
const HEAD_END = Buffer.from("\r\n\r\n");
const EMPTY = Buffer.alloc(0);

/** Makes a `fetch` over kept-alive HTTP/1.1 connections of its own (see the module comment). */
export function createHttp1Fetch(options: Http1Options = {}): typeof fetch {
  const maxSockets = options.maxSockets ?? 256;
  const pools = new Map<string, Pool>();
  // URLs parsed before, by their text: the SDK asks the same few URLs again and again.
  const targets = new Map<string, Target>();
  return (input, init) => {
    const url = coveredUrl(input, init);
    if (url === undefined) return fetch(input, init);
    const target = targetOf(targets, url);
    if (target === undefined) return fetch(input, init);
    let pool = pools.get(target.origin);
    if (pool === undefined) pools.set(target.origin, (pool = new Pool(target, maxSockets)));
    return request(pool, target, url, init ?? {});
  };
}

/** Where a request goes: its origin's address, and the request target (path and query). */
interface Target {
  readonly origin: string;
  readonly secure: boolean;
  readonly hostname: string;
  readonly port: number;
  readonly host: string;
  readonly path: string;
}

/** Where `href` goes (from `targets` when it was asked before), or undefined for a URL this client does not take. */
function targetOf(targets: Map<string, Target>, href: string): Target | undefined {
  const known = targets.get(href);
  if (known !== undefined) return known;
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  const secure = url.protocol === "https:";
  // An IPv6 literal is written in brackets in a URL and its Host header, and without them to connect.
  const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  const target = {
    origin: url.origin,
    secure,
    hostname,
    port: url.port === "" ? (secure ? 443 : 80) : Number(url.port),
    host: url.host,
    path: `${url.pathname}${url.search}`,
  };
  if (targets.size >= 256) targets.clear();
  targets.set(href, target);
  return target;
}

/** The request's bytes: its head, checked as `node:http` checks it, and its body, in one buffer or string. */
function requestBytes(target: Target, method: string, init: RequestInit): string | Buffer {
  if (!TOKEN.test(method)) throw new TypeError(`invalid HTTP method: ${JSON.stringify(method)}`);
  const body = init.body as string | Uint8Array | null | undefined;
  let head = `${method} ${target.path} HTTP/1.1\r\n`;
  let host: string | undefined;
  const add = (value: string, name: string) => {
    http.validateHeaderName(name);
    http.validateHeaderValue(name, value);
    const lower = name.toLowerCase();
    // The framing is this client's own: it sends the body's length, and keeps the connection.
    if (lower === "content-length" || lower === "transfer-encoding" || lower === "connection") return;
    if (lower === "host") host = value;
    else head += `${name}: ${value}\r\n`;
  };
  if (init.headers instanceof Headers) init.headers.forEach(add);
  else if (init.headers !== undefined) new Headers(init.headers).forEach(add);
  head = `${head}host: ${host ?? target.host}\r\n`;
  const length = body === undefined || body === null ? undefined : typeof body === "string" ? Buffer.byteLength(body) : body.byteLength;
  if (length !== undefined) head += `content-length: ${length}\r\n`;
  else if (method === "POST" || method === "PUT" || method === "PATCH") head += "content-length: 0\r\n";
  head += "\r\n";
  // Header values are Latin-1 on the wire; a head in ASCII can go with a text body as one UTF-8 string.
  if (typeof body === "string" && ASCII.test(head)) return head + body;
  const bytes = Buffer.from(head, "latin1");
  if (body === undefined || body === null) return bytes;
  return Buffer.concat([bytes, typeof body === "string" ? Buffer.from(body) : body]);
}

function request(pool: Pool, target: Target, href: string, init: RequestInit): Promise<Response> {
  const signal = init.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(abortError());
  const method = (init.method ?? "GET").toUpperCase();
  let bytes: string | Buffer;
  try {
    bytes = requestBytes(target, method, init);
  } catch (error) {
    return Promise.reject(error);
  }
  return new Promise<Response>((resolve, reject) => {
    const attempt = (retries: number, fresh: boolean) => {
      const again = () => {
        if (retries === 0 || signal?.aborted === true) return false;
        attempt(retries - 1, true);
        return true;
      };
      const exchange = new Exchange(href, method, signal, resolve, reject, again);
      pool.acquire(fresh, (connection) => exchange.start(connection, bytes));
    };
    attempt(STALE_SOCKET_RETRIES, false);
  });
}

/** The kept connections of one origin. */
class Pool {
  readonly #idle: Connection[] = [];
  readonly #waiting: Array<(connection: Connection) => void> = [];
  #open = 0;

  constructor(
    readonly target: Target,
    readonly max: number,
  ) {}

  /** Gives a connection: an idle one unless `fresh`, a new one while fewer than `max` are open, else the next freed. */
  acquire(fresh: boolean, give: (connection: Connection) => void): void {
    if (!fresh) {
      // One the server closed may wait for its close event here: it is skipped, and leaves at that event.
      for (let at = this.#idle.length - 1; at >= 0; at--) {
        const idle = this.#idle[at]!;
        if (idle.socket.destroyed) continue;
        this.#idle.splice(at, 1);
        return give(idle.take());
      }
    }
    if (this.#open < this.max) return give(this.#connect());
    this.#waiting.push(give);
  }

  /** Takes back a connection after an answer: kept for the next request if `reusable`, closed otherwise. */
  release(connection: Connection, reusable: boolean): void {
    if (!reusable || connection.socket.destroyed) return void connection.socket.destroy();
    connection.reused = true;
    const next = this.#waiting.shift();
    if (next !== undefined) return next(connection.take());
    connection.rest();
    this.#idle.push(connection);
  }

  /** A connection closed (by either side): another may open for a request waiting. */
  closed(connection: Connection): void {
    this.#open--;
    const at = this.#idle.indexOf(connection);
    if (at >= 0) this.#idle.splice(at, 1);
    const next = this.#waiting.shift();
    if (next !== undefined) next(this.#connect());
  }

  #connect(): Connection {
    this.#open++;
    const { secure, hostname, port } = this.target;
    const socket = secure
      ? tls.connect({ host: hostname, port, ALPNProtocols: ["http/1.1"], ...(net.isIP(hostname) ? {} : { servername: hostname }) })
      : net.connect({ host: hostname, port });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    return new Connection(socket, this, false);
  }
}

/** One socket and the exchange on it, if any. */
class Connection {
  exchange: Exchange | undefined;
  /**
   * How long the server said it keeps this connection idle, less a second (its last answer's `keep-alive: timeout=N`);
   * 0 when it did not say. An idle connection is closed by this client before the server would close it.
   */
  idleMs = 0;

  constructor(
    readonly socket: net.Socket,
    readonly pool: Pool,
    public reused: boolean,
  ) {
    socket.on("data", (chunk: Buffer) => (this.exchange ? this.exchange.data(chunk) : socket.destroy()));
    socket.on("end", () => (this.exchange ? this.exchange.end() : socket.destroy()));
    socket.on("error", (error) => this.exchange?.fail(error));
    socket.on("timeout", () => this.exchange === undefined && socket.destroy());
    socket.on("close", () => {
      this.exchange?.fail(Object.assign(new Error("the model server closed the connection"), { code: "ECONNRESET" }));
      pool.closed(this);
    });
  }

  /** Out of the idle list, for a request. */
  take(): this {
    this.socket.ref();
    if (this.idleMs > 0) this.socket.setTimeout(0);
    return this;
  }

  /** Into the idle list: it keeps no process alive, and is reused until the server's idle time, if it said one. */
  rest(): void {
    this.exchange = undefined;
    this.socket.unref();
    if (this.idleMs > 0) this.socket.setTimeout(this.idleMs);
  }
}

/** How an answer's body ends. */
type Framing = { kind: "none" } | { kind: "length"; left: number } | { kind: "chunked"; chunks: ChunkReader } | { kind: "close" };

/** One request and its answer on one connection. */
class Exchange {
  #connection: Connection | undefined;
  #head: Buffer = EMPTY;
  #status = 0;
  #statusText = "";
  #headers: Headers | undefined;
  #reusable = false;
  #framing: Framing | undefined;
  #answered = false;
  #settled = false;
  #done = false;
  #chunks: Buffer[] = [];
  #stream: Readable | undefined;
  #onAbort: (() => void) | undefined;

  constructor(
    readonly href: string,
    readonly method: string,
    readonly signal: AbortSignal | undefined,
    readonly resolve: (response: Response) => void,
    readonly reject: (error: unknown) => void,
    /** Sends the request again on a new connection, if it may be: whether it was. */
    readonly again: () => boolean,
  ) {
    // Heard from now on: a request aborted while it waits for a connection ends then.
    if (signal !== undefined) {
      this.#onAbort = () => this.fail(abortError());
      signal.addEventListener("abort", this.#onAbort, { once: true });
    }
  }

  start(connection: Connection, bytes: string | Buffer): void {
    // Ended while it waited (aborted): the connection goes to the next request.
    if (this.#done) return connection.pool.release(connection, !connection.socket.destroyed);
    this.#connection = connection;
    connection.exchange = this;
    connection.socket.write(bytes);
  }

  data(chunk: Buffer): void {
    this.#answered = true;
    try {
      if (this.#framing === undefined) {
        this.#head = this.#head.length === 0 ? chunk : Buffer.concat([this.#head, chunk]);
        this.#readHead();
      } else this.#body(chunk);
    } catch (error) {
      // An answer `Response` refuses (a status outside 200–599 with a streamed body, say) fails its request alone.
      this.fail(error);
    }
  }

  end(): void {
    if (this.#framing?.kind === "close") return this.#finish(false);
    this.fail(
      this.#answered
        ? new Error("the model server closed the connection before the end of its answer")
        : Object.assign(new Error("the model server closed the connection before answering"), { code: "ECONNRESET" }),
    );
  }

  /** Ends the exchange with `error` (once): the request is sent again if its reused connection closed before any answer. */
  fail(error: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#detach();
    const connection = this.#connection;
    if (connection !== undefined) {
      connection.exchange = undefined;
      connection.socket.destroy();
    }
    const stale = connection?.reused === true && !this.#answered && !(error instanceof DOMException);
    if (!this.#settled && stale && this.again()) return;
    if (!this.#settled) {
      this.#settled = true;
      this.reject(error);
    } else this.#stream?.destroy(error instanceof Error ? error : new Error(String(error)));
  }

  #readHead(): void {
    for (;;) {
      const end = this.#head.indexOf(HEAD_END);
      // What is read of a head not ended yet counts too: a server that never ends one is cut off at the limit.
      if ((end < 0 ? this.#head.length : end) > MAX_HEAD_BYTES)
        return this.fail(new Error(`the model server's answer has a head over ${MAX_HEAD_BYTES} bytes`));
      if (end < 0) return;
      const head = parseHead(this.#head.toString("latin1", 0, end));
      const rest = this.#head.subarray(end + 4);
      if (typeof head === "string") return this.fail(new Error(`the model server's answer cannot be read: ${head}`));
      if (head.status === 101) return this.fail(new Error("the model server switched protocols (101), which this client does not do"));
      if (head.status < 200) {
        // An informational answer (100 Continue, 103 Early Hints): the final one follows.
        this.#head = rest;
        continue;
      }
      const framing = framingOf(head, this.method);
      if (typeof framing === "string") return this.fail(new Error(`the model server's answer cannot be read: ${framing}`));
      this.#head = EMPTY;
      this.#status = head.status;
      this.#statusText = head.statusText;
      this.#headers = head.headers;
      // A transfer coding beside a content-length wins, and such a connection is not kept (RFC 9112, 6.3).
      this.#reusable =
        head.keepAlive && framing.kind !== "close" && (head.transferEncoding.length === 0 || head.contentLength.length === 0);
      this.#framing = framing;
      if ((head.headers.get("content-type") ?? "").startsWith("text/event-stream") && framing.kind !== "none") this.#openStream();
      if (framing.kind === "none") return this.#finish(rest.length === 0);
      if (rest.length > 0) this.#body(rest);
      return;
    }
  }

  #body(chunk: Buffer): void {
    const framing = this.#framing!;
    switch (framing.kind) {
      case "close":
        return this.#take(chunk);
      case "length": {
        const part = chunk.length <= framing.left ? chunk : chunk.subarray(0, framing.left);
        framing.left -= part.length;
        if (part.length > 0) this.#take(part);
        if (framing.left === 0) this.#finish(part.length === chunk.length);
        return;
      }
      case "chunked": {
        const read = framing.chunks.read(chunk, (part) => this.#take(part));
        if (typeof read === "string") return this.fail(new Error(`the model server's answer cannot be read: ${read}`));
        if (read.done) this.#finish(read.extra === 0);
        return;
      }
      case "none":
        return;
    }
  }

  #take(part: Buffer): void {
    if (this.#stream !== undefined) {
      if (!this.#stream.push(part)) this.#connection?.socket.pause();
    } else this.#chunks.push(part);
  }

  /** The answer is whole: hand the connection back (kept if nothing followed the answer) and the body over. */
  #finish(clean: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.#detach();
    const connection = this.#connection!;
    connection.exchange = undefined;
    // As Node's agent does: a second before the server's own idle timeout, so that no request meets its close.
    const idle = /(?:^|[\s,])timeout=(\d+)/i.exec(this.#headers?.get("keep-alive") ?? "")?.[1];
    connection.idleMs = idle === undefined ? 0 : Math.max(0, Number(idle) * 1000 - 1000);
    connection.pool.release(connection, this.#reusable && clean && (idle === undefined || connection.idleMs > 0));
    if (this.#stream !== undefined) return void this.#stream.push(null);
    this.#settled = true;
    const headers = this.#headers!;
    const bytes = this.#framing?.kind === "none" ? null : this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    const status = this.#status;
    const statusText = this.#statusText;
    const decoder = bytes === null ? undefined : decoderOf(headers.get("content-encoding"));
    if (decoder === undefined || bytes === null) {
      return this.resolve(new BufferedResponse(bytes, status, statusText, headers, this.href) as unknown as Response);
    }
    headers.delete("content-encoding");
    decoder(bytes).then(
      (decoded) => this.resolve(new BufferedResponse(decoded, status, statusText, headers, this.href) as unknown as Response),
      (error: unknown) => this.reject(error),
    );
  }

  /** An event stream: the answer resolves now, and its body streams as it comes. */
  #openStream(): void {
    const socket = this.#connection!.socket;
    this.#stream = new Readable({ read: () => void socket.resume() });
    // A reader that cancels the body before its end gives the connection up: it is closed, not left paused.
    this.#stream.on("close", () => this.fail(abortError()));
    const headers = this.#headers!;
    const encoding = headers.get("content-encoding");
    let body: Readable = this.#stream;
    const decoding = streamDecoderOf(encoding);
    if (decoding !== undefined) {
      headers.delete("content-encoding");
      body = this.#stream.pipe(decoding);
      this.#stream.on("error", (error) => decoding.destroy(error));
    }
    this.#settled = true;
    this.resolve(
      new Response(Readable.toWeb(body) as ReadableStream<Uint8Array>, { status: this.#status, statusText: this.#statusText, headers }),
    );
  }

  #detach(): void {
    if (this.#onAbort !== undefined) this.signal?.removeEventListener("abort", this.#onAbort);
    this.#onAbort = undefined;
  }
}

/** A response head, read. */
interface Head {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  /** The connection may carry another request after this answer (HTTP/1.1 without `connection: close`). */
  readonly keepAlive: boolean;
  readonly contentLength: string[];
  readonly transferEncoding: string[];
}

/** Reads a response head (without its final empty line); a string says why it cannot be read. */
export function parseHead(text: string): Head | string {
  try {
    return readHead(text);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

function readHead(text: string): Head | string {
  const lines = text.split("\r\n");
  const status = STATUS_LINE.exec(lines[0]!);
  if (status === null) return `not an HTTP/1.x status line: ${JSON.stringify(lines[0]!.slice(0, 80))}`;
  const headers = new Headers();
  const contentLength: string[] = [];
  const transferEncoding: string[] = [];
  let close = status[1] === "0";
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith(" ") || line.startsWith("\t")) return "a folded header line";
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!TOKEN.test(name)) return `not a header line: ${JSON.stringify(line.slice(0, 80))}`;
    const value = line.slice(colon + 1).trim();
    if (/[\0\r\n]/.test(value)) return `a control character in header ${name}`;
    const lower = name.toLowerCase();
    if (lower === "content-length") contentLength.push(value);
    else if (lower === "transfer-encoding") transferEncoding.push(value);
    else if (lower === "connection") {
      const options = value
        .toLowerCase()
        .split(",")
        .map((o) => o.trim());
      if (options.includes("close")) close = true;
      else if (status[1] === "0" && options.includes("keep-alive")) close = false;
    }
    headers.append(name, value);
  }
  return { status: Number(status[2]), statusText: status[3] ?? "", headers, keepAlive: !close, contentLength, transferEncoding };
}

/** How the body of an answer with `head` to a `method` request ends; a string says why it cannot be told. */
function framingOf(head: Head, method: string): Framing | string {
  if (method === "HEAD" || head.status === 204 || head.status === 304) return { kind: "none" };
  if (head.transferEncoding.length > 0) {
    const codings = head.transferEncoding
      .join(",")
      .toLowerCase()
      .split(",")
      .map((c) => c.trim());
    return codings[codings.length - 1] === "chunked" ? { kind: "chunked", chunks: new ChunkReader() } : { kind: "close" };
  }
  if (head.contentLength.length > 0) {
    const values = new Set(
      head.contentLength
        .join(",")
        .split(",")
        .map((v) => v.trim()),
    );
    const [value] = values;
    if (values.size !== 1 || !/^\d{1,15}$/.test(value!))
      return `an invalid content-length: ${JSON.stringify(head.contentLength.join(", "))}`;
    const left = Number(value);
    return left === 0 ? { kind: "none" } : { kind: "length", left };
  }
  return { kind: "close" };
}

/** Reads a chunked body as it comes: its data handed on, its chunk extensions and trailers dropped. */
export class ChunkReader {
  #state: "size" | "data" | "crlf" | "trailer" | "done" = "size";
  #left = 0;
  #rest: Buffer = EMPTY;

  /** Reads `chunk`; `data` gets each piece of the body. Returns whether the body ended (and how many bytes followed it), or why it cannot be read. */
  read(chunk: Buffer, data: (part: Buffer) => void): { done: boolean; extra: number } | string {
    let buf = this.#rest.length === 0 ? chunk : Buffer.concat([this.#rest, chunk]);
    this.#rest = EMPTY;
    for (;;) {
      switch (this.#state) {
        case "size": {
          const at = buf.indexOf(CRLF);
          if (at < 0) return this.#wait(buf);
          const line = buf.toString("latin1", 0, at);
          const size = line.split(";", 1)[0]!.trim();
          if (!/^[0-9a-fA-F]{1,12}$/.test(size)) return `a chunk size line that is not one: ${JSON.stringify(line.slice(0, 40))}`;
          this.#left = parseInt(size, 16);
          this.#state = this.#left === 0 ? "trailer" : "data";
          buf = buf.subarray(at + 2);
          break;
        }
        case "data": {
          if (buf.length === 0) return { done: false, extra: 0 };
          const part = buf.length <= this.#left ? buf : buf.subarray(0, this.#left);
          this.#left -= part.length;
          data(part);
          buf = buf.subarray(part.length);
          if (this.#left === 0) this.#state = "crlf";
          break;
        }
        case "crlf": {
          if (buf.length < 2) return this.#wait(buf);
          if (buf[0] !== 13 || buf[1] !== 10) return "a chunk not followed by CRLF";
          buf = buf.subarray(2);
          this.#state = "size";
          break;
        }
        case "trailer": {
          const at = buf.indexOf(CRLF);
          if (at < 0) return this.#wait(buf);
          buf = buf.subarray(at + 2);
          if (at === 0) this.#state = "done";
          break;
        }
        case "done":
          return { done: true, extra: buf.length };
      }
    }
  }

  #wait(buf: Buffer): { done: false; extra: 0 } | string {
    if (buf.length > MAX_HEAD_BYTES) return `a chunk size or trailer line over ${MAX_HEAD_BYTES} bytes`;
    this.#rest = buf;
    return { done: false, extra: 0 };
  }
}

const abortError = () => new DOMException("This operation was aborted", "AbortError");
