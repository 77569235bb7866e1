/** `dirigent memory index DIR` and `dirigent memory match QUERY`: building and tuning the global file index. */
import { realpath } from "node:fs/promises";
import { resolve } from "node:path";
import { Option, type Command } from "commander";
import { chooseWithModel, LLM_CANDIDATES } from "../../actors/memory/llm.js";
import { IndexRanker, toFileMatch } from "../../actors/memory/rank.js";
import { isInside } from "../tools/workspace.js";
import type { FileMatch, MatchRequest } from "../../protocol/index.js";
import { collect, commonOptions, setup, UsageError, type CommonFlags } from "./common.js";
import { placeClient, type Placement } from "../nats/connect.js";
import { GlobError } from "../indexer/gitignore.js";
import { updateIndex } from "../indexer/indexer.js";
import { embeddedModel } from "../model/embedded.js";
import { memoryModelClient } from "../model/memory-model.js";
import { modelSummarizer, SUMMARY_CONCURRENCY, type Summarize } from "../indexer/summarize.js";
import type { Config } from "../config.js";

/** Where the commands write their output (stdout by default; tests capture it). */
export type Write = (text: string) => void;

interface IndexFlags extends CommonFlags {
  include: string[];
  exclude: string[];
  maxFileSize?: string;
  summarize?: boolean;
  summarizeConcurrency?: string;
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

/** Registers `dirigent memory …`; `write` prints results, `note` progress and warnings (stderr by default). */
export function registerMemoryCommands(
  program: Command,
  write: Write = (text) => process.stdout.write(text),
  note: Write = (text) => process.stderr.write(text),
): void {
  const memory = program.command("memory").description("the global file-metadata index the Memory role matches against");
  registerIndexCommand(memory, write, note);
  registerMatchCommand(memory, write, note);
}

/** `dirigent memory index DIR`: indexes a directory into the shared index, with the model's descriptions on `--summarize`. */
function registerIndexCommand(memory: Command, write: Write, note: Write): void {
  commonOptions(
    memory
      .command("index")
      .description("index the files of a directory (respecting .gitignore) into the shared index; unchanged files are not read again")
      .argument("<dir>", "directory to index; entries below it are replaced, entries elsewhere kept")
      .addOption(new Option("--include <glob>", "index only files matching this glob (repeatable)").argParser(collect).default([]))
      .addOption(
        new Option("--exclude <glob>", "skip files and directories matching this glob (repeatable)").argParser(collect).default([]),
      )
      .option("--max-file-size <bytes>", "skip larger files (512k, 2M; default 1M)")
      .option("--summarize", "let the model write each new or changed file's description from the file's head")
      .option("--summarize-concurrency <n>", `model calls at once with --summarize (default ${SUMMARY_CONCURRENCY})`)
      .option("--model <id>", "model of --summarize (env DIRIGENT_MODEL)"),
  ).action(async (dir: string, flags: IndexFlags) => {
    const maxFileSize = flags.maxFileSize === undefined ? undefined : parseSize(flags.maxFileSize);
    const concurrency = Number(flags.summarizeConcurrency ?? SUMMARY_CONCURRENCY);
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new UsageError(`--summarize-concurrency '${flags.summarizeConcurrency}': expected a positive integer`);
    await withIndex(flags, "dirigent-memory-index", async (placement, config) => {
      const { stats, generation, written } = await indexDirectory(placement, config, dir, flags, { maxFileSize, concurrency, note });
      const counts = `${stats.files} files (read ${stats.read}, unchanged ${stats.reused}, skipped ${stats.skipped})`;
      write(
        written
          ? `indexed ${counts} as generation ${generation} on ${placement.transport.description}\n`
          : `nothing changed in ${counts}: generation ${generation} stays\n`,
      );
    });
  });
}

/** Indexes `dir` into the shared index; with `--summarize` and a real model, the model describes each new or changed file. */
async function indexDirectory(
  placement: Placement,
  config: Config,
  dir: string,
  flags: IndexFlags,
  options: { maxFileSize: number | undefined; concurrency: number; note: Write },
): Promise<Awaited<ReturnType<typeof updateIndex>>> {
  const { maxFileSize, concurrency, note } = options;
  const offline = !config.openaiApiKey && !config.openaiBaseUrl;
  // The offline mock model cannot describe a file: its answers would be stored as descriptions.
  if (flags.summarize && offline)
    note(
      "dirigent: no OPENAI_API_KEY or OPENAI_BASE_URL set: the offline mock model writes no descriptions, so the extracted ones are kept\n",
    );
  const model = flags.summarize && !offline ? await embeddedModel(config) : undefined;
  try {
    let warnings = 0;
    const summarize: Summarize | undefined =
      model &&
      modelSummarizer({
        callModel: memoryModelClient(model.config),
        model: model.config.model,
        concurrency,
        onWarning: (path, message) => {
          warnings++;
          note(`warning: ${path}: the model wrote no description (${message.split("\n")[0]}); the extracted one is kept\n`);
        },
      });
    const every = Math.max(1, concurrency * 5);
    const result = await updateIndex(placement.transport.index, dir, {
      include: flags.include,
      exclude: flags.exclude,
      ...(maxFileSize === undefined ? {} : { maxFileSize }),
      ...(summarize
        ? {
            summarize,
            onProgress: ({ done, total, path }) => {
              if (done % every === 0 || done === total) note(`summarized ${done}/${total} files (last: ${path})\n`);
            },
          }
        : {}),
    });
    if (summarize) note(`the model described ${result.stats.summarized ?? 0} files; ${warnings} kept the extracted description\n`);
    return result;
  } catch (err) {
    if (err instanceof GlobError || (err instanceof Error && err.message.startsWith("cannot index"))) throw new UsageError(err.message);
    throw err;
  } finally {
    await model?.stop();
  }
}

/** `dirigent memory match QUERY`: the files the Memory role would match, ranked, or chosen by the model with `llmMatch`. */
function registerMatchCommand(memory: Command, write: Write, note: Write): void {
  commonOptions(
    memory
      .command("match")
      .description("print the files the Memory role would match for a query, best first (path, score, relevance)")
      .argument("<query>", "a task description")
      .option("--limit <n>", "at most this many matches", "20")
      .option("--json", "print the matches as JSON")
      .option("--model <id>", "model of --llm-match (env DIRIGENT_MODEL)"),
  ).action(async (query: string, flags: MatchFlags) => {
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit '${flags.limit}': expected a positive integer`);
    await withIndex(flags, "dirigent-memory-match", async (placement, config) => {
      const { entries, generation } = await placement.transport.index.getGlobalIndex();
      const ranker = new IndexRanker(entries);
      const { matches, context } =
        config.llmMatch && entries.length > 0
          ? await matchWithModel(config, ranker, query, { limit, total: entries.length, note })
          : { matches: ranker.match(query, limit), context: undefined };
      const outside = await outsideWorkspace(matches, config.workspaceRoot);
      if (outside.length > 0) {
        note(
          `warning: ${outside.length} of ${matches.length} matches lie outside the workspace root '${config.workspaceRoot}' (DIRIGENT_WORKSPACE_ROOT), such as ${outside[0]}: a task cannot attach them (they land in context_file_errors)\n`,
        );
      }
      if (flags.json) {
        write(
          JSON.stringify({ generation, entries: entries.length, ...(context === undefined ? {} : { context }), matches }, null, 2) + "\n",
        );
        return;
      }
      if (entries.length === 0) write("the index is empty: build it with 'dirigent memory index DIR'\n");
      else if (context !== undefined) write(`${context}\n`);
      else if (matches.length === 0) write(`no matches among ${entries.length} files\n`);
      for (const m of matches) write(`${(m.score ?? 0).toFixed(3)}  ${m.path}\n       ${m.relevance}\n`);
    });
  });
}

/** The matches the model chooses among the ranker's best candidates for `query`, as the Memory role's `llmMatch` does. */
async function matchWithModel(
  config: Config,
  ranker: IndexRanker,
  query: string,
  options: { limit: number; total: number; note: Write },
): Promise<{ matches: FileMatch[]; context?: string | undefined }> {
  const { limit, total, note } = options;
  const model = await embeddedModel(config);
  if (model.note) note(`dirigent: ${model.note}\n`);
  try {
    const llm = { callModel: memoryModelClient(model.config), model: model.config.model };
    const request: MatchRequest = { type: "memory.match", templateDescription: query, templateType: "atomic", inputs: {} };
    const candidates = ranker.rank(query, Math.max(limit, LLM_CANDIDATES));
    const signal = AbortSignal.timeout(config.modelTimeoutMs * (config.modelMaxRetries + 1) + config.modelRetryBudgetMs);
    return await chooseWithModel(request, candidates, candidates.slice(0, limit).map(toFileMatch), {
      ...llm,
      limit,
      total,
      signal,
      timeoutMs: config.modelTimeoutMs,
    });
  } finally {
    await model.stop();
  }
}

/** The matched paths a Handler with workspace root `root` could not read. */
async function outsideWorkspace(matches: readonly FileMatch[], root: string): Promise<string[]> {
  const lexical = resolve(root);
  const real = await realpath(lexical).catch(() => lexical);
  return matches.map((m) => resolve(m.path)).filter((path) => !isInside(real, path) && !isInside(lexical, path));
}

/** Connects to NATS (the index is shared there; an in-process index would vanish with this command). */
async function withIndex(flags: CommonFlags, name: string, run: (placement: Placement, config: Config) => Promise<void>): Promise<void> {
  const { config, subjects, log } = setup(flags, name);
  const placement = await placeClient(config, subjects, log, name, ["memory"]);
  try {
    if (placement.transport.kind === "memory")
      throw new Error("no NATS server reachable: the index lives in NATS; start one with 'dirigent up' or pass --nats URL");
    await run(placement, config);
  } finally {
    await placement.close();
  }
}
