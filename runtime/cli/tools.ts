/** `dirigent schema`, `dirigent mock-llm`, `dirigent demo`, and `dirigent tools list`: the tools a Handler offers. */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";
import type { Command } from "commander";
import { collect, parseInputs, readTemplate, setup, UsageError, untilSignal, type CommonFlags } from "./common.js";
import { DirigentClient } from "../client.js";
import { place } from "../nats/connect.js";
import { natsAuth } from "../nats/auth.js";
import { embeddedModel } from "../model/embedded.js";
import { loadMockScript, startMockLlm } from "../model/mock-server.js";
import { counted, formatEvent, formatOutcome } from "./output.js";
import { jsonSchemas } from "../schemas.js";
import { startSystem } from "../system.js";
import { loadConfig, type Config } from "../config.js";
import { connectNats, type NatsConnection } from "../nats/bus.js";
import { DEFAULT_NATS_URL } from "../nats/connect.js";
import { inboxPrefixFor } from "../nats/conf/permissions.js";
import { createSubjects } from "../../protocol/index.js";
import { configuredSources } from "../tools/configured.js";
import { composeTools, type ToolSource } from "../tools/source.js";
import { createMasker } from "../../actors/secrets.js";
import { secretValues } from "../secrets.js";
import { providerKeys } from "../model/providers.js";
import { builtinToolInfo, toolSelection } from "../tools/toolset.js";
import { oneLine, table, type Write } from "./templates.js";

/** The example task `dirigent demo` runs. */
export const DEMO_TASK = fileURLToPath(new URL("../../../examples/haiku.xml", import.meta.url));

