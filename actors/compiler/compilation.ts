/**
 * One compilation: the model is asked for a template (or a decomposition), each answer is checked with the template
 * parser, and its errors are fed back as a user message for the next answer, a bounded number of times. Its hooks
 * hear about each invalid answer (the Compiler's progress and records, actors/compiler/records.ts) and continue after
 * answers recorded by an earlier run.
 */
import { errorReply, type CompileRequest, type CompileReply, type ErrorReply, type Usage } from "../../protocol/index.js";
import { checkTemplate, extractXml, initialMessages, retryMessage } from "./prompt.js";
import { messageOf } from "../deps.js";
import type { CallModel } from "../model.js";
import { RemoteError } from "../ask.js";

/** The default number of model answers per compilation. */
export const DEFAULT_COMPILE_ATTEMPTS = 3;

/** Observers of one compilation, and where it starts. */
export interface CompileHooks {
  /** Hears about each invalid answer that is followed by another attempt. */
  onRetry?: (info: { attempt: number; maxAttempts: number; errors: string[] }) => void;
  /**
   * Hears about each invalid answer that is followed by another attempt, before that attempt asks the model: every
   * answer so far (all invalid) and the tokens they used, what {@link CompileHooks.answered} continues from.
   */
  onAnswers?: (answers: readonly string[], usage: Usage) => Promise<void>;
  /** Invalid answers of an earlier run of this compilation (its record) and their tokens: not asked for again. */
  answered?: { answers: readonly string[]; usage: Usage };
}

/**
 * Runs one compilation: asks the model, validates, feeds errors back, up to `maxAttempts` answers.
 * @returns the reply, or an `INVALID_TEMPLATE` error reply (with `details: {attempts, errors}`) when no answer
 *   was valid.
 * @throws {RemoteError} `UNAVAILABLE` when the model request fails for good.
 */
export async function compileWithModel(
  request: CompileRequest,
  callModel: CallModel,
  options: { defaultModel: string; maxAttempts: number },
  signal: AbortSignal,
  hooks: CompileHooks = {},
): Promise<CompileReply | ErrorReply> {
  const maxAttempts = request.maxAttempts ?? options.maxAttempts;
  const messages = initialMessages(request);
  const recorded = hooks.answered?.answers ?? [];
  const usage: Usage = { ...(hooks.answered?.usage ?? { promptTokens: 0, completionTokens: 0 }) };
  const answers: string[] = [];
  const seen: string[] = [];
  let last: { errors: string[]; line?: number; col?: number } = { errors: [] };
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    // A recorded answer is checked again (the check is pure) rather than asked for again.
    let content = recorded[attempt - 1];
    if (content === undefined) {
      let answer: Awaited<ReturnType<CallModel>>;
      try {
        answer = await callModel({ model: request.model ?? options.defaultModel, messages }, signal);
      } catch (err) {
        if (signal.aborted) throw err;
        throw new RemoteError("UNAVAILABLE", `compiler: ${messageOf(err)}`, { cause: err });
      }
      usage.promptTokens += answer.usage.promptTokens;
      usage.completionTokens += answer.usage.completionTokens;
      content = answer.content;
    }
    answers.push(content);
    const xml = extractXml(content);
    const check = checkTemplate(xml, request.mode);
    if (check.ok) {
      return { type: "compiler.result", xml, attempts: attempt, ...(seen.length > 0 ? { errors: seen } : {}), usage };
    }
    last = check;
    seen.push(...check.errors.map((e) => `attempt ${attempt}: ${e}`));
    if (attempt < maxAttempts) {
      if (attempt > recorded.length) {
        hooks.onRetry?.({ attempt, maxAttempts, errors: check.errors });
        await hooks.onAnswers?.(answers, usage);
      }
      messages.push({ role: "assistant", content }, { role: "user", content: retryMessage(check.errors) });
    }
  }
  const what = request.mode === "decompose" ? "decomposition" : "template";
  return errorReply(
    "INVALID_TEMPLATE",
    `compiler: no valid ${what} after ${maxAttempts} attempt${maxAttempts === 1 ? "" : "s"}: ${last.errors.join("; ")}`,
    {
      ...(last.line ? { line: last.line } : {}),
      ...(last.col ? { col: last.col } : {}),
      details: { attempts: maxAttempts, errors: seen },
    },
  );
}
