/** `dirigent mcp`: the template library and the task API as an MCP server, over stdio or Streamable HTTP (docs/protocols.md). */
import type { Command } from "commander";
import { collect, commonOptions, setup, untilSignal, type CommonFlags } from "../cli/common.js";
import { budgetFields, type BudgetFlags } from "../cli/budget.js";
import { isLoopback } from "../inspect/guard.js";
import { connectRuntime, libraryOf } from "./connect.js";
import { libraryTools } from "./library-tools.js";
import type { McpServerDeps } from "./mcp-server.js";
import { TaskList } from "./task-calls.js";
import { listenFlags, type ListenFlags } from "./listen-flags.js";
import { messageOf } from "../../protocol/errors.js";

interface McpFlags extends CommonFlags, BudgetFlags, ListenFlags {
  http?: string;
}

/** Registers `dirigent mcp`. */
export function registerMcpCommand(program: Command): void {
  commonOptions(
    program
      .command("mcp")
      .description("serve the template library and the task API as an MCP server, over stdio (default) or Streamable HTTP")
      .option("--http <port>", "serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (0: any free port)")
      .option("--host <address>", "interface of the HTTP server (any but loopback needs --token-file)", "127.0.0.1")
      .option("--allowed-host <name>", "also answer requests for this host name (NAME or NAME:PORT, repeatable)", collect, [])
      .option("--token-file <file>", "file holding the bearer token every HTTP request must carry")
      .option("--max-tokens <n>", "token budget of every task started")
      .option("--max-cost <usd>", "cost budget of every task started (needs a price table, DIRIGENT_MODEL_PRICES)"),
  ).action(async (flags: McpFlags) => {
    // The MCP SDK is loaded by this command alone, not by every `dirigent` start.
    const { createMcpServer } = await import("./mcp-server.js");
    const { budget } = budgetFields({ ...flags, stream: false });
    const listen = flags.http === undefined ? undefined : await listenFlags(flags.http, flags, "--http");
    const { config, subjects, log } = setup(flags, "dirigent-mcp");
    const library = await libraryOf(config.templates, log);
    const runtime = await connectRuntime(config, subjects, log, "dirigent-mcp");
    const deps: McpServerDeps = {
      client: runtime.client,
      tools: libraryTools(library),
      ...(budget ? { budget } : {}),
      tasks: new TaskList(),
      version: "0.1.0",
    };
    try {
      if (listen) {
        const { startMcpHttp } = await import("./mcp-http.js");
        const http = await startMcpHttp({
          newServer: () => createMcpServer(deps),
          ...listen,
          onError: (err) => log.warn({ err: messageOf(err) }, "MCP request failed"),
        });
        const signalled = untilSignal();
        process.stderr.write(
          `dirigent: MCP server on ${http.url} (${deps.tools.length} library templates; tasks run on ${runtime.note})\n`,
        );
        if (!isLoopback(listen.host))
          process.stderr.write(`dirigent: WARNING: the MCP server listens on ${listen.host}, not on loopback\n`);
        await signalled;
        await http.close();
      } else {
        const server = createMcpServer(deps);
        const closed = new Promise<void>((resolve) => (server.onclose = resolve));
        const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
        await server.connect(new StdioServerTransport());
        const signalled = untilSignal();
        process.stderr.write(`dirigent: MCP server on stdio (${deps.tools.length} library templates; tasks run on ${runtime.note})\n`);
        await Promise.race([closed, signalled]);
        await server.close();
      }
    } finally {
      await runtime.close();
    }
  });
}
