/** `dirigent inspect`: the inspector page for the whole cluster, and the bridge to Stately's inspector. */
import type { Command } from "commander";
import { messageOf } from "../../actors/deps.js";
import { isIP } from "node:net";
import { collect, commonOptions, setup, untilSignal, UsageError, type CommonFlags } from "./common.js";
import { DEFAULT_NATS_URL } from "../nats/connect.js";
import { isLoopback, parseAllowedHost } from "../inspect/guard.js";
import { startInspectServer, type InspectServer } from "../inspect/server.js";
import { natsTaskReplay } from "../inspect/replay.js";
import { startStatelyBridge, type StatelyBridge } from "../inspect/stately.js";
import { natsAuth } from "../nats/auth.js";
import { connectNats, NatsBus } from "../nats/bus.js";

/** The default port of the inspector page. */
export const DEFAULT_INSPECT_PORT = 4280;

interface InspectFlags extends CommonFlags {
  port: string;
  host: string;
  allowedHost: string[];
  stately?: boolean;
  statelyPort: string;
  statelyHost: string;
}

function port(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag} '${value}': expected a port number`);
  return n;
}

function address(value: string, flag: string): string {
  const bare = value.replace(/^\[|\]$/g, "");
  if (bare !== "localhost" && isIP(bare) === 0)
    throw new UsageError(`${flag} '${value}': expected an IP address of this machine's interface (or localhost)`);
  return bare;
}

/** The warning printed when a server listens beyond loopback: it shows every task's content to whoever reaches it. */
function exposedWarning(what: string, host: string, allowed: readonly string[]): string {
  const names = allowed.length > 0 ? `, and for ${allowed.join(", ")}` : " (add names with --allowed-host)";
  return `dirigent: WARNING: the ${what} listens on ${host}, not on loopback: anyone who can reach this address sees every task's content; it answers only requests for that address${names}\n`;
}

/** Registers `dirigent inspect`. */
export function registerInspectCommand(program: Command): void {
  commonOptions(
    program
      .command("inspect")
      .description(
        "serve the inspector page: every machine's chart, the live actors of the cluster, task timelines (processes publish with DIRIGENT_INSPECT=on)",
      )
      .option("--port <n>", "port of the page (0: any free port)", String(DEFAULT_INSPECT_PORT))
      .option("--host <address>", "interface the page listens on (beyond loopback, anyone reaching it sees every task)", "127.0.0.1")
      .option(
        "--allowed-host <name>",
        "also answer requests for this host name (NAME or NAME:PORT, repeatable; e.g. behind a proxy)",
        collect,
        [],
      )
      .option("--stately", "also forward the inspection events through @statelyai/inspect to the Stately inspector (needs the internet)")
      .option("--stately-port <n>", "port of the Stately bridge page and WebSocket", "8080")
      .option("--stately-host <address>", "interface the Stately bridge listens on", "127.0.0.1"),
  ).action(async (flags: InspectFlags) => {
    const { config, subjects, log } = setup(flags, "dirigent-inspect");
    const pagePort = port(flags.port, "--port");
    const host = address(flags.host, "--host");
    const statelyHost = address(flags.statelyHost, "--stately-host");
    const allowedHosts = flags.allowedHost.map((name) => {
      try {
        return parseAllowedHost(name);
      } catch (err) {
        throw new UsageError(`--allowed-host: ${messageOf(err)}`);
      }
    });
    const statelyPort = flags.stately ? port(flags.statelyPort, "--stately-port") : 0;
    const url = config.nats ?? DEFAULT_NATS_URL;
    const nc = await connectNats({ servers: url, name: "dirigent-inspect", ...natsAuth(config) }).catch((err: unknown) => {
      throw new Error(`cannot reach NATS at ${url}: ${messageOf(err)} (pass --nats URL)`);
    });
    const bus = new NatsBus(nc, { onError: (err, subject) => log.warn({ subject, err: messageOf(err) }, "inspection message failed") });
    let bridge: StatelyBridge | undefined;
    let server: InspectServer;
    try {
      if (flags.stately) bridge = await startStatelyBridge({ port: statelyPort, host: statelyHost, allowedHosts });
      server = await startInspectServer({
        bus,
        subjects,
        port: pagePort,
        host,
        allowedHosts,
        replay: natsTaskReplay(nc, subjects),
        onReplayError: (err) =>
          log.warn(
            { err: messageOf(err) },
            "cannot replay finished tasks from the events stream (does this NATS user have read access to it?)",
          ),
        onClientDropped: (reason) => log.warn({}, reason),
        ...(bridge ? { onMessage: (m) => bridge?.forward(m) } : {}),
      });
    } catch (err) {
      // A port in use or a bad address: release what started, so the process exits with the error.
      await bridge?.stop();
      await bus.close();
      throw err;
    }
    const signalled = untilSignal();
    process.stderr.write(`dirigent: inspector on ${server.url} (NATS at ${bus.description}, subjects under '${subjects.root}')\n`);
    process.stderr.write(`dirigent: start runtime processes with DIRIGENT_INSPECT=on to see their actors\n`);
    if (!isLoopback(host)) process.stderr.write(exposedWarning("inspector", host, allowedHosts));
    if (bridge) process.stderr.write(`dirigent: Stately bridge on ${bridge.pageUrl} (the page frames stately.ai/inspect)\n`);
    if (bridge && !isLoopback(statelyHost)) process.stderr.write(exposedWarning("Stately bridge", statelyHost, allowedHosts));
    await signalled;
    await server.close();
    await bridge?.stop();
    await bus.close();
  });
}
