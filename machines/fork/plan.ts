/**
 * Which nodes of a fork are answered from the original task's node records: a pure decision over the original's
 * records (docs/protocol.md, "Re-run and fork").
 *
 * 1. The fork point is the first evaluation of the `from` node; when the fork changes the template or inputs, also
 *    every changed node that holds no changed node within it. The earliest of them to start in the original is the
 *    fork point: it and everything after it run live.
 * 2. A node is replayed when its record ended no later than the fork point started, it is neither the fork point nor
 *    one of its ancestors, it completed or failed (not suspended or cancelled), it is unchanged, and its output was
 *    kept whole.
 * 3. A node is changed when its part of the template (for a node of a subtask or map branch: the part of the task's
 *    own template that holds it) differs between the original and the fork, or mentions an input whose value the fork
 *    changed.
 */
import type { NodeRef, ReplayedNode } from "../../protocol/fork.js";
import type { NodeState } from "../../protocol/node-records.js";
import type { TaskId } from "../../protocol/ids.js";

/** What the plan knows of one record of the original. */
export interface ForkNode {
  path: string;
  occurrence: number;
  state: NodeState;
  startedAt: string;
  endedAt: string;
  /** Its part of the template or an input it mentions differs in the fork. */
  changed: boolean;
  /** Its output was cut in its record (too large to keep): it cannot be replayed as it was. */
  cut: boolean;
}

/** The fork's plan, or why there is none. */
export type ForkPlan =
  | { ok: true; from: NodeRef; nodes: ReplayedNode[]; replayed: number }
  | { ok: false; code: "NOT_FOUND" | "INVALID_MESSAGE"; message: string };

/** True when `ancestor` is a proper ancestor of `path` (`0` of `0.steps.1`, `0.steps.1` of `0.steps.1/subtask1:0`). */
export function isAncestor(ancestor: string, path: string): boolean {
  return path.length > ancestor.length && path.startsWith(ancestor) && (path[ancestor.length] === "." || path[ancestor.length] === "/");
}

const byStart = (a: ForkNode, b: ForkNode): number =>
  a.startedAt.localeCompare(b.startedAt) || a.path.length - b.path.length || a.occurrence - b.occurrence;

/** The plan of a fork of a task whose records are `nodes`, running live from `from` (or from the first change). */
export function planFork(nodes: readonly ForkNode[], from: string | undefined, taskId: TaskId): ForkPlan {
  const sorted = [...nodes].sort(byStart);
  const candidates: ForkNode[] = [];
  if (from !== undefined) {
    const first = sorted.find((n) => n.path === from);
    if (first === undefined)
      return {
        ok: false,
        code: "NOT_FOUND",
        message: `task '${taskId}' has no record of node '${from}' (list them with 'dirigent show ${taskId}')`,
      };
    candidates.push(first);
  }
  const changed = sorted.filter((n) => n.changed);
  candidates.push(...changed.filter((n) => !changed.some((m) => isAncestor(n.path, m.path))));
  const point = candidates.sort(byStart)[0];
  if (point === undefined)
    return {
      ok: false,
      code: "INVALID_MESSAGE",
      message: "nothing to re-run: name the node to run from (--from), or change the template or an input",
    };

  const replayable = sorted.filter(
    (n) =>
      !(n.path === point.path && n.occurrence === point.occurrence) &&
      !isAncestor(n.path, point.path) &&
      n.endedAt <= point.startedAt &&
      (n.state === "completed" || n.state === "failed") &&
      !n.changed,
  );
  const cut = replayable.find((n) => n.cut);
  if (cut !== undefined)
    return {
      ok: false,
      code: "INVALID_MESSAGE",
      message: `the output of node '${cut.path}' was too large for its record and cannot be replayed: re-run from it or an earlier node`,
    };
  // The outermost replayed nodes answer for the nodes evaluated within them (started and ended inside them): those
  // under their path, and the bodies of the task's function templates they called (`templates.0.body`).
  const outer: ReplayedNode[] = [];
  const within = (inner: ForkNode, o: ForkNode) =>
    (isAncestor(o.path, inner.path) || (inner.path.startsWith("templates.") && !o.path.startsWith("templates."))) &&
    inner.startedAt >= o.startedAt &&
    inner.endedAt <= o.endedAt;
  const outerNodes = replayable.filter((n) => !replayable.some((o) => o !== n && within(n, o)));
  for (const o of outerNodes) {
    const nested = replayable.filter((n) => n !== o && within(n, o)).map(({ path, occurrence }) => ({ path, occurrence }));
    outer.push({ path: o.path, occurrence: o.occurrence, ...(nested.length > 0 ? { nested } : {}) });
  }
  const count = outer.reduce((sum, n) => sum + 1 + (n.nested?.length ?? 0), 0);
  return { ok: true, from: { path: point.path, occurrence: point.occurrence }, nodes: outer, replayed: count };
}

/** Names of the inputs whose values differ between `before` and `after` (JSON equality). */
export function changedInputs(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((name) => JSON.stringify(before[name]) !== JSON.stringify(after[name]));
}

/** True when `text` (a node's part of the template, as JSON) mentions one of `names` as a whole word. */
export function mentionsAny(text: string, names: readonly string[]): boolean {
  return names.some((name) => new RegExp(`(?<![\\w.-])${name.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&")}(?![\\w-])`).test(text));
}
