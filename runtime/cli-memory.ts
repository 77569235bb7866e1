/** `dirigent memory index DIR` and `dirigent memory match QUERY`: building and tuning the global file index. */
import { Option, type Command } from "commander";
import { IndexRanker } from "../actors/memory-rank.js";
import { collect, commonOptions, setup, UsageError, type CommonFlags } from "./cli-common.js";
import { place, type Placement } from "./connect.js";
import { GlobError } from "./memory-gitignore.js";
import { updateIndex } from "./memory-indexer.js";

/** Where the commands write their output (stdout by default; tests capture it). */
export type Write = (text: string) => void;

interface IndexFlags extends CommonFlags {
  include: string[];
  exclude: string[];
  maxFileSize?: string;
}

interface MatchFlags extends CommonFlags {
  limit: string;
  json?: boolean;
}

/** Parses a byte count such as `1048576`, `512k` or `2M`. */
export function parseSize(text: string): number {
  const match = /^(\d+)\s*([kKmM]?)[bB]?$/.exec(text.trim());
  if (!match) throw new UsageError(`--max-file-size '${text}': expected a number of bytes such as 65536, 512k or 2M`);
  const factor = match[2]?.toLowerCase() === "k" ? 1024 : match[2]?.toLowerCase() === "m" ? 1024 * 1024 : 1;
  const bytes = Number(match[1]) * factor;
  if (bytes <= 0) throw new UsageError(`--max-file-size '${text}': must be more than 0`);
  return bytes;
}

/** Registers `dirigent memory …`. */
export function registerMemoryCommands(program: Command, write: Write = (text) => process.stdout.write(text)): void {
  const memory = program.command("memory").description("the global file-metadata index the Memory role matches against");

  commonOptions(
    memory
      .command("index")
      .description("index the files of a directory (respecting .gitignore) into the shared index; unchanged files are not read again")
      .argument("<dir>", "directory to index; entries below it are replaced, entries elsewhere kept")
      .addOption(new Option("--include <glob>", "index only files matching this glob (repeatable)").argParser(collect).default([]))
      .addOption(new Option("--exclude <glob>", "skip files and directories matching this glob (repeatable)").argParser(collect).default([]))
      .option("--max-file-size <bytes>", "skip larger files (512k, 2M; default 1M)"),
  ).action(async (dir: string, flags: IndexFlags) => {
    const maxFileSize = flags.maxFileSize === undefined ? undefined : parseSize(flags.maxFileSize);
    await withIndex(flags, "dirigent-memory-index", async (placement) => {
      let result;
      try {
        result = await updateIndex(placement.transport.index, dir, {
          include: flags.include,
          exclude: flags.exclude,
          ...(maxFileSize === undefined ? {} : { maxFileSize }),
        });
      } catch (err) {
        if (err instanceof GlobError || (err instanceof Error && err.message.startsWith("cannot index"))) throw new UsageError(err.message);
        throw err;
      }
      const { stats, generation, written } = result;
      const counts = `${stats.files} files (read ${stats.read}, unchanged ${stats.reused}, skipped ${stats.skipped})`;
      write(written ? `indexed ${counts} as generation ${generation} on ${placement.transport.description}\n` : `nothing changed in ${counts}: generation ${generation} stays\n`);
    });
  });

  commonOptions(
    memory
      .command("match")
      .description("print the files the Memory role would match for a query, best first (path, score, relevance)")
      .argument("<query>", "a task description")
      .option("--limit <n>", "at most this many matches", "20")
      .option("--json", "print the matches as JSON"),
  ).action(async (query: string, flags: MatchFlags) => {
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit '${flags.limit}': expected a positive integer`);
    await withIndex(flags, "dirigent-memory-match", async (placement) => {
      const { entries, generation } = await placement.transport.index.getGlobalIndex();
      const matches = new IndexRanker(entries).match(query, limit);
      if (flags.json) {
        write(JSON.stringify({ generation, entries: entries.length, matches }, null, 2) + "\n");
        return;
      }
      if (entries.length === 0) write("the index is empty: build it with 'dirigent memory index DIR'\n");
      else if (matches.length === 0) write(`no matches among ${entries.length} files\n`);
      for (const m of matches) write(`${(m.score ?? 0).toFixed(3)}  ${m.path}\n       ${m.relevance}\n`);
    });
  });
}

/** Connects to NATS (the index is shared there; an in-process index would vanish with this command). */
async function withIndex(flags: CommonFlags, name: string, run: (placement: Placement) => Promise<void>): Promise<void> {
  const { config, subjects, log } = setup(flags, name);
  const placement = await place({ ...(config.nats ? { url: config.nats } : {}), subjects, log, name, dataDir: config.dataDir, startServer: false });
  try {
    if (placement.transport.kind === "memory") throw new Error("no NATS server reachable: the index lives in NATS; start one with 'dirigent up' or pass --nats URL");
    await run(placement);
  } finally {
    await placement.close();
  }
}
