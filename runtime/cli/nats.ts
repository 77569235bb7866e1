/** `dirigent nats-conf`: the nats-server users and per-role permissions of one or more subject roots. */
import { Option, type Command } from "commander";
import { checkRoot, DEFAULT_ROOT } from "../../protocol/index.js";
import { UsageError } from "./common.js";
import { renderAuthorization, renderDevAuthorization, renderUsers } from "../nats/permissions.js";
import { messageOf } from "../../protocol/errors.js";

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

/** Registers `dirigent nats-conf`. */
export function registerNatsCommands(program: Command): void {
  program
    .command("nats-conf")
    .description(
      "print the nats-server authorization block (one user per role and root, passwords from $DIRIGENT_NATS_[<ROOT>_]<ROLE>_PASSWORD)",
    )
    .addOption(
      new Option(
        "--prefix <root>",
        "subject root (env DIRIGENT_PREFIX, default 'dirigent'); repeat it for several roots sharing one server",
      ).argParser(collect),
    )
    .option("--admin", "add a user `admin` (`<root>-admin`) limited to the JetStream API, for operators")
    .option("--users", "print only the entries of the `users` list, to add to a server configuration that has users already")
    .option("--dev", "the development block of nats.conf: public dev passwords and a `dev` user for clients without credentials")
    .action((flags: { prefix?: string[]; dev?: boolean; admin?: boolean; users?: boolean }) => {
      const roots = flags.prefix ?? [process.env["DIRIGENT_PREFIX"] ?? DEFAULT_ROOT];
      for (const root of roots) {
        try {
          checkRoot(root);
        } catch (err) {
          throw new UsageError(`--prefix '${root}': ${messageOf(err)}`);
        }
      }
      if (new Set(roots).size !== roots.length) throw new UsageError(`--prefix: a root is given twice (${roots.join(", ")})`);
      const nested = roots.find((a) => roots.some((b) => b.startsWith(`${a}.`)));
      if (nested !== undefined)
        throw new UsageError(`--prefix: roots under root '${nested}' share its subjects; choose roots that do not nest`);
      if (flags.dev && (roots.length > 1 || flags.users)) throw new UsageError("--dev is the block of one root's development server");
      const admin = flags.admin === true;
      process.stdout.write(
        flags.dev
          ? renderDevAuthorization(roots[0])
          : flags.users
            ? roots.flatMap((root) => renderUsers(root, { admin })).join("\n") + "\n"
            : renderAuthorization(roots, { admin }),
      );
    });
}
