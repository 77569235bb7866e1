/**
 * Lays out a {@link MachineGraph} with ELK (elkjs, the Eclipse Layout Kernel compiled to JavaScript): its layered
 * algorithm places the states in layers (left to right, or top to bottom for a chart that is narrower so) with
 * compound states as nested nodes laid out together with their children (`INCLUDE_CHILDREN`), routes every
 * transition orthogonally around the boxes it does not enter, and places every transition's label itself, so no two
 * labels overlap and no edge runs through a box or a label. The result is plain geometry in one coordinate system,
 * which `svg.ts` draws as it is.
 */
import type { ELK, ElkExtendedEdge, ElkNode, ElkShape } from "elkjs/lib/elk.bundled.js";
import type { GraphState, GraphTransition, MachineGraph } from "./graph.js";
import type { Box, Point } from "./geometry.js";
import { headerBox } from "./header.js";
import { textWidth } from "./text-width.js";

/** A state's box: a leaf state is a rounded box with its name in the middle, a compound one holds its children. */
export interface StateBox extends Box {
  state: GraphState;
  /** True when the state has children (its name is a header above them, clear of the edges: `header.ts`). */
  compound: boolean;
  /** The box of its name, as {@link stateName} says it. */
  name: Box;
}

/** A transition's route and label. */
export interface TransitionLine {
  transition: GraphTransition;
  /** The route from the source's border to the target's, through ELK's bend points (horizontal and vertical runs). */
  points: Point[];
  /** The box ELK reserved for the label; the text is drawn centred in it. */
  label: Box & { text: string };
}

/** The start marker of a compound state: a dot and an arrow to its initial child. */
export interface InitialMark {
  /** The compound state the marker is drawn in. */
  parent: string;
  /** The initial child. */
  target: string;
  /** The dot's centre (its radius is {@link INITIAL_RADIUS}). */
  centre: Point;
  /** The arrow from the dot to the initial child. */
  points: Point[];
}

/** A laid-out chart. */
export interface ChartLayout {
  /** The machine id. */
  id: string;
  width: number;
  height: number;
  /** Every state, root first, in the graph's order. */
  states: StateBox[];
  /** Every transition, in the graph's order. */
  transitions: TransitionLine[];
  initials: InitialMark[];
}

/** Font size of a state's name, in pixels (the page's stylesheet draws it at this size). */
export const STATE_FONT = 12;
/** Font size of a transition's label, in pixels. */
export const LABEL_FONT = 10;
/** Radius of an initial marker's dot. */
export const INITIAL_RADIUS = 5;
const LEAF_HEIGHT = 32;
const LEAF_MIN_WIDTH = 72;
/** Room along a leaf's side per edge ending there. */
const END_GAP = 8;
/** Room above a compound state's children for its name. */
const HEADER = 28;
/** Height of a state's name. */
const NAME_HEIGHT = Math.ceil(STATE_FONT * 1.2);
/** Room around a label's text, so text a little wider than estimated still stays in its box. */
const LABEL_PAD = 3;
const LABEL_HEIGHT = Math.ceil(LABEL_FONT * 1.4);
const MARGIN = 12;
/** A chart laid out left to right and wider than this is also laid out top to bottom, and the narrower one kept. */
const WIDE = 1000;

/** The options of every layout: see https://eclipse.dev/elk/reference/algorithms/org-eclipse-elk-layered.html. */
const LAYOUT_OPTIONS: Record<string, string> = {
  "elk.algorithm": "layered",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.edgeRouting": "ORTHOGONAL",
  // Every coordinate ELK returns is relative to the chart's top left, whatever node or edge it belongs to.
  "elk.json.shapeCoords": "ROOT",
  "elk.json.edgeCoords": "ROOT",
  "elk.padding": `[top=${MARGIN},left=${MARGIN},bottom=${MARGIN},right=${MARGIN}]`,
  "elk.spacing.nodeNode": "28",
  "elk.layered.spacing.nodeNodeBetweenLayers": "36",
  "elk.spacing.edgeNode": "14",
  "elk.layered.spacing.edgeNodeBetweenLayers": "14",
  "elk.spacing.edgeEdge": "10",
  "elk.layered.spacing.edgeEdgeBetweenLayers": "10",
  "elk.spacing.edgeLabel": "4",
  "elk.spacing.labelLabel": "4",
  "elk.spacing.nodeSelfLoop": "14",
  "elk.edgeLabels.placement": "CENTER",
  "elk.layered.nodePlacement.strategy": "NETWORK_SIMPLEX",
  // Same input, same chart: ELK's randomised steps start from a fixed seed.
  "elk.randomSeed": "1",
};

