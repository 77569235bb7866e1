/**
 * Associative matching requests to the Memory actor and its answers: which indexed files are relevant to a task.
 * Request/reply on `<root>.memory.match` (queue group `memory`); the Evaluator is its only caller.
 */
import { z } from "zod";
import { TaskInputs } from "./tasks.js";

/** Context generation input: the template-aware fields, plus `taskText` for callers written for the earlier free-text format. */
export const MatchRequest = z.object({
  type: z.literal("memory.match"),
  /** The substituted task description: the matching query. */
  templateDescription: z.string(),
  /** Task type of the requesting node. */
  templateType: z.string(),
  /** Task subtype, when any. */
  templateSubtype: z.string().optional(),
  /** The node's inputs. */
  inputs: TaskInputs,
  /** Context inherited from the parent. */
  inheritedContext: z.string().optional(),
  /** Outputs of earlier steps. */
  previousOutputs: z.array(z.string()).optional(),
  /** Free-text query, accepted from callers written for the earlier format; it joins the matching query. */
  taskText: z.string().optional(),
});
export type MatchRequest = z.infer<typeof MatchRequest>;

/** A file found relevant to the request. */
export const FileMatch = z.object({
  /** Absolute path of the file. */
  path: z.string(),
  /** Why it is relevant. */
  relevance: z.string(),
  /** Score in [0, 1], higher is better. */
  score: z.number().optional(),
});
export type FileMatch = z.infer<typeof FileMatch>;

/** The result of associative matching. */
export const MatchReply = z.object({
  type: z.literal("memory.matched"),
  /** A short text describing the context found. */
  context: z.string(),
  /** Files found, best first. */
  matches: z.array(FileMatch),
});
export type MatchReply = z.infer<typeof MatchReply>;

/**
 * Longest `identifiers` field of an index entry, in characters. The indexer writes at most 1,000; a larger field
 * (another writer, a hostile one) is refused when written and when read.
 */
export const MAX_IDENTIFIERS_CHARS = 2000;

/**
 * An entry of the global file-metadata index (the JSON of the index chunks in KV): a file's absolute path and its
 * metadata, never its contents.
 */
export const IndexEntry = z.object({
  /** Absolute path. */
  path: z.string(),
  /** Language, size and a short description, as free text. */
  metadata: z.string(),
  /** Size and modification time when indexed (`<size>:<mtimeMs>` and a suffix), so re-indexing can skip unchanged files. */
  stamp: z.string().optional(),
  /**
   * Optional (entries written before it have none): names the file defines or uses, space-separated (functions,
   * classes, methods, constants, option keys, Markdown headings and code spans), at most
   * {@link MAX_IDENTIFIERS_CHARS}. Ranked with a lower weight than the path and the metadata.
   */
  identifiers: z.string().max(MAX_IDENTIFIERS_CHARS).optional(),
});
export type IndexEntry = z.infer<typeof IndexEntry>;
