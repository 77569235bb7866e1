/** Renders a {@link MachineGraph} as a Mermaid `stateDiagram-v2` chart. */
import type { GraphState, GraphTransition, MachineGraph } from "./graph.js";

/**
 * The Mermaid identifier of a state: its path below the machine root with every character outside `[A-Za-z0-9_]`
 * turned into `_` (Mermaid ids cannot contain dots), e.g. `task.running.executing` → `running_executing`.
 */
export function mermaidId(graph: MachineGraph, stateId: string): string {
  const relative = stateId === graph.id ? stateId : stateId.slice(graph.id.length + 1);
  return relative.replace(/[^A-Za-z0-9_]/g, "_");
}

function label(t: GraphTransition): string {
  const text = t.guard ? `${t.event} [${t.guard}]` : t.event;
  // ';' ends a statement and '#' starts an entity code in Mermaid, so neither may appear in a label.
  return text.replace(/[;#]/g, "_");
}

/**
 * Mermaid `stateDiagram-v2` text for a machine graph: compound states become nested `state X { … }` blocks
 * (parallel regions separated by `--`), `[*] -->` marks each initial state and `--> [*]` each final one, and every
 * transition is labelled `event [guard]`. Targetless transitions are drawn as self-loops.
 */
export function toMermaid(graph: MachineGraph): string {
  const children = new Map<string, GraphState[]>();
  const outgoing = new Map<string, GraphTransition[]>();
  for (const s of graph.states) if (s.parent !== undefined) children.set(s.parent, [...(children.get(s.parent) ?? []), s]);
  const parentOf = new Map(graph.states.map((s) => [s.id, s.parent]));
  const root = graph.states[0];
  if (!root) throw new Error(`machine '${graph.id}' has no states`);
  const ancestors = (stateId: string): string[] => {
    const parent = parentOf.get(stateId);
    return parent === undefined ? [""] : [parent, ...ancestors(parent)];
  };
  // Mermaid creates a new state when a block mentions an id declared outside it, so an edge is written in the
  // innermost block that contains both ends ("" is the top level, below the root's block).
  for (const t of graph.transitions) {
    const around = new Set(ancestors(t.target));
    const block = ancestors(t.source).find((a) => around.has(a)) ?? "";
    outgoing.set(block, [...(outgoing.get(block) ?? []), t]);
  }
  const id = (stateId: string) => mermaidId(graph, stateId);

  const body = (node: GraphState, indent: string): string[] => {
    const kids = children.get(node.id) ?? [];
    const lines: string[] = [];
    if (node.type === "parallel") {
      kids.forEach((kid, i) => {
        if (i > 0) lines.push(`${indent}--`);
        lines.push(...declare(kid, indent));
      });
    } else {
      const initial = kids.find((k) => k.key === node.initial);
      if (initial) lines.push(`${indent}[*] --> ${id(initial.id)}`);
      for (const kid of kids) lines.push(...declare(kid, indent));
      for (const kid of kids) if (kid.type === "final") lines.push(`${indent}${id(kid.id)} --> [*]`);
    }
    return [...lines, ...edges(node.id, indent)];
  };

  const edges = (block: string, indent: string): string[] =>
    (outgoing.get(block) ?? []).map((t) => `${indent}${id(t.source)} --> ${id(t.target)} : ${label(t)}`);

  const declare = (node: GraphState, indent: string): string[] => {
    const sid = id(node.id);
    const aliased = sid !== node.key ? [`${indent}state "${node.key}" as ${sid}`] : [];
    if (!children.has(node.id)) return aliased.length ? aliased : [`${indent}state ${sid}`];
    return [...aliased, `${indent}state ${sid} {`, ...body(node, indent + "  "), `${indent}}`];
  };

  const rootHasEdges = outgoing.has("");
  const lines = rootHasEdges ? [...declare(root, "  "), ...edges("", "  ")] : body(root, "  ");
  return ["stateDiagram-v2", ...lines].join("\n") + "\n";
}
