/**
 * A `fetch` for the model client over `node:http` / `node:https` with keep-alive agents, one pair per process.
 *
 * Node 20's global `fetch` (undici) spends about 0.6–1 ms of CPU on each small request and response on the machines
 * we measure (WHATWG streams, header guards, its own connection pool), several times what `node:http` spends on the
 * same exchange; every model call pays it. The `openai` SDK accepts any `fetch`: this one covers what it sends
 * (a method, headers, a string or byte body, an abort signal) and falls back to the global `fetch` for anything else
 * (a `Request` object, a stream or form body). Responses: a JSON body is read whole before the promise resolves (the
 * SDK's timeout then covers it) and answered by a {@link BufferedResponse}, which makes no WHATWG stream unless its
 * `body` is asked for; a streamed one (`text/event-stream`) resolves at its headers as a `Response` with a stream body.
 * gzip, deflate and br bodies are decoded, as `fetch` does. A request whose reused socket the server closed before
 * any answer is sent again on another ({@link STALE_SOCKET_RETRIES}).
 */
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import zlib from "node:zlib";

/** What the SDK passes as `init`. */
type Init = RequestInit & { duplex?: string };

/** Options of {@link createHttpFetch}. */
export interface HttpFetchOptions {
  /** Most sockets per host and agent (default 256). */
  maxSockets?: number;
}

/** Makes a `fetch` over keep-alive `node:http`/`node:https` agents (see the module comment). */
export function createHttpFetch(options: HttpFetchOptions = {}): typeof fetch {
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 256 };
  const agents = { "http:": new http.Agent(agentOptions), "https:": new https.Agent(agentOptions) };
  return (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : undefined;
    const body = init?.body;
    const plainBody = body === undefined || body === null || typeof body === "string" || body instanceof Uint8Array;
    if (url === undefined || !plainBody) return fetch(input, init);
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return fetch(input, init);
    return send(parsed, init ?? {}, parsed.protocol === "https:" ? https : http, agents[parsed.protocol]);
  };
}

/**
 * Times a request is sent again after a kept-alive socket it reused was closed under it before any answer (the
 * server closed the idle socket as the request went out: a race every keep-alive client meets). The request never
 * reached the server's handler, so sending it again repeats nothing. A fresh socket's failure is never retried here.
 */
const STALE_SOCKET_RETRIES = 3;

function send(
  url: URL,
  init: Init,
  module: typeof http | typeof https,
  agent: http.Agent,
  staleRetries = STALE_SOCKET_RETRIES,
): Promise<Response> {
  const headers: Record<string, string> = {};
  if (init.headers) {
    const given = init.headers instanceof Headers ? init.headers : new Headers(init.headers);
    given.forEach((value, name) => (headers[name] = value));
  }
  const body = init.body as string | Uint8Array | null | undefined;
  if (body !== undefined && body !== null && headers["content-length"] === undefined)
    headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
  return new Promise<Response>((resolve, reject) => {
    let answered = false;
    const request = module.request(
      url,
      { method: init.method ?? "GET", headers, agent, ...(init.signal ? { signal: init.signal } : {}) },
      (res) => {
        answered = true;
        res.on("error", reject);
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers))
          if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(", ") : value);
        const status = res.statusCode ?? 0;
        const decoded = decode(res, res.headers["content-encoding"]);
        if (decoded !== res) responseHeaders.delete("content-encoding");
        const noBody = status === 204 || status === 304 || init.method === "HEAD";
        const statusText = res.statusMessage ?? "";
        if (noBody) {
          res.resume();
          resolve(new BufferedResponse(null, status, statusText, responseHeaders, url.href) as unknown as Response);
        } else if ((res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          resolve(new Response(Readable.toWeb(decoded) as ReadableStream<Uint8Array>, { status, statusText, headers: responseHeaders }));
        } else {
          const chunks: Buffer[] = [];
          decoded.on("data", (chunk: Buffer) => chunks.push(chunk));
          decoded.on("error", reject);
          decoded.on("end", () =>
            resolve(new BufferedResponse(Buffer.concat(chunks), status, statusText, responseHeaders, url.href) as unknown as Response),
          );
        }
      },
    );
    request.on("error", (err: NodeJS.ErrnoException) => {
      const stale = request.reusedSocket && staleRetries > 0 && (err.code === "ECONNRESET" || err.code === "EPIPE");
      if (stale && init.signal?.aborted !== true && !answered) resolve(send(url, init, module, agent, staleRetries - 1));
      else reject(err);
    });
    request.end(body ?? undefined);
  });
}

const utf8 = new TextDecoder();

/**
 * A response whose body was read whole, with what the `openai` SDK and `fetch`'s callers read of a `Response`: the
 * status, the headers, the URL, `text()`, `json()`, `arrayBuffer()`, `bytes()`, `clone()`, `body` and `bodyUsed`.
 * Node's `Response` builds a WHATWG stream, its controller and its transfer hooks for every body; for the model's
 * small JSON answers that was most of this client's CPU. So the bytes are read directly, and a `Response` is made
 * only once `body` is asked for (its stream); from then on every read goes through it, as `fetch`'s would. Like
 * `fetch`'s, a body is read once: a second read rejects with a `TypeError`.
 */
export class BufferedResponse {
  readonly ok: boolean;
  readonly redirected = false;
  readonly type = "basic";
  readonly #bytes: Buffer | null;
  #used = false;
  /** Made when `body` is first asked for; then the body's one owner. */
  #streamed: Response | undefined;

  constructor(
    bytes: Buffer | null,
    readonly status: number,
    readonly statusText: string,
    readonly headers: Headers,
    readonly url: string,
  ) {
    this.#bytes = bytes;
    this.ok = status >= 200 && status <= 299;
  }

  get bodyUsed(): boolean {
    return this.#streamed?.bodyUsed ?? this.#used;
  }

  /** The body as a stream (made on first use). */
  get body(): ReadableStream<Uint8Array> | null {
    if (this.#bytes === null) return null;
    this.#streamed ??= new Response(this.#used ? new ReadableStream({ start: (c) => c.error(used()) }) : this.#bytes);
    return this.#streamed.body;
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    if (this.#streamed) return this.#streamed.arrayBuffer();
    const bytes = this.#take();
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }

  async bytes(): Promise<Uint8Array> {
    if (this.#streamed) return new Uint8Array(await this.#streamed.arrayBuffer());
    return new Uint8Array(this.#take());
  }

  async text(): Promise<string> {
    if (this.#streamed) return this.#streamed.text();
    return utf8.decode(this.#take());
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text()) as unknown;
  }

  clone(): BufferedResponse {
    if (this.bodyUsed) throw new TypeError("Response.clone: Body has already been consumed.");
    return new BufferedResponse(this.#bytes, this.status, this.statusText, new Headers(this.headers), this.url);
  }

  #take(): Buffer {
    if (this.#used) throw used();
    this.#used = true;
    return this.#bytes ?? Buffer.alloc(0);
  }
}

const used = () => new TypeError("Body is unusable: Body has already been read");

function decode(res: http.IncomingMessage, encoding: string | undefined): Readable {
  switch (encoding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return res.pipe(zlib.createGunzip());
    case "deflate":
      return res.pipe(zlib.createInflate());
    case "br":
      return res.pipe(zlib.createBrotliDecompress());
    default:
      return res;
  }
}
