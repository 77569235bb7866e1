/**
 * The readability rules of a drawn statechart, checked on its geometry: no two transition labels overlap, no edge
 * runs through a state box other than its source, its target and their ancestors, no edge runs through another
 * transition's label or through a state's name, and no label lies on a state's name or on a state box other than a
 * container of its transition. The geometry comes
 * from the SVG text (`svgGeometry`, for unit tests) or from the page (measured in Chromium, for browser tests).
 */
import { crosses, type Box, type Point } from "../../runtime/charts/geometry.js";
import type { MachineGraph } from "../../runtime/charts/graph.js";
import { LABEL_FONT, STATE_FONT } from "../../runtime/charts/layout.js";
import { textWidth } from "../../runtime/charts/text-width.js";

/** One drawn line: a transition (with its label) or an initial marker's arrow (no source, no label). */
export interface DrawnEdge {
  /** How problems name it, e.g. `run.claiming → run.restoring (claimed)`. */
  name: string;
  source?: string;
  target: string;
  /** The line as a polyline (curves sampled). */
  points: Point[];
  label?: Box;
}

/** A chart's drawn geometry. */
export interface ChartGeometry {
  /** Every state's box by state id. */
  states: Map<string, Box>;
  /** The box of every state's name (text), by state id. */
  names: Map<string, Box>;
  /** Every state's parent, by state id (absent on the root). */
  parents: Map<string, string | undefined>;
  edges: DrawnEdge[];
}

/** How far two shapes may run into each other before it counts: rounding, and lines drawn along a border. */
const TOLERANCE = 1;

function shrink(r: Box, by: number): Box {
  return { x: r.x + by, y: r.y + by, width: r.width - 2 * by, height: r.height - 2 * by };
}

function overlap(a: Box, b: Box): boolean {
  const x = Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x);
  const y = Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y);
  return x > TOLERANCE && y > TOLERANCE;
}

function ancestors(id: string | undefined, parents: Map<string, string | undefined>): string[] {
  const out: string[] = [];
  for (let p = id === undefined ? undefined : parents.get(id); p !== undefined; p = parents.get(p)) out.push(p);
  return out;
}

/** Every broken rule of a chart, one line each; empty when the chart is readable. */
export function chartProblems(chart: ChartGeometry): string[] {
  const problems: string[] = [];
  const labelled = chart.edges.filter((e): e is DrawnEdge & { label: Box } => e.label !== undefined);
  for (const [i, a] of labelled.entries())
    for (const b of labelled.slice(i + 1)) if (overlap(a.label, b.label)) problems.push(`labels overlap: ${a.name} / ${b.name}`);
  for (const edge of chart.edges) {
    const containers = [...ancestors(edge.source, chart.parents), ...ancestors(edge.target, chart.parents)];
    const entered = new Set([edge.source, edge.target, ...containers]);
    const segments = edge.points.slice(1).map((b, i) => [edge.points[i] as Point, b] as const);
    for (const [id, box] of chart.states) {
      if (entered.has(id)) continue;
      const inside = shrink(box, TOLERANCE);
      if (segments.some(([a, b]) => crosses(a, b, inside))) problems.push(`edge crosses state ${id}: ${edge.name}`);
    }
    for (const other of labelled) {
      if (other === edge) continue;
      const inside = shrink(other.label, TOLERANCE);
      if (segments.some(([a, b]) => crosses(a, b, inside))) problems.push(`edge crosses label of ${other.name}: ${edge.name}`);
    }
    for (const [id, name] of chart.names) {
      const inside = shrink(name, TOLERANCE);
      if (segments.some(([a, b]) => crosses(a, b, inside))) problems.push(`edge crosses the name of ${id}: ${edge.name}`);
    }
    if (edge.label) {
      const around = new Set(containers);
      for (const [id, box] of chart.states)
        if (!around.has(id) && overlap(edge.label, box)) problems.push(`label lies on state ${id}: ${edge.name}`);
      for (const [id, name] of chart.names) if (overlap(edge.label, name)) problems.push(`label lies on the name of ${id}: ${edge.name}`);
    }
  }
  return problems;
}

function unescapeXml(text: string): string {
  return text.replace(/&(lt|gt|quot|#39|amp);/g, (_, e: string) => ({ lt: "<", gt: ">", quot: '"', "#39": "'", amp: "&" })[e] ?? "");
}

function attr(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}="([^"]*)"`).exec(tag);
  return m ? unescapeXml(m[1] ?? "") : undefined;
}

function num(tag: string, name: string): number {
  const value = Number(attr(tag, name));
  if (!Number.isFinite(value)) throw new Error(`no number '${name}' in ${tag}`);
  return value;
}