/** Registers the tool commands. */
export function registerToolCommands(program: Command): void {
  program
    .command("schema")
    .description("print the JSON Schemas of every public message (or write them to a directory)")
    .option("--out <dir>", "write one <name>.json per message into this directory")
    .action(async (flags: { out?: string }) => {
      const schemas = jsonSchemas();
      if (!flags.out) {
        process.stdout.write(JSON.stringify(schemas, null, 2) + "\n");
        return;
      }
      await mkdir(flags.out, { recursive: true });
      for (const [name, schema] of Object.entries(schemas))
        await writeFile(join(flags.out, `${name}.json`), JSON.stringify(schema, null, 2) + "\n");
      process.stderr.write(`dirigent: wrote ${Object.keys(schemas).length} schemas to ${flags.out}\n`);
    });

  program
    .command("mock-llm")
    .description("serve an OpenAI-compatible chat-completions endpoint that answers from a script (the offline model)")
    .option("--port <port>", "port to listen on (0 = any free port)", "8787")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--script <file>", "JSON script of rules (see docs/mock-llm.md); without one it echoes")
    .option("--quiet", "do not log requests")
    .action(async (flags: { port: string; host: string; script?: string; quiet?: boolean }) => {
      const port = Number(flags.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError(`--port '${flags.port}': expected an integer from 0 to 65535`);
      const script = flags.script
        ? await loadMockScript(flags.script).catch((err: Error) => Promise.reject(new UsageError(err.message)))
        : undefined;
      const server = await startMockLlm({
        port,
        host: flags.host,
        ...(script ? { script } : {}),
        ...(flags.quiet ? {} : { log: (line: string) => process.stderr.write(line + "\n") }),
      });
      const signalled = untilSignal();
      process.stdout.write(`${server.url}\n`);
      process.stderr.write(`dirigent mock-llm: listening on ${server.url} (use OPENAI_BASE_URL=${server.url})\n`);
      await signalled;
      await server.close();
    });

  program
    .command("demo")
    .description("start a runtime and run the shipped example task end to end (offline unless OPENAI_API_KEY/OPENAI_BASE_URL are set)")
    .argument("[file]", "task template to run instead of the example")
    .option("-i, --input <key=value>", "bind a template input (repeatable)", collect, [])
    .option("--nats <url>", "NATS server URL (env NATS_URL)")
    .action(async (file: string | undefined, flags: CommonFlags & { input?: string[] }) => {
      const xml = await readTemplate(file ?? DEMO_TASK);
      const inputs = { topic: "the sea at dawn", ...parseInputs(flags.input ?? []) };
      const { config, subjects, log } = setup(flags, "dirigent-demo");
      const model = await embeddedModel(config);
      const placement = await place({
        ...(config.nats ? { url: config.nats } : {}),
        auth: natsAuth(config),
        replicas: config.replicas,
        scaleStreams: config.scaleStreams,
        subjects,
        log,
        name: "dirigent-demo",
        dataDir: config.dataDir,
        startServer: true,
      });
      const system = await startSystem({ config: model.config, transport: placement.transport, log, metrics: false });
      process.stderr.write(`dirigent: runtime on ${placement.note}\n`);
      if (model.note) process.stderr.write(`dirigent: ${model.note}\n`);
      try {
        const client = new DirigentClient(placement.transport.bus, subjects);
        const taskId = `demo-${randomUUID()}`;
        process.stdout.write(`task ${taskId}\n`);
        const outcome = await client.run({ xml, inputs, taskId }, (e) => process.stdout.write(formatEvent(e) + "\n"));
        process.stdout.write(formatOutcome(outcome) + "\n");
        process.exitCode = outcome.status === "COMPLETE" ? 0 : 1;
      } finally {
        await system.stop();
        await placement.close();
        await model.stop();
      }
    });
}

interface ListFlags {
  mcpConfig?: string;
  nats?: string;
  json?: boolean;
}

/** One tool as listed. */
export interface ListedTool {
  name: string;
  source: string;
  origin?: string;
  idempotent: boolean;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * The tools of a configuration: the enabled built-ins, the tools of the MCP servers (started to list them, then
 * closed) and, when `DIRIGENT_NATS_TOOLS` is on, those of the NATS services found now (on a connection of the
 * Handler's kind: its credentials work). TypeScript tools exist only in the program that passes them to
 * `startSystem`, so they are not here.
 * @throws {ToolSourceError} for a bad MCP configuration, a server that does not start, or a name taken twice.
 */
export async function listTools(
  flags: { mcpConfig?: string; nats?: string } = {},
  env: NodeJS.ProcessEnv = process.env,
): Promise<ListedTool[]> {
  const config = loadConfig({ mcpConfig: flags.mcpConfig, nats: flags.nats }, env);
  const nc =
    config.natsTools === "on"
      ? await connectNats({
          servers: config.nats ?? DEFAULT_NATS_URL,
          name: "dirigent-tools-list",
          maxReconnectAttempts: 0,
          ...natsAuth(config),
          inboxPrefix: inboxPrefixFor(["handler"], config.natsUser),
        })
      : undefined;
  try {
    return await listConfigured(config, nc);
  } finally {
    await nc?.close();
  }
}

async function listConfigured(config: Config, nc: NatsConnection | undefined): Promise<ListedTool[]> {
  const builtins: ToolSource = {
    kind: "builtin",
    name: "the built-in tools",
    tools: toolSelection(config.tools).enabled.map((name) => ({
      name,
      source: "builtin",
      ...builtinToolInfo(name),
      prepare: () => ({ ok: false, problems: "listed only" }),
    })),
    close: async () => {},
  };
  const nats = nc ? { connection: nc, subjects: createSubjects(config.prefix) } : undefined;
  const sources = [builtins, ...(await configuredSources({ ...config, toolDiscoveryMs: 0 }, undefined, nats))];
  // Shown as a Handler offers them: past the size caps left out, secrets masked (a description may quote one).
  const mask = createMasker([...secretValues(config), ...providerKeys(config), ...sources.flatMap((s) => s.secrets ?? [])]);
  const composed = composeTools(sources, {
    mask,
    maxDescriptionBytes: config.toolDescriptionMaxBytes,
    maxSchemaBytes: config.toolSchemaMaxBytes,
    onProblem: (message) => process.stderr.write(`dirigent: ${message}\n`),
  });
  try {
    const specs = composed.specs;
    return composed.definitions.flatMap(({ function: { name, description, parameters } }) => {
      const s = specs.get(name);
      if (!s) return [];
      return [
        { name, source: s.source, ...(s.origin ? { origin: mask(s.origin) } : {}), idempotent: s.idempotent, description, parameters },
      ];
    });
  } finally {
    await composed.close();
  }
}

/** Registers `dirigent tools …`. */
export function registerToolsListCommand(program: Command, write: Write = (text) => process.stdout.write(text)): void {
  const tools = program
    .command("tools")
    .description("the tools a Handler offers to the model: built-in, MCP servers, NATS services (see docs/tools.md)");
  tools
    .command("list")
    .description("list the tools of this configuration with their source (starts the MCP servers, asks the NATS services)")
    .option("--mcp-config <file>", "MCP servers configuration (env DIRIGENT_MCP_CONFIG)")
    .option("--nats <url>", "NATS server whose services are asked, with DIRIGENT_NATS_TOOLS=on (env NATS_URL)")
    .option("--json", "print the tools as JSON (with their parameters)")
    .action(async (flags: ListFlags) => {
      const listed = await listTools(flags);
      if (flags.json) {
        write(JSON.stringify({ tools: listed }, null, 2) + "\n");
        return;
      }
      const rows = listed.map((t) => [
        t.name,
        t.origin ? `${t.source}:${t.origin}` : t.source,
        t.idempotent ? "yes" : "no",
        oneLine(t.description, 70),
      ]);
      write(table(["NAME", "SOURCE", "IDEMPOTENT", "DESCRIPTION"], rows));
      write(`${counted(listed.length, "tool")}\n`);
    });
}