/**
 * An ELK engine for one layout, loaded on the first: the bundled build (1.6 MB) runs in this thread with no worker,
 * and only the processes that draw charts pay for loading it. The module is loaded once (the import is cached); an
 * engine costs a few milliseconds and holds nothing between layouts, so none is kept at module level, where two
 * systems in one process would share it.
 */
async function loadElk(): Promise<ELK> {
  // elkjs is CommonJS: its `module.exports` is the constructor, which also carries itself as `default` (what the
  // typings describe as the module's default export).
  const { default: module } = await import("elkjs/lib/elk.bundled.js");
  return new module.default();
}

function stateNodeId(stateId: string): string {
  return `s:${stateId}`;
}

function labelBox(text: string): { width: number; height: number } {
  return { width: textWidth(text, LABEL_FONT) + 2 * LABEL_PAD, height: LABEL_HEIGHT };
}

/** The name drawn for a state: its key, or `machine <key>` on the root. */
export function stateName(state: GraphState): string {
  return state.parent === undefined ? `machine ${state.key}` : state.key;
}

/** The label of a transition: `event [guard]`. */
export function transitionLabel(t: GraphTransition): string {
  return t.guard ? `${t.event} [${t.guard}]` : t.event;
}

/** Which way the layers of states run: left to right, or top to bottom. */
type Direction = "RIGHT" | "DOWN";

function elkGraph(graph: MachineGraph, direction: Direction): ElkNode {
  const children = new Map<string, GraphState[]>();
  for (const s of graph.states) if (s.parent !== undefined) children.set(s.parent, [...(children.get(s.parent) ?? []), s]);
  const edges: ElkExtendedEdge[] = [];
  // ELK spreads the ends of a state's edges along its side: a leaf with many grows long enough to keep them apart
  // (tall when the layers run left to right, wide when they run down).
  const ends = new Map<string, number>();
  for (const t of graph.transitions) {
    if (t.source === t.target) continue;
    for (const end of [`>${t.source}`, `<${t.target}`]) ends.set(end, (ends.get(end) ?? 0) + 1);
  }
  const node = (state: GraphState): ElkNode => {
    const kids = children.get(state.id) ?? [];
    const nameWidth = textWidth(stateName(state), STATE_FONT) + 24;
    if (kids.length === 0) {
      const side = END_GAP * (Math.max(ends.get(`>${state.id}`) ?? 0, ends.get(`<${state.id}`) ?? 0) + 1);
      const width = Math.max(LEAF_MIN_WIDTH, nameWidth, direction === "DOWN" ? side : 0);
      return { id: stateNodeId(state.id), width, height: Math.max(LEAF_HEIGHT, direction === "RIGHT" ? side : 0) };
    }
    const nested: ElkNode[] = kids.map(node);
    const initial = kids.find((k) => k.key === state.initial);
    if (initial && state.type !== "parallel") {
      const size = 2 * INITIAL_RADIUS;
      nested.unshift({ id: `i:${state.id}`, width: size, height: size });
      edges.push({ id: `ie:${state.id}`, sources: [`i:${state.id}`], targets: [stateNodeId(initial.id)] });
    }
    return {
      id: stateNodeId(state.id),
      children: nested,
      layoutOptions: {
        "elk.padding": `[top=${HEADER},left=12,bottom=12,right=12]`,
        // The header must fit its name even when the children are narrower.
        "elk.nodeSize.constraints": "[MINIMUM_SIZE]",
        "elk.nodeSize.minimum": `(${nameWidth}, ${HEADER + 12})`,
      },
    };
  };
  const root = graph.states[0];
  if (!root) throw new Error(`machine '${graph.id}' has no states`);
  const top = node(root);
  graph.transitions.forEach((t, i) => {
    const text = transitionLabel(t);
    edges.push({
      id: `e:${i}`,
      sources: [stateNodeId(t.source)],
      targets: [stateNodeId(t.target)],
      labels: [{ id: `l:${i}`, text, ...labelBox(text) }],
    });
  });
  return { id: "chart", layoutOptions: { ...LAYOUT_OPTIONS, "elk.direction": direction }, children: [top], edges };
}

