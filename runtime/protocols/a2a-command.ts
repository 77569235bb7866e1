/** `dirigent a2a`: the template library and the task API as an A2A agent over HTTP (docs/protocols.md). */
import type { Command } from "commander";
import { collect, commonOptions, setup, untilSignal, type CommonFlags } from "../cli/common.js";
import { budgetFields, type BudgetFlags } from "../cli/budget.js";
import { isLoopback } from "../inspect/guard.js";
import { connectRuntime, libraryOf } from "./connect.js";
import { libraryTools } from "./library-tools.js";
import { TaskList } from "./task-calls.js";
import { listenFlags, type ListenFlags } from "./listen-flags.js";

/** The default port of `dirigent a2a`. */
export const DEFAULT_A2A_PORT = 4290;

interface A2aFlags extends CommonFlags, BudgetFlags, ListenFlags {
  port: string;
}

/** Registers `dirigent a2a`. */
export function registerA2aCommand(program: Command): void {
  commonOptions(
    program
      .command("a2a")
      .description("serve the template library and the task API as an A2A agent (agent card, JSON-RPC, SSE streaming)")
      .option("--port <n>", "port (0: any free port)", String(DEFAULT_A2A_PORT))
      .option("--host <address>", "interface (any but loopback needs --token-file)", "127.0.0.1")
      .option("--allowed-host <name>", "also answer requests for this host name (NAME or NAME:PORT, repeatable)", collect, [])
      .option("--token-file <file>", "file holding the bearer token every request must carry")
      .option("--max-tokens <n>", "token budget of every task started")
      .option("--max-cost <usd>", "cost budget of every task started (needs a price table, DIRIGENT_MODEL_PRICES)"),
  ).action(async (flags: A2aFlags) => {
    // The A2A SDK and its HTTP server are loaded by this command alone, not by every `dirigent` start.
    const { startA2aServer } = await import("./a2a-server.js");
    const { budget } = budgetFields({ ...flags, stream: false });
    const listen = await listenFlags(flags.port, flags, "--port");
    const { config, subjects, log } = setup(flags, "dirigent-a2a");
    const library = await libraryOf(config.templates, log);
    const runtime = await connectRuntime(config, subjects, log, "dirigent-a2a");
    try {
      const server = await startA2aServer({
        client: runtime.client,
        tools: libraryTools(library),
        ...(budget ? { budget } : {}),
        tasks: new TaskList(),
        version: "0.1.0",
        ...listen,
      });
      const signalled = untilSignal();
      process.stderr.write(
        `dirigent: A2A agent on ${server.url} (card at ${server.url}.well-known/agent-card.json; tasks run on ${runtime.note})\n`,
      );
      if (!isLoopback(listen.host)) process.stderr.write(`dirigent: WARNING: the A2A agent listens on ${listen.host}, not on loopback\n`);
      await signalled;
      await server.close();
    } finally {
      await runtime.close();
    }
  });
}
