/**
 * Reparse (docs/task-language.md): an atomic task that ran out of a resource (turns, context, output) — or failed
 * with `details.recoverable: true` — is handed to the Compiler, which decomposes it into a smaller sub-tree
 * (a `sequential` or `reduce` of smaller steps); the Evaluator runs that sub-tree in the task's place. At most
 * {@link MAX_REPARSE} decompositions per node; nodes inside a decomposition may be reparsed in turn, down to
 * {@link MAX_REPARSE} levels. `<disable_reparsing>true</disable_reparsing>` (or the attribute) opts a task out.
 */
import { extend, find, flatten, type Env } from "../../machines/language/env.js";
import { recoverableError } from "../../machines/evaluator/evaluation.js";
import { TaskError, taskFailure, type CompileReply, type CompileRequest, type TaskId, type TaskResult } from "../../protocol/index.js";
import { decomposeRequest } from "../compiler/prompt.js";
import { prepareAtomic } from "./nodes.js";
export { reparseAllowed } from "./nodes.js";
import type { SubstituteMode } from "../../machines/language/substitute.js";
import { parseTemplate } from "../../machines/language/parse.js";
import type { TaskNode, TemplateDocument } from "../../machines/language/ast.js";
import { messageOf } from "../../protocol/errors.js";

/** Decompositions of one node, and nesting of decompositions. */
export const MAX_REPARSE = 3;

/** Env name of the reparse nesting level. */
export const REPARSE_LEVEL = "$reparse_level";

/** The innermost error of a composite failure (`details.cause` chain): why a decomposition's step failed. */
export function rootCause(error: TaskError | undefined): TaskError | undefined {
  let current = error;
  for (let i = 0; i < 32 && current?.type === "TASK_FAILURE"; i++) {
    const cause = TaskError.safeParse(current.details?.["cause"]);
    if (!cause.success) break;
    current = cause.data;
  }
  return current;
}

/** What reparsing needs from the walk. */
export interface ReparseWalk {
  taskId: TaskId;
  substitution?: SubstituteMode;
  compile(request: CompileRequest, signal: AbortSignal): Promise<CompileReply>;
  evaluateDocument(document: TemplateDocument, env: Env, signal: AbortSignal, scope: string): Promise<TaskResult>;
  progress(event: string, message: string, data?: Record<string, unknown>): void;
}

const noInline = async (): Promise<TaskResult> => taskFailure("unexpected_error", "inline calls are not run while reparsing");

/** Decomposes `node` after `failed` and runs the sub-tree, up to {@link MAX_REPARSE} times. */
export async function reparseNode(
  walk: ReparseWalk,
  node: TaskNode,
  path: string,
  env: Env,
  failed: TaskResult,
  signal: AbortSignal,
): Promise<TaskResult> {
  const levelFound = find(env, REPARSE_LEVEL);
  const level = levelFound.found && typeof levelFound.value === "number" ? levelFound.value : 0;
  if (level >= MAX_REPARSE) return failed;
  const prepared = await prepareAtomic(node, env, noInline, walk.substitution ?? "strict");
  const prompt = prepared.ok ? prepared.fields.prompt : [node.description, node.instructions].filter(Boolean).join("\n\n");
  const inputNames = Object.keys(flatten(env)).filter((name) => !name.startsWith("$"));
  const childEnv = extend(env, { [REPARSE_LEVEL]: level + 1 });
  let last = failed.error;
  for (let attempt = 1; attempt <= MAX_REPARSE; attempt++) {
    if (!last) break;
    walk.progress(
      "node.reparse",
      `reparse ${attempt}/${MAX_REPARSE}: decomposing after ${last.type === "RESOURCE_EXHAUSTION" ? `${last.resource} exhaustion` : "a recoverable failure"}`,
      {
        nodePath: path,
        attempt,
        level: level + 1,
      },
    );
    let reply: CompileReply;
    try {
      reply = await walk.compile(decomposeRequest({ prompt, error: last, taskId: walk.taskId, nodePath: path, inputNames }), signal);
    } catch (err) {
      if (signal.aborted) throw err;
      return { ...failed, notes: { ...failed.notes, reparse_error: messageOf(err), reparse_attempts: attempt } };
    }
    const parsed = parseTemplate(reply.xml);
    if (!parsed.ok)
      return {
        ...failed,
        notes: { ...failed.notes, reparse_error: `decomposition does not parse: ${parsed.error.message}`, reparse_attempts: attempt },
      };
    walk.progress("node.reparsed", `reparse ${attempt}/${MAX_REPARSE}: running the decomposition`, {
      nodePath: path,
      attempt,
      xml: reply.xml,
    });
    const result = await walk.evaluateDocument(parsed.document, childEnv, signal, `${path}/reparse${attempt}:`);
    if (result.status === "COMPLETE") return { ...result, notes: { ...result.notes, reparsed: { attempts: attempt, xml: reply.xml } } };
    // A decomposition that failed for another reason is the answer; one that ran out of a resource again (in
    // any of its steps) is decomposed anew, from that failure.
    const cause = rootCause(result.error);
    if (!recoverableError(cause)) return { ...result, notes: { ...result.notes, reparse_attempts: attempt } };
    last = cause;
  }
  // Every decomposition ran out too: the node's own failure stands, with the last decomposition's cause.
  return { ...failed, notes: { ...failed.notes, reparse_attempts: MAX_REPARSE, ...(last ? { reparse_last_error: last } : {}) } };
}
