/**
 * The rules both protocol servers (`dirigent mcp --http`, `dirigent a2a`) apply to their HTTP side: they listen on
 * loopback unless told otherwise, refuse to listen anywhere else without a bearer token, answer only requests naming
 * their own host with no foreign `Origin` (the inspector's checks, `runtime/inspect/guard.ts`), and, with a token,
 * only requests that carry it.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { isLoopback, refusal, SECURITY_HEADERS } from "../inspect/guard.js";
import { messageOf } from "../../protocol/errors.js";

/** Why a server refuses to start. */
export class ListenError extends Error {
  override name = "ListenError";
}

/** Reads a bearer token from a file (trimmed); it must hold at least 16 characters without whitespace. */
export async function readToken(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ListenError(`cannot read the token file '${file}': ${messageOf(err)}`);
  }
  const token = text.trim();
  if (token.length < 16 || /\s/.test(token))
    throw new ListenError(`the token file '${file}' must hold one token of at least 16 characters, without whitespace`);
  return token;
}

/** Checks that a server may listen on `host`: anywhere but loopback only with a token. */
export function checkListen(host: string, token: string | undefined, what: string): void {
  if (!isLoopback(host) && token === undefined)
    throw new ListenError(
      `the ${what} listens on '${host}', not on loopback: give a bearer token with --token-file FILE (clients send 'Authorization: Bearer <token>')`,
    );
}

const digest = (text: string) => createHash("sha256").update(text).digest();

/** Whether the request carries `Authorization: Bearer <token>` (compared in constant time). */
export function hasToken(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization ?? "";
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m !== null && timingSafeEqual(digest(m[1] ?? ""), digest(token));
}

/**
 * Answers a request that breaks a rule (421 for another host, 403 for a foreign origin, 401 without the token) and
 * returns true; returns false for a request to serve.
 */
export function refuse(req: IncomingMessage, res: ServerResponse, hosts: ReadonlySet<string>, token: string | undefined): boolean {
  const refused = refusal(req, hosts);
  if (refused) {
    res.writeHead(refused.status, { ...SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" }).end(refused.reason + "\n");
    return true;
  }
  if (token !== undefined && !hasToken(req, token)) {
    res
      .writeHead(401, { ...SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8", "www-authenticate": "Bearer" })
      .end("unauthorized: send 'Authorization: Bearer <token>'\n");
    return true;
  }
  return false;
}
