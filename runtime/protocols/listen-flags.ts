/** The listening flags of the protocol servers (`dirigent mcp --http`, `dirigent a2a`): port, host, host names, token. */
import { isIP } from "node:net";
import { UsageError } from "../cli/common.js";
import { parseAllowedHost } from "../inspect/guard.js";
import { checkListen, ListenError, readToken } from "./http-guard.js";
import { messageOf } from "../../protocol/errors.js";

/** The flags as commander gives them. */
export interface ListenFlags {
  host: string;
  allowedHost: string[];
  tokenFile?: string;
}

/** Where and how a protocol server listens. */
export interface Listen {
  port: number;
  host: string;
  allowedHosts: string[];
  token?: string;
}

/** Checks the flags; a bad value, or an address beyond loopback without a token, is a usage error. */
export async function listenFlags(portText: string, flags: ListenFlags, portFlag: string): Promise<Listen> {
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) throw new UsageError(`${portFlag} '${portText}': expected a port number`);
  const host = flags.host.replace(/^\[|\]$/g, "");
  if (host !== "localhost" && isIP(host) === 0)
    throw new UsageError(`--host '${flags.host}': expected an IP address of this machine's interface (or localhost)`);
  const allowedHosts = flags.allowedHost.map((name) => {
    try {
      return parseAllowedHost(name);
    } catch (err) {
      throw new UsageError(`--allowed-host: ${messageOf(err)}`);
    }
  });
  try {
    const token = flags.tokenFile === undefined ? undefined : await readToken(flags.tokenFile);
    checkListen(host, token, "server");
    return { port, host, allowedHosts, ...(token === undefined ? {} : { token }) };
  } catch (err) {
    throw err instanceof ListenError ? new UsageError(err.message) : err;
  }
}
