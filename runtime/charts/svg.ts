/**
 * Draws a {@link MachineGraph} as an SVG statechart, with no library: compound states are boxes holding their
 * children, laid out left to right in layers reached from the initial state; transitions are labelled curves
 * (`event [guard]`). Every state is a `<g class="state" data-state="<state id>">`, so the inspector page highlights
 * the active states by id. Every name it embeds (machine id, state ids and keys, descriptions, tags, events, guards)
 * goes through {@link escapeXml}, so the SVG holds them as text only; the page parses it as XML and keeps only the
 * elements and attributes drawn here.
 */
import type { GraphState, GraphTransition, MachineGraph } from "./graph.js";

const CHAR = 7;
const LEAF_H = 34;
const HEADER = 26;
const PAD = 16;
const GAP_X = 120;
const GAP_Y = 44;

interface Box {
  state: GraphState;
  children: Box[];
  w: number;
  h: number;
  x: number;
  y: number;
  /** Columns of children (indexes into `children`), after layering. */
  columns: Box[][];
}

/** Escapes text for SVG/XML. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}

/** The label of a transition: `event [guard]`. */
export function transitionLabel(t: GraphTransition): string {
  return t.guard ? `${t.event} [${t.guard}]` : t.event;
}

function childOf(parent: string, id: string, byId: Map<string, GraphState>): string | undefined {
  let current = byId.get(id);
  while (current && current.parent !== parent) current = current.parent === undefined ? undefined : byId.get(current.parent);
  return current?.id;
}

function layer(box: Box, graph: MachineGraph, byId: Map<string, GraphState>): void {
  const ids = box.children.map((c) => c.state.id);
  const depth = new Map<string, number>();
  const initial = box.children.find((c) => c.state.key === box.state.initial) ?? box.children[0];
  if (!initial) return;
  depth.set(initial.state.id, 0);
  const queue = [initial.state.id];
  const edges = graph.transitions
    .map((t) => [childOf(box.state.id, t.source, byId), childOf(box.state.id, t.target, byId)] as const)
    .filter((e): e is readonly [string, string] => e[0] !== undefined && e[1] !== undefined && e[0] !== e[1]);
  while (queue.length > 0) {
    const from = queue.shift() as string;
    for (const [s, t] of edges) {
      if (s === from && !depth.has(t)) {
        depth.set(t, (depth.get(from) ?? 0) + 1);
        queue.push(t);
      }
    }
  }
  const maxDepth = Math.max(0, ...depth.values());
  for (const id of ids) if (!depth.has(id)) depth.set(id, maxDepth + 1);
  const columns: Box[][] = [];
  for (const child of box.children) {
    const d = depth.get(child.state.id) ?? 0;
    (columns[d] ??= []).push(child);
  }
  box.columns = columns.filter((c) => c.length > 0);
}

function measure(box: Box, graph: MachineGraph, byId: Map<string, GraphState>): void {
  const labelW = box.state.key.length * CHAR + 28;
  if (box.children.length === 0) {
    box.w = Math.max(96, labelW);
    box.h = LEAF_H;
    return;
  }
  for (const child of box.children) measure(child, graph, byId);
  layer(box, graph, byId);
  const widths = box.columns.map((col) => Math.max(...col.map((c) => c.w)));
  const heights = box.columns.map((col) => col.reduce((sum, c) => sum + c.h, 0) + GAP_Y * (col.length - 1));
  box.w = Math.max(labelW, widths.reduce((a, b) => a + b, 0) + GAP_X * (widths.length - 1) + 2 * PAD + 20);
  box.h = HEADER + Math.max(...heights) + 2 * PAD;
}

function place(box: Box, x: number, y: number): void {
  box.x = x;
  box.y = y;
  let cx = x + PAD + 20;
  for (const col of box.columns) {
    const colW = Math.max(...col.map((c) => c.w));
    const colH = col.reduce((sum, c) => sum + c.h, 0) + GAP_Y * (col.length - 1);
    let cy = y + HEADER + PAD + (box.h - HEADER - 2 * PAD - colH) / 2;
    for (const child of col) {
      place(child, cx + (colW - child.w) / 2, cy);
      cy += child.h + GAP_Y;
    }
    cx += colW + GAP_X;
  }
}

/** Where the segment from the centre of `b` towards `(tx, ty)` leaves `b`'s border. */
function border(b: Box, tx: number, ty: number): [number, number] {
  const cx = b.x + b.w / 2;
  const cy = b.y + b.h / 2;
  const dx = tx - cx;
  const dy = ty - cy;
  if (dx === 0 && dy === 0) return [cx, cy];
  const scale = Math.min(dx === 0 ? Infinity : b.w / 2 / Math.abs(dx), dy === 0 ? Infinity : b.h / 2 / Math.abs(dy));
  return [cx + dx * scale, cy + dy * scale];
}

