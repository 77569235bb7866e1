/** `dirigent nats-conf`: the nats-server users and per-role permissions of a subject root. */
import { Option, type Command } from "commander";
import { checkRoot, DEFAULT_ROOT } from "../../protocol/index.js";
import { UsageError } from "./common.js";
import { renderAuthorization, renderDevAuthorization } from "../nats/permissions.js";
import { messageOf } from "../../protocol/errors.js";

/** Registers `dirigent nats-conf`. */
export function registerNatsCommands(program: Command): void {
  program
    .command("nats-conf")
    .description("print the nats-server authorization block (one user per role, passwords from $DIRIGENT_NATS_<ROLE>_PASSWORD)")
    .addOption(new Option("--prefix <root>", "subject root (env DIRIGENT_PREFIX, default 'dirigent')"))
    .option("--admin", "add a user `admin` limited to the JetStream API, for operators (password $DIRIGENT_NATS_ADMIN_PASSWORD)")
    .option("--dev", "the development block of nats.conf: public dev passwords and a `dev` user for clients without credentials")
    .action((flags: { prefix?: string; dev?: boolean; admin?: boolean }) => {
      const root = flags.prefix ?? process.env["DIRIGENT_PREFIX"] ?? DEFAULT_ROOT;
      try {
        checkRoot(root);
      } catch (err) {
        throw new UsageError(`--prefix '${root}': ${messageOf(err)}`);
      }
      process.stdout.write(flags.dev ? renderDevAuthorization(root) : renderAuthorization(root, { admin: flags.admin === true }));
    });
}