/** The points of an SVG path's `d` (M, L, H, V, Q, C, absolute or relative, and Z), curves sampled in 16 steps. */
export function pathPoints(d: string): Point[] {
  const tokens = d.match(/[A-Za-z]|-?[\d.]+(?:e-?\d+)?/g) ?? [];
  const points: Point[] = [];
  let at: Point = { x: 0, y: 0 };
  let start: Point = at;
  let i = 0;
  const next = () => Number(tokens[i++]);
  const curve = (controls: Point[], end: Point) => {
    const all = [at, ...controls, end];
    for (let s = 1; s <= 16; s++) {
      const t = s / 16;
      let level = all;
      while (level.length > 1)
        level = level.slice(1).map((p, k) => ({ x: level[k]!.x + (p.x - level[k]!.x) * t, y: level[k]!.y + (p.y - level[k]!.y) * t }));
      points.push(level[0] as Point);
    }
    at = end;
  };
  let command = "M";
  while (i < tokens.length) {
    if (/[A-Za-z]/.test(tokens[i] as string)) command = tokens[i++] as string;
    const rel = command === command.toLowerCase() && command !== "z";
    const pt = (): Point => {
      const x = next();
      const y = next();
      return rel ? { x: at.x + x, y: at.y + y } : { x, y };
    };
    switch (command.toUpperCase()) {
      case "M":
        at = start = pt();
        points.push(at);
        command = rel ? "l" : "L";
        break;
      case "L":
        at = pt();
        points.push(at);
        break;
      case "H":
        at = { x: (rel ? at.x : 0) + next(), y: at.y };
        points.push(at);
        break;
      case "V":
        at = { x: at.x, y: (rel ? at.y : 0) + next() };
        points.push(at);
        break;
      case "Q": {
        const c = pt();
        curve([c], pt());
        break;
      }
      case "C": {
        const c1 = pt();
        const c2 = pt();
        curve([c1, c2], pt());
        break;
      }
      case "Z":
        at = start;
        points.push(at);
        break;
      default:
        throw new Error(`path command '${command}' not handled: ${d}`);
    }
  }
  return points;
}

/**
 * The box a `<text>` element covers, estimated with the layout's own text widths: ascent .93 em above the baseline,
 * descent .24 em below, as DejaVu Sans draws it.
 */
function textBox(tag: string, content: string, fontSize: number): Box {
  const width = textWidth(content, fontSize);
  const anchor = attr(tag, "text-anchor") ?? "start";
  const x = num(tag, "x") - (anchor === "middle" ? width / 2 : anchor === "end" ? width : 0);
  return { x, y: num(tag, "y") - 0.93 * fontSize, width, height: 1.17 * fontSize };
}

/**
 * The geometry of a chart as its SVG text draws it: each `g.state`'s first `rect` and the box its name covers, each
 * `g.transition`'s path and the box its label covers, and each `g.initial`'s arrow to its `data-target`.
 */
export function svgGeometry(svg: string, graph: MachineGraph): ChartGeometry {
  const states = new Map<string, Box>();
  const names = new Map<string, Box>();
  const stateGroups =
    /<g class="state [^"]*" data-state="([^"]*)"><title>[^<]*<\/title>\s*(<rect [^>]*>)(?:(?!<\/g>)[^])*?(<text [^>]*>)([^<]*)<\/text>/g;
  for (const [, id = "", rect = "", text = "", content = ""] of svg.matchAll(stateGroups)) {
    states.set(unescapeXml(id), { x: num(rect, "x"), y: num(rect, "y"), width: num(rect, "width"), height: num(rect, "height") });
    names.set(unescapeXml(id), textBox(text, unescapeXml(content), STATE_FONT));
  }
  const edges: DrawnEdge[] = [];
  for (const [, g = "", path = "", text = "", content = ""] of svg.matchAll(
    /<g (class="transition"[^>]*)>(<path [^>]*>)(<text [^>]*>)([^<]*)<\/text><\/g>/g,
  )) {
    const label = unescapeXml(content);
    const source = attr(g, "data-source") ?? "";
    const target = attr(g, "data-target") ?? "";
    edges.push({
      name: `${source} → ${target} (${label})`,
      source,
      target,
      points: pathPoints(attr(path, "d") ?? ""),
      label: textBox(text, label, LABEL_FONT),
    });
  }
  for (const [, target = "", path = ""] of svg.matchAll(/<g class="initial" data-target="([^"]*)">[^]*?(<path [^>]*>)/g)) {
    edges.push({ name: `initial → ${unescapeXml(target)}`, target: unescapeXml(target), points: pathPoints(attr(path, "d") ?? "") });
  }
  return { states, names, parents: new Map(graph.states.map((s) => [s.id, s.parent])), edges };
}
