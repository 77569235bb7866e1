/**
 * The checks every HTTP request to the inspector's servers passes (the page server and the Stately bridge): its
 * `Host` must name this server (so a page of another site cannot read it through DNS rebinding), its `Origin`, when
 * a browser sends one, must be an allowed one, and every answer carries the same security headers.
 */
import type { IncomingMessage, Server } from "node:http";
import { isIP, type AddressInfo } from "node:net";

/** Headers sent with every answer of the inspector's servers; `content-security-policy` is set per server. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-resource-policy": "same-origin",
  "cache-control": "no-store",
};

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** Whether `address` (an interface to listen on) is a loopback one: `localhost`, `127.x.x.x` or `::1`. */
export function isLoopback(address: string): boolean {
  const a = address.toLowerCase().replace(/^\[|\]$/g, "");
  return a === "localhost" || a === "::1" || (isIP(a) === 4 && a.startsWith("127."));
}

/** Whether `address` means every interface (`0.0.0.0`, `::`). */
export function isWildcard(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, "");
  return a === "0.0.0.0" || a === "::";
}

/** An address as it appears in a `Host` header or a URL: IPv6 in brackets, lower case. */
export function hostLiteral(address: string): string {
  const a = address.toLowerCase().replace(/^\[|\]$/g, "");
  return isIP(a) === 6 ? `[${a}]` : a;
}

/**
 * Validates an operator-given host name (`--allowed-host`): a DNS name, an IPv4 address or a bracketed IPv6 address,
 * optionally with `:PORT`. Returns it in lower case; throws an error naming the problem otherwise (no scheme, path,
 * wildcard or user part).
 */
export function parseAllowedHost(value: string): string {
  const v = value.trim().toLowerCase();
  const bad = (why: string) => new Error(`allowed host '${value}': ${why}`);
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(v);
  if (!m) throw bad("expected NAME or NAME:PORT (a host name, an IPv4 address or a bracketed IPv6 address; no scheme or path)");
  const [, name = "", port] = m;
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) throw bad(`port ${port} out of range`);
  if (name.startsWith("[")) {
    if (isIP(name.slice(1, -1)) !== 6) throw bad("not an IPv6 address");
  } else if (isIP(name) === 0 && !(name.length <= 253 && name.split(".").every((label) => LABEL.test(label)))) {
    throw bad("not a valid host name (letters, digits, '-' and '.' only; no wildcard)");
  }
  return port === undefined ? name : `${name}:${port}`;
}

/**
 * The `Host` header values a server listening on `address:port` answers: the address itself with the port; when it
 * listens on loopback or on every interface, `localhost`, `127.0.0.1` and `[::1]` with the port; and every
 * operator-given name (`NAME` allows `NAME` and `NAME:<port>`, `NAME:PORT` exactly that).
 */
export function allowedHosts(address: string, port: number, extra: readonly string[] = []): Set<string> {
  const hosts = new Set<string>();
  if (!isWildcard(address)) hosts.add(`${hostLiteral(address)}:${port}`);
  if (isLoopback(address) || isWildcard(address)) for (const name of LOOPBACK_NAMES) hosts.add(`${name}:${port}`);
  for (const value of extra) {
    const host = parseAllowedHost(value);
    hosts.add(host);
    if (!/:\d+$/.test(host)) hosts.add(`${host}:${port}`);
  }
  return hosts;
}

/** Why a request is refused: the status to answer and a short text. */
export interface Refusal {
  status: 403 | 421;
  reason: string;
}

/**
 * Checks a request's `Host` against `hosts` (421 when it names another server) and its `Origin`, when present,
 * against the server's own origin (`http://` or `https://` with the request's host) and `extraOrigins` (403).
 * Browsers send `Origin` with cross-origin requests and every WebSocket upgrade; tools like curl send none.
 */
export function refusal(
  req: IncomingMessage,
  hosts: ReadonlySet<string>,
  extraOrigins: (origin: string) => boolean = () => false,
): Refusal | undefined {
  const host = (req.headers.host ?? "").toLowerCase();
  if (!hosts.has(host)) return { status: 421, reason: `misdirected request: this server does not answer for host '${host.slice(0, 100)}'` };
  const origin = req.headers.origin;
  if (origin === undefined) return undefined;
  const o = origin.toLowerCase();
  if (o === `http://${host}` || o === `https://${host}` || extraOrigins(o)) return undefined;
  return { status: 403, reason: `forbidden: requests from origin '${origin.slice(0, 100)}' are not accepted` };
}

/** Whether `origin` is a page served from this machine over loopback (`http://localhost[:port]`, 127.0.0.1, [::1]). */
export function isLoopbackOrigin(origin: string): boolean {
  return /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/.test(origin.toLowerCase());
}

/**
 * Starts `server` listening on `address:port` (0: any free port) and answers the port it got, the `Host` values it
 * accepts ({@link allowedHosts}, with `extra`) and its base URL (`http://127.0.0.1:<port>` when it listens on every
 * interface). Shared by the inspector, `dirigent mcp --http` and `dirigent a2a`.
 */
export async function listenGuarded(
  server: Server,
  port: number,
  address: string,
  extra: readonly string[] = [],
): Promise<{ port: number; hosts: Set<string>; base: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, address, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const shown = isWildcard(address) ? "127.0.0.1" : hostLiteral(address);
  return { port: bound, hosts: allowedHosts(address, bound, extra), base: `http://${shown}:${bound}` };
}