function nodesOf(node: ElkNode, out: Map<string, ElkNode>): Map<string, ElkNode> {
  out.set(node.id, node);
  for (const child of node.children ?? []) nodesOf(child, out);
  return out;
}

function box(node: ElkShape | undefined, what: string): Box {
  if (node?.x === undefined || node.y === undefined || node.width === undefined || node.height === undefined)
    throw new Error(`ELK placed no ${what}`);
  return { x: node.x, y: node.y, width: node.width, height: node.height };
}

function route(edge: ElkExtendedEdge | undefined, what: string): Point[] {
  const sections = edge?.sections ?? [];
  if (sections.length === 0) throw new Error(`ELK routed no ${what}`);
  const points: Point[] = [];
  for (const s of sections) {
    for (const p of [s.startPoint, ...(s.bendPoints ?? []), s.endPoint]) {
      const last = points.at(-1);
      if (!last || last.x !== p.x || last.y !== p.y) points.push({ x: p.x, y: p.y });
    }
  }
  return points;
}

/**
 * Lays out a machine's chart with ELK, its layers running left to right, or top to bottom when that is narrower and
 * the chart is wider than {@link WIDE}: the page shows a chart in a column and scrolls down, so a narrower chart is
 * drawn larger. Deterministic: the same graph gives the same geometry.
 *
 * @example const layout = await layoutChart(machineGraph(taskMachine)); layout.states[0].width
 */
export async function layoutChart(graph: MachineGraph): Promise<ChartLayout> {
  const engine = await loadElk();
  let out = await engine.layout(elkGraph(graph, "RIGHT"));
  if ((out.width ?? 0) > WIDE) {
    const down = await engine.layout(elkGraph(graph, "DOWN"));
    if ((down.width ?? 0) < (out.width ?? 0)) out = down;
  }
  const nodes = nodesOf(out, new Map());
  const edges = new Map((out.edges ?? []).map((e) => [e.id, e]));
  const parents = new Set(graph.states.map((s) => s.parent));
  const transitions = graph.transitions.map((transition, i) => {
    const edge = edges.get(`e:${i}`);
    const label = edge?.labels?.[0];
    return {
      transition,
      points: route(edge, `route for transition ${i}`),
      label: { text: label?.text ?? "", ...box(label, `label for transition ${i}`) },
    };
  });
  const initials: InitialMark[] = [];
  for (const state of graph.states) {
    const dot = nodes.get(`i:${state.id}`);
    if (!dot) continue;
    const { x, y, width, height } = box(dot, `initial marker of '${state.id}'`);
    const target = graph.states.find((s) => s.parent === state.id && s.key === state.initial);
    if (!target) continue;
    initials.push({
      parent: state.id,
      target: target.id,
      centre: { x: x + width / 2, y: y + height / 2 },
      points: route(edges.get(`ie:${state.id}`), `initial arrow of '${state.id}'`),
    });
  }
  const lines = [...transitions, ...initials].map((t) => t.points);
  const labels = transitions.map((t) => t.label);
  const states = graph.states.map((state): StateBox => {
    const at = box(nodes.get(stateNodeId(state.id)), `box for state '${state.id}'`);
    const width = textWidth(stateName(state), STATE_FONT);
    const compound = parents.has(state.id);
    const name = compound
      ? headerBox(at, HEADER, width, NAME_HEIGHT, lines, labels)
      : { x: at.x + (at.width - width) / 2, y: at.y + (at.height - NAME_HEIGHT) / 2, width, height: NAME_HEIGHT };
    return { state, compound, ...at, name };
  });
  return { id: graph.id, width: Math.ceil(out.width ?? 0), height: Math.ceil(out.height ?? 0), states, transitions, initials };
}
