/**
 * `dirigent memory index DIR --summarize`: the description of each new or changed file is written by the model
 * from the head of the file, instead of being extracted. A file the model cannot describe keeps the extracted
 * description, with a warning.
 */
import { Semaphore } from "../../actors/limit.js";
import type { CallModel } from "../../actors/model.js";
import type { ChatMessage } from "../../machines/handler/session-context.js";
import { languageOf } from "./describe.js";
import { messageOf } from "../../protocol/errors.js";

/** Characters of a file's head the model reads. */
export const SUMMARY_HEAD_CHARS = 6000;
/** Model calls in flight at once, by default. */
export const SUMMARY_CONCURRENCY = 4;
/** Longest description kept. */
const MAX_SUMMARY = 240;

/** One file to describe. */
export interface SummaryInput {
  /** Path relative to the indexed directory (what the model is shown). */
  relative: string;
  /** Absolute path. */
  path: string;
  /** The head of the file, as text. */
  text: string;
  /** The description extracted from the text: the fallback. */
  extracted: string;
}

/** Writes a file's description; resolves to `undefined` when the extracted one must do. Never rejects. */
export type Summarize = (file: SummaryInput) => Promise<string | undefined>;

/** Options of {@link modelSummarizer}. */
export interface SummarizerOptions {
  callModel: CallModel;
  model: string;
  /** Model calls at once. Default {@link SUMMARY_CONCURRENCY}. */
  concurrency?: number;
  /** Characters of the head sent. Default {@link SUMMARY_HEAD_CHARS}. */
  headChars?: number;
  /** Hears about each file the model could not describe. */
  onWarning?: (path: string, message: string) => void;
  /** Aborts the calls in flight. */
  signal?: AbortSignal;
}

const SYSTEM =
  "You describe files for a search index that finds the files relevant to a programming task. " +
  "Answer with one line of at most 30 words: what the file is for and what it contains (main functions, types, topics). " +
  "No preamble, no quotes, no markdown.";

/** The messages asking for a file's description. */
export function summaryPrompt(file: SummaryInput, headChars = SUMMARY_HEAD_CHARS): ChatMessage[] {
  const head = file.text.length > headChars ? `${file.text.slice(0, headChars)}\n[… truncated]` : file.text;
  const language = languageOf(file.path);
  return [
    { role: "system", content: SYSTEM },
    { role: "user", content: `File: ${file.relative}${language ? ` (${language})` : ""}\n\n${head}` },
  ];
}

/**
 * Reads the model's answer: the first non-empty line, without quotes, list marks or a `Description:` label, on
 * one line, at most 240 characters.
 * @returns `undefined` when nothing is left.
 */
export function cleanSummary(content: string): string | undefined {
  const line = content
    .split("\n")
    .map((l) => l.trim())
    .find((l) => l !== "" && !/^```/.test(l));
  if (line === undefined) return undefined;
  const cleaned = line
    .replace(/^(?:[-*>•]\s+|\d+[.)]\s+)/, "")
    .replace(/^(?:\*\*)?(?:description|summary)(?:\*\*)?\s*:\s*/i, "")
    .replace(/^["'`“]+|["'`”]+$/g, "")
    .replace(/[\s;]+/g, (m) => (m.includes(";") ? ", " : " "))
    .trim();
  if (cleaned === "") return undefined;
  return cleaned.length > MAX_SUMMARY ? `${cleaned.slice(0, MAX_SUMMARY - 3)}...` : cleaned;
}

/** A {@link Summarize} over the model, at most `concurrency` calls at once. */
export function modelSummarizer(options: SummarizerOptions): Summarize {
  const slots = new Semaphore(options.concurrency ?? SUMMARY_CONCURRENCY);
  const signal = options.signal ?? new AbortController().signal;
  return (file) =>
    slots.run(async () => {
      try {
        const reply = await options.callModel({ model: options.model, messages: summaryPrompt(file, options.headChars) }, signal);
        const summary = cleanSummary(reply.content);
        if (summary === undefined) options.onWarning?.(file.path, "the model answered no description");
        return summary;
      } catch (err) {
        options.onWarning?.(file.path, messageOf(err));
        return undefined;
      }
    });
}
