// The task tree of the inspector page: node paths under their parents, and each map's branches side by side
// (inspector/app.js).
import { el } from "./dom.js";

/** Parent of a node path: the longest other known path it extends (`0/subtask1:0` under `0`, `0/map:2:0.steps.0` under `0/map:2`). */
export function parentPath(path, paths) {
  let best;
  for (const p of paths)
    if (
      p !== path &&
      (path.startsWith(`${p}/`) || path.startsWith(`${p}.`) || path.startsWith(`${p}:`)) &&
      (!best || p.length > best.length)
    )
      best = p;
  return best;
}

// Most branches a map shows (runtime/inspect/maps.ts keeps as many).
const MAX_BRANCHES = 256;

/**
 * A map node's branches side by side, in order of number, each with its state: `running`, `COMPLETE`, `FAILED`,
 * `CANCELLED`, or `waiting` for one not started yet (`unknown` when the inspector kept too few of the task's
 * branches to tell). All text is set as text: it comes from task events.
 */
export function mapStrip(map) {
  const shown = Math.min(map.total, MAX_BRANCHES);
  const byNumber = new Map(map.branches.map((b) => [b.branch, b]));
  const running = map.branches.filter((b) => b.state === "running").length;
  const failed = map.branches.filter((b) => b.state === "FAILED").length;
  // `max_parallel` may exceed the branches (its default is 10): at most all of them run at once.
  const parallel = map.maxParallel ? ` · ${Math.min(map.maxParallel, map.total)} at once` : "";
  const summary = `${map.finished}/${map.total} done · ${running} running${failed ? ` · ${failed} failed` : ""}${parallel}`;
  const strip = el("div", { class: "branches" });
  for (let n = 1; n <= shown; n++) {
    const branch = byNumber.get(n);
    // A branch the inspector did not keep (too many in the task) is not known to be waiting.
    const state = branch ? branch.state : map.truncated ? "unknown" : "waiting";
    const title = branch ? branch.nodePath : map.truncated ? "not kept by the inspector" : "not started";
    strip.append(
      el(
        "div",
        { class: "branch", "data-branch": String(n), "data-state": state, title },
        el("span", { class: "label" }, `branch ${n}/${map.total}`),
        el("span", { class: "state" }, state),
      ),
    );
  }
  if (map.total > shown) strip.append(el("span", { class: "more" }, `+${map.total - shown} more`));
  return el("div", { class: "map", "data-map": map.nodePath }, el("div", { class: "summary" }, summary), strip);
}

export function nodeLabel(path, mapPaths) {
  if (mapPaths.has(path)) return `map ${path}`;
  return path.includes("subtask") ? `subtask ${path}` : path.includes("evaluation") ? `evaluation ${path}` : `node ${path}`;
}