function edgeSvg(t: GraphTransition, boxes: Map<string, Box>, index: number, ordinal: number): string {
  const s = boxes.get(t.source);
  const d = boxes.get(t.target);
  if (!s || !d) return "";
  const label = escapeXml(transitionLabel(t));
  const attrs = `class="transition" data-source="${escapeXml(t.source)}" data-target="${escapeXml(t.target)}" data-event="${escapeXml(t.event)}"`;
  if (s === d) {
    const x = s.x + s.w - 12 - ordinal * 8;
    const y = s.y;
    const path = `M ${x} ${y} c 0 ${-22 - ordinal * 10} 24 ${-22 - ordinal * 10} 24 ${4}`;
    return `<g ${attrs}><path d="${path}" marker-end="url(#arrow)"/><text x="${x + 26}" y="${y - 12 - ordinal * 11}">${label}</text></g>`;
  }
  const scx = s.x + s.w / 2;
  const scy = s.y + s.h / 2;
  const dcx = d.x + d.w / 2;
  const dcy = d.y + d.h / 2;
  const [x1, y1] = border(s, dcx, dcy);
  const [x2, y2] = border(d, scx, scy);
  // Parallel transitions between the same two states bend apart, so their labels do not overlap.
  const bend = (ordinal % 2 === 0 ? 1 : -1) * Math.ceil(ordinal / 2) * 22 + (index % 2 === 0 ? 0 : 4);
  const len = Math.hypot(x2 - x1, y2 - y1) || 1;
  const mx = (x1 + x2) / 2 + (-(y2 - y1) / len) * bend;
  const my = (y1 + y2) / 2 + ((x2 - x1) / len) * bend;
  return `<g ${attrs}><path d="M ${x1.toFixed(1)} ${y1.toFixed(1)} Q ${mx.toFixed(1)} ${my.toFixed(1)} ${x2.toFixed(1)} ${y2.toFixed(1)}" marker-end="url(#arrow)"/><text x="${mx.toFixed(1)}" y="${(my - 3).toFixed(1)}" text-anchor="middle">${label}</text></g>`;
}

function stateSvg(box: Box, out: string[]): void {
  const s = box.state;
  const kind = s.parent === undefined ? "root" : s.type;
  const title = escapeXml([s.id, s.description, s.tags.length ? `tags: ${s.tags.join(", ")}` : ""].filter(Boolean).join("\n"));
  out.push(`<g class="state ${escapeXml(kind)}" data-state="${escapeXml(s.id)}"><title>${title}</title>`);
  out.push(`<rect x="${box.x}" y="${box.y}" width="${box.w}" height="${box.h}" rx="${box.children.length ? 10 : 16}"/>`);
  if (s.type === "final")
    out.push(`<rect class="inner" x="${box.x + 4}" y="${box.y + 4}" width="${box.w - 8}" height="${box.h - 8}" rx="13"/>`);
  const ty = box.children.length ? box.y + 18 : box.y + box.h / 2 + 4;
  const tx = box.children.length ? box.x + 12 : box.x + box.w / 2;
  out.push(
    `<text x="${tx}" y="${ty}"${box.children.length ? "" : ' text-anchor="middle"'}>${escapeXml(s.parent === undefined ? `machine ${s.key}` : s.key)}</text>`,
  );
  out.push(`</g>`);
  const initial = box.children.find((c) => c.state.key === s.initial);
  if (initial) {
    const ix = box.x + PAD;
    const iy = initial.y + initial.h / 2;
    out.push(
      `<g class="initial"><circle cx="${ix}" cy="${iy}" r="5"/><path d="M ${ix + 5} ${iy} L ${initial.x - 2} ${iy}" marker-end="url(#arrow)"/></g>`,
    );
  }
  for (const child of box.children) stateSvg(child, out);
}

/**
 * The SVG of a machine's chart.
 *
 * @example statechartSvg(machineGraph(taskMachine)) // '<svg … data-machine="task">…'
 */
export function statechartSvg(graph: MachineGraph): string {
  const byId = new Map(graph.states.map((s) => [s.id, s]));
  const boxes = new Map<string, Box>();
  const boxOf = (state: GraphState): Box => {
    const box: Box = { state, children: [], w: 0, h: 0, x: 0, y: 0, columns: [] };
    boxes.set(state.id, box);
    box.children = graph.states.filter((c) => c.parent === state.id).map(boxOf);
    return box;
  };
  const rootState = graph.states[0];
  if (!rootState) return `<svg xmlns="http://www.w3.org/2000/svg" data-machine="${escapeXml(graph.id)}"/>`;
  const root = boxOf(rootState);
  measure(root, graph, byId);
  const margin = 50;
  place(root, margin / 2, margin);
  const out: string[] = [];
  stateSvg(root, out);
  const pairs = new Map<string, number>();
  const edges = graph.transitions.map((t, i) => {
    const key = t.source === t.target ? t.source : [t.source, t.target].sort().join("|");
    const ordinal = pairs.get(key) ?? 0;
    pairs.set(key, ordinal + 1);
    return edgeSvg(t, boxes, i, ordinal);
  });
  const width = Math.ceil(root.w + margin);
  const height = Math.ceil(root.h + margin * 1.5);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="statechart" data-machine="${escapeXml(graph.id)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">`,
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>`,
    ...out,
    `<g class="transitions">${edges.join("")}</g>`,
    `</svg>`,
  ].join("\n");
}
