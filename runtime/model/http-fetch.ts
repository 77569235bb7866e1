/**
 * A `fetch` for the model client over `node:http` / `node:https` with keep-alive agents, one pair per process
 * (`DIRIGENT_MODEL_HTTP=node`; the default is dirigent's own HTTP/1.1 client, ./http1.ts, which spends less still).
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
import { BufferedResponse } from "./buffered-response.js";
import { streamDecoderOf } from "./content-coding.js";
import { coveredUrl, STALE_SOCKET_RETRIES } from "./own-requests.js";

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
    const url = coveredUrl(input, init);
    if (url === undefined) return fetch(input, init);
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return fetch(input, init);
    return send(parsed, init ?? {}, parsed.protocol === "https:" ? https : http, agents[parsed.protocol]);
  };
}

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

function decode(res: http.IncomingMessage, encoding: string | undefined): Readable {
  const decoder = streamDecoderOf(encoding ?? null);
  return decoder === undefined ? res : res.pipe(decoder);
}
