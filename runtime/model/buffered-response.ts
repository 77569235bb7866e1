/**
 * A model's answer read whole, handed to the `openai` SDK in place of a `Response` by the model client's own HTTP
 * clients (./http1.ts, ./http-fetch.ts).
 */
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
