/**
 * Associative matching requests to the Memory actor and its answers (the seed design's Memory system).
 * Request/reply on `<root>.memory.match` (queue group `memory`); the Evaluator is its only caller.
 */
import { z } from "zod";
import { TaskInputs } from "./tasks.js";

/** Context generation input, v4 fields plus the seed-era `taskText`. */
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
  /** Seed-era free text query. */
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
