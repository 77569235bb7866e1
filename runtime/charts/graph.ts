/**
 * Converts an XState machine definition into a plain JSON graph of its states and transitions, read from the
 * machine's own `StateNode` tree, so diagrams and the inspector never drift from the code.
 */
import type { AnyStateMachine, AnyStateNode } from "xstate";

/** One invoked actor of a state. */
export interface GraphInvoke {
  /** The actor's source name as declared in `setup({ actors })`, or the invoke id for inline logic. */
  src: string;
  /** Full path of the `onDone` target, when the invoke has one. */
  onDone?: string;
  /** Full path of the `onError` target, when the invoke has one. */
  onError?: string;
}

/** One state node of a machine. */
export interface GraphState {
  /** Full path, e.g. `task.running.awaitingEvaluation` (the XState state node id). */
  id: string;
  /** The state's key inside its parent, e.g. `awaitingEvaluation`. */
  key: string;
  /** Full path of the parent state; absent on the machine's root. */
  parent?: string;
  /** Key of the initial child state of a compound state. */
  initial?: string;
  /** XState's state node type. */
  type: "atomic" | "compound" | "parallel" | "final" | "history";
  /** The state's `description`. */
  description?: string;
  /** The state's tags. */
  tags: string[];
  /** Names of the entry actions. */
  entry: string[];
  /** Names of the exit actions. */
  exit: string[];
  /** Actors invoked while in this state. */
  invokes: GraphInvoke[];
}

/** One transition (one per target when a transition has several). */
export interface GraphTransition {
  /** Full path of the state the transition is declared on. */
  source: string;
  /** Full path of the target; equal to `source` for a targetless transition (see `targetless`). */
  target: string;
  /**
   * The event: its type for `on`, `always` for eventless transitions, `done:<src>`/`error:<src>` for an invoke's
   * result, `done` for a compound state's `onDone`, `after:<delay>` for delayed transitions.
   */
  event: string;
  /** Name of the guard, when the transition is guarded. */
  guard?: string;
  /** Names of the transition's actions. */
  actions: string[];
  /** True when the transition has no target: it runs its actions and stays in `source`. */
  targetless?: boolean;
}

/** A machine as a plain JSON graph. */
export interface MachineGraph {
  /** The machine's id (also the root state's id). */
  id: string;
  /** Every state node, root first, in document order. */
  states: GraphState[];
  /** Every transition, in document order. */
  transitions: GraphTransition[];
}

function fieldOf(value: unknown, key: string): unknown {
  return (typeof value === "object" || typeof value === "function") && value !== null ? Reflect.get(value, key) : undefined;
}

/** The name of an action or guard as declared: a string, a `{ type }` object, or a built-in such as `assign`. */
export function implementationName(value: unknown): string {
  if (typeof value === "string") return value;
  const type = fieldOf(value, "type");
  if (typeof type === "string") {
    const guards = fieldOf(value, "guards");
    const inner = Array.isArray(guards) ? `(${guards.map(implementationName).join(", ")})` : "";
    return type.replace(/^xstate\./, "") + inner;
  }
  // An inline `guard: () => …` or `actions: () => …` is named after its property, which says nothing.
  if (typeof value === "function" && value.name && !["guard", "actions", "entry", "exit"].includes(value.name)) return value.name;
  return "inline";
}

function eventLabel(node: AnyStateNode, eventType: string): string {
  const invoked = (prefix: string) => {
    const id = eventType.slice(prefix.length);
    const def = node.invoke.find((i) => i.id === id);
    return def ? srcName(def.src, id) : id;
  };
  if (eventType.startsWith("xstate.done.actor.")) return `done:${invoked("xstate.done.actor.")}`;
  if (eventType.startsWith("xstate.error.actor.")) return `error:${invoked("xstate.error.actor.")}`;
  if (eventType.startsWith("xstate.done.state.")) return "done";
  const after = /^xstate\.after\.([^.]+)\./.exec(eventType);
  if (after) return `after:${after[1]}`;
  return eventType;
}

function srcName(src: unknown, id: string): string {
  return typeof src === "string" ? src : id;
}

function collectStates(node: AnyStateNode, out: GraphState[]): void {
  const initialTarget = node.type === "compound" ? node.initial.target[0] : undefined;
  const state: GraphState = {
    id: node.id,
    key: node.key,
    type: node.type,
    tags: [...node.tags],
    entry: node.entry.map(implementationName),
    exit: node.exit.map(implementationName),
    invokes: node.invoke.map((inv) => {
      const done = node.transitions.get(`xstate.done.actor.${inv.id}`)?.flatMap((t) => t.target ?? []);
      const error = node.transitions.get(`xstate.error.actor.${inv.id}`)?.flatMap((t) => t.target ?? []);
      return {
        src: srcName(inv.src, inv.id),
        ...(done?.[0] ? { onDone: done[0].id } : {}),
        ...(error?.[0] ? { onError: error[0].id } : {}),
      };
    }),
    ...(node.parent ? { parent: node.parent.id } : {}),
    ...(initialTarget ? { initial: initialTarget.key } : {}),
    ...(node.description ? { description: node.description } : {}),
  };
  out.push(state);
  for (const child of Object.values(node.states)) collectStates(child, out);
}

function collectTransitions(node: AnyStateNode, out: GraphTransition[]): void {
  const groups: Array<[string, NonNullable<AnyStateNode["always"]>]> = [...node.transitions.entries()].map(([type, ts]) => [
    eventLabel(node, type),
    ts,
  ]);
  if (node.always) groups.push(["always", node.always]);
  for (const [event, definitions] of groups) {
    for (const def of definitions) {
      const base = {
        source: node.id,
        event,
        actions: def.actions.map(implementationName),
        ...(def.guard !== undefined ? { guard: implementationName(def.guard) } : {}),
      };
      const targets = def.target ?? [];
      if (targets.length === 0) out.push({ ...base, target: node.id, targetless: true });
      for (const target of targets) out.push({ ...base, target: target.id });
    }
  }
  for (const child of Object.values(node.states)) collectTransitions(child, out);
}

/**
 * The graph of a machine: every state node with its kind, description, tags, entry/exit actions and invokes, and
 * every transition with its event, guard and actions.
 *
 * @example
 * machineGraph(taskMachine).transitions.filter((t) => t.target === "task.running.awaitingEvaluation")
 */
export function machineGraph(machine: AnyStateMachine): MachineGraph {
  const states: GraphState[] = [];
  const transitions: GraphTransition[] = [];
  collectStates(machine.root, states);
  collectTransitions(machine.root, transitions);
  return { id: machine.id, states, transitions };
}
