#!/usr/bin/env node
/**
 * The `dirigent` command. Exit codes: 0 success (a task COMPLETE), 1 failure (a task FAILED or CANCELLED, a
 * runtime error), 2 usage errors and invalid templates.
 */
import { Command, CommanderError } from "commander";
import { UsageError } from "./cli/common.js";
import { ConfigError } from "./config.js";
import { registerRuntimeCommands } from "./cli/runtime.js";
import { registerTaskCommands } from "./cli/tasks.js";
import { registerCompileCommand } from "./cli/compile.js";
import { registerToolCommands, registerToolsListCommand } from "./cli/tools.js";
import { registerMemoryCommands } from "./cli/memory.js";
import { registerMachineCommands } from "./cli/machines.js";
import { registerTemplateCommands } from "./cli/templates.js";
import { registerNatsCommands, registerNatsSetupCommand } from "./cli/nats.js";
import { registerInspectCommand } from "./cli/inspect.js";
import { registerCheckmateCommand } from "./cli/checkmate.js";
import { registerGoalCommands } from "./cli/goals.js";
import { registerHealthCommand } from "./cli/health.js";
import { registerMcpCommand } from "./protocols/mcp-command.js";
import { registerA2aCommand } from "./protocols/a2a-command.js";
import { messageOf } from "../protocol/errors.js";

const program = new Command()
  .name("dirigent")
  .description("Actor-model runtime for LLM task orchestration over NATS")
  .version("0.1.0")
  .exitOverride()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) })
  .showHelpAfterError("(run 'dirigent --help' for usage)");

registerRuntimeCommands(program);
registerTaskCommands(program);
registerCompileCommand(program);
registerToolCommands(program);
registerToolsListCommand(program);
registerMemoryCommands(program);
registerMachineCommands(program);
registerTemplateCommands(program);
registerNatsCommands(program);
registerNatsSetupCommand(program);
registerInspectCommand(program);
registerCheckmateCommand(program);
registerGoalCommands(program);
registerHealthCommand(program);
registerMcpCommand(program);
registerA2aCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`dirigent: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`dirigent: ${messageOf(err)}\n`);
    process.exitCode = 1;
  }
}
