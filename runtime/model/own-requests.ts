/**
 * What the model client's own HTTP clients (./http1.ts, the default, and ./http-fetch.ts) share: which requests they
 * send themselves rather than leave to the global `fetch`, and how often one is sent again after a stale connection.
 */

/**
 * The URL of a request these clients send themselves: a URL, as text or a `URL`, with no body or a string or byte one,
 * as the SDK sends. Undefined for anything else (a `Request` object, a stream or form body), left to global `fetch`.
 */
export function coveredUrl(input: Parameters<typeof fetch>[0], init: RequestInit | undefined): string | undefined {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : undefined;
  const body = init?.body;
  const plainBody = body === undefined || body === null || typeof body === "string" || body instanceof Uint8Array;
  return plainBody ? url : undefined;
}

/**
 * Times a request is sent again after a kept-alive socket it reused was closed under it before any answer (the
 * server closed the idle socket as the request went out: a race every keep-alive client meets). Such a request never
 * reached the server's handler, so sending it again repeats nothing; a server that read it and died before answering
 * looks the same, and gets it twice. A fresh socket's failure is never retried.
 */
export const STALE_SOCKET_RETRIES = 3;
