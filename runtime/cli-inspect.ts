/** `dirigent inspect`: the inspector page for the whole cluster, and the bridge to Stately's inspector. */
import type { Command } from "commander";
import { messageOf } from "../actors/deps.js";
import { commonOptions, setup, untilSignal, UsageError, type CommonFlags } from "./cli-common.js";
import { DEFAULT_NATS_URL } from "./connect.js";
import { startInspectServer } from "./inspect-server.js";
import { natsTaskReplay } from "./inspect-replay.js";
import { startStatelyBridge, type StatelyBridge } from "./inspect-stately.js";
import { natsAuth } from "./nats-auth.js";
import { connectNats, NatsBus } from "./nats-bus.js";

/** The default port of the inspector page. */
export const DEFAULT_INSPECT_PORT = 4280;

interface InspectFlags extends CommonFlags {
  port: string;
  stately?: boolean;
  statelyPort: string;
}

function port(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag} '${value}': expected a port number`);
  return n;
}

/** Registers `dirigent inspect`. */
export function registerInspectCommand(program: Command): void {
  commonOptions(
    program
      .command("inspect")
      .description("serve the inspector page: every machine's chart, the live actors of the cluster, task timelines (processes publish with DIRIGENT_INSPECT=on)")
      .option("--port <n>", "port of the page on 127.0.0.1 (0: any free port)", String(DEFAULT_INSPECT_PORT))
      .option("--stately", "also forward the inspection events through @statelyai/inspect to the Stately inspector (needs the internet)")
      .option("--stately-port <n>", "port of the Stately bridge page and WebSocket", "8080"),
  ).action(async (flags: InspectFlags) => {
    const { config, subjects, log } = setup(flags, "dirigent-inspect");
    const pagePort = port(flags.port, "--port");
    const url = config.nats ?? DEFAULT_NATS_URL;
    const nc = await connectNats({ servers: url, name: "dirigent-inspect", ...natsAuth(config) }).catch((err: unknown) => {
      throw new Error(`cannot reach NATS at ${url}: ${messageOf(err)} (pass --nats URL)`);
    });
    const bus = new NatsBus(nc, { onError: (err, subject) => log.warn({ subject, err: messageOf(err) }, "inspection message failed") });
    let bridge: StatelyBridge | undefined;
    if (flags.stately) bridge = startStatelyBridge({ port: port(flags.statelyPort, "--stately-port") });
    const server = await startInspectServer({
      bus,
      subjects,
      port: pagePort,
      replay: natsTaskReplay(nc, subjects),
      onReplayError: (err) => log.warn({ err: messageOf(err) }, "cannot replay finished tasks from the events stream (does this NATS user have read access to it?)"),
      ...(bridge ? { onMessage: (m) => bridge?.forward(m) } : {}),
    });
    process.stderr.write(`dirigent: inspector on ${server.url} (NATS at ${bus.description}, subjects under '${subjects.root}')\n`);
    process.stderr.write(`dirigent: start runtime processes with DIRIGENT_INSPECT=on to see their actors\n`);
    if (bridge) process.stderr.write(`dirigent: Stately bridge on ${bridge.pageUrl} (the page frames stately.ai/inspect)\n`);
    await untilSignal();
    await server.close();
    bridge?.stop();
    await bus.close();
  });
}
