// The node tree of a task from its node records (/api/tasks/<id>/nodes, docs/protocol.md "Node records"), each row
// with its name, state, duration, tokens and cost, and beside it a waterfall: one bar per node on the task's time
// axis, coloured by state, each node in its own lane so parallel branches show side by side in time. Every text
// is set as text (inspector/app.js, docs/inspector.md "Runtime data is text").
import { el } from "./dom.js";
import { parentPath } from "./task-tree.js";

/** `1.25 s`, `340 ms`, `2 min 5 s`. */
export function duration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Prompt + completion tokens, or "" without usage. */
export function tokens(usage) {
  return usage ? String(usage.promptTokens + usage.completionTokens) : "";
}

/** A cost in dollars, or "" when not priced. */
export function cost(value) {
  return typeof value === "number" ? `$${value < 0.01 ? value.toPrecision(2) : value.toFixed(4)}` : "";
}

/**
 * For each row, the tokens and cost of the rows under it (its descendants in the tree), shown for a composite that
 * called no model itself: its children's total.
 */
function subtreeSums(rows) {
  return rows.map(({ depth }, i) => {
    const sum = { tokens: 0, cost: 0, priced: false };
    for (let j = i + 1; j < rows.length && rows[j].depth > depth; j++) {
      const n = rows[j].node;
      // A replayed node cost this task nothing: its tokens were paid by the task it was replayed from.
      if (n.replayedFrom) continue;
      if (n.usage) sum.tokens += n.usage.promptTokens + n.usage.completionTokens;
      if (typeof n.cost === "number") ((sum.cost += n.cost), (sum.priced = true));
    }
    return sum;
  });
}

/** A number cell: the node's own value, else its children's total marked `Σ`. */
function sumCell(own, children) {
  if (own || !children) return el("td", { class: "num" }, own);
  return el("td", { class: "num sum", title: "the total of the nodes under it" }, `Σ ${children}`);
}

/** The key of one evaluation of a node. */
export const nodeKey = (n) => `${n.path}#${n.occurrence}`;

/**
 * The rows of the tree in depth-first order, each with its depth: the recorded nodes (every evaluation of a path),
 * and the `running` paths (seen in the task's events, not recorded yet) as nodes in state `running`.
 */
export function treeRows(recorded, running = [], now = Date.now()) {
  const nodes = [...recorded];
  const known = new Set(recorded.map((n) => n.path));
  for (const r of running)
    if (!known.has(r.path))
      nodes.push({
        path: r.path,
        occurrence: 1,
        name: r.path,
        kind: "",
        state: "running",
        startedAt: r.startedAt,
        endedAt: new Date(now).toISOString(),
        durationMs: now - Date.parse(r.startedAt),
      });
  const paths = [...new Set(nodes.map((n) => n.path))];
  const children = new Map();
  const roots = [];
  for (const n of nodes) {
    const parent = parentPath(n.path, paths);
    if (parent === undefined) roots.push(n);
    else children.set(parent, [...(children.get(parent) ?? []), n]);
  }
  const byStart = (a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt) || a.occurrence - b.occurrence;
  const rows = [];
  const walk = (list, depth, seen) => {
    for (const n of [...list].sort(byStart)) {
      rows.push({ node: n, depth });
      // A path evaluated more than once lists its children under its first evaluation only.
      if (!seen.has(n.path)) {
        seen.add(n.path);
        walk(children.get(n.path) ?? [], depth + 1, seen);
      }
    }
  };
  walk(roots, 0, new Set());
  return rows;
}

/**
 * The recorded nodes as they were at time `at` (ms): a node not started yet is left out, one that ended later is
 * `running` up to `at`.
 */
export function nodesAt(nodes, at) {
  const out = [];
  for (const n of nodes) {
    const start = Date.parse(n.startedAt);
    if (start > at) continue;
    if (Date.parse(n.endedAt) <= at) out.push(n);
    else
      out.push({
        ...n,
        state: "running",
        endedAt: new Date(at).toISOString(),
        durationMs: at - start,
        usage: undefined,
        cost: undefined,
        error: undefined,
      });
  }
  return out;
}

/**
 * The table of nodes and their waterfall; `onSelect(node)` when a row is clicked. `axis` (`{ t0, t1 }`, ms) fixes the
 * time axis (the scrubber keeps the whole task's); by default it spans the rows.
 */
export function nodeTable(rows, { selected, onSelect, axis }) {
  const starts = rows.map((r) => Date.parse(r.node.startedAt)).filter(Number.isFinite);
  const ends = rows.map((r) => Date.parse(r.node.endedAt)).filter(Number.isFinite);
  const t0 = axis ? axis.t0 : Math.min(...starts);
  const span = Math.max(1, (axis ? axis.t1 : Math.max(...ends)) - t0);
  const table = el("table", { class: "nodes" });
  table.append(
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ...["node", "state", "duration", "tokens", "cost"].map((h) => el("th", {}, h)),
        el("th", { class: "waterfall-head" }, `0 — ${duration(span)}`),
      ),
    ),
  );
  const body = el("tbody");
  const sums = subtreeSums(rows);
  rows.forEach(({ node, depth }, lane) => {
    const name = el(
      "td",
      {
        class: "name",
        title: `${node.path}${node.occurrence > 1 ? ` (evaluation ${node.occurrence})` : ""}${node.kind ? ` · ${node.kind}` : ""}`,
      },
      node.name,
    );
    name.style.paddingLeft = `${4 + depth * 14}px`;
    const start = Date.parse(node.startedAt) - t0;
    const bar = el("div", {
      class: "bar",
      "data-state": node.state,
      title: `${node.name}: ${duration(node.durationMs)} from +${duration(start)}`,
    });
    bar.style.left = `${(100 * start) / span}%`;
    bar.style.width = `max(2px, ${(100 * node.durationMs) / span}%)`;
    const row = el(
      "tr",
      {
        class: "node-row",
        "data-path": node.path,
        "data-occurrence": String(node.occurrence),
        "data-state": node.state,
        "data-lane": String(lane),
        ...(node.replayedFrom ? { "data-replayed": "true" } : {}),
      },
      name,
      el(
        "td",
        { class: "state", ...(node.replayedFrom ? { title: `replayed from task ${node.replayedFrom}` } : {}) },
        node.replayedFrom ? `${node.state} ↺` : node.state,
      ),
      el("td", { class: "num" }, duration(node.durationMs)),
      ...(node.replayedFrom
        ? [tokens(node.usage), cost(node.cost)].map((text) =>
            el("td", { class: "num paid-before", title: `paid by task ${node.replayedFrom}, not by this one` }, text),
          )
        : [
            sumCell(tokens(node.usage), sums[lane].tokens ? String(sums[lane].tokens) : ""),
            sumCell(cost(node.cost), sums[lane].priced ? cost(sums[lane].cost) : ""),
          ]),
      el("td", { class: "waterfall" }, el("div", { class: "lane" }, bar)),
    );
    if (node.error) row.title = node.error;
    row.classList.toggle("selected", selected === nodeKey(node));
    // A running node not recorded yet shows what its model has streamed so far (inspector/app.js).
    row.onclick = () => onSelect(node);
    body.append(row);
  });
  table.append(body);
  return table;
}
