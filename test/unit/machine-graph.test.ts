import { describe, expect, it } from "vitest";
import { setup } from "xstate";
import { implementationName, machineGraph } from "../../runtime/charts/graph.js";
import { mermaidId, toMermaid } from "../../runtime/charts/mermaid.js";
import { machines } from "../../runtime/charts/registry.js";
import type { AnyStateNode } from "xstate";

function allNodes(node: AnyStateNode): AnyStateNode[] {
  return [node, ...Object.values(node.states).flatMap(allNodes)];
}

/** Structural checks of a Mermaid stateDiagram-v2 text; returns the problems found. */
function mermaidProblems(text: string): string[] {
  const problems: string[] = [];
  const lines = text.trimEnd().split("\n");
  if (lines[0] !== "stateDiagram-v2") problems.push(`first line is '${lines[0]}'`);
  const declared = new Set<string>();
  const referenced: string[] = [];
  let depth = 0;
  for (const raw of lines.slice(1)) {
    const line = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^state ([A-Za-z0-9_]+) \{$/.exec(line))) {
      depth++;
      declared.add(m[1]!);
    } else if (line === "}") {
      if (--depth < 0) problems.push("'}' without an open block");
    } else if ((m = /^state "[^"]+" as ([A-Za-z0-9_]+)$/.exec(line)) || (m = /^state ([A-Za-z0-9_]+)$/.exec(line))) {
      declared.add(m[1]!);
    } else if ((m = /^(\[\*\]|[A-Za-z0-9_]+) --> (\[\*\]|[A-Za-z0-9_]+)( : [^;#]+)?$/.exec(line))) {
      for (const end of [m[1]!, m[2]!]) if (end !== "[*]") referenced.push(end);
    } else if (line !== "--") {
      problems.push(`unrecognised line '${line}'`);
    }
  }
  if (depth !== 0) problems.push(`${depth} unclosed block(s)`);
  for (const ref of referenced) if (!declared.has(ref)) problems.push(`'${ref}' is used but never declared`);
  return problems;
}

describe("machine registry", () => {
  it("lists every machine once, under distinct names and ids", () => {
    expect(machines.length).toBeGreaterThanOrEqual(7);
    expect(new Set(machines.map((m) => m.name)).size).toBe(machines.length);
    expect(new Set(machines.map((m) => m.machine.id)).size).toBe(machines.length);
  });
});

describe.each(machines.map((m) => [m.name, m.machine] as const))("machine graph of %s", (_name, machine) => {
  const graph = machineGraph(machine);
  const ids = new Set(graph.states.map((s) => s.id));

  it("contains every state node of the machine exactly once", () => {
    const expected = allNodes(machine.root).map((n) => n.id);
    expect(graph.states.map((s) => s.id)).toEqual(expected);
    expect(ids.size).toBe(expected.length);
  });

  it("has transitions whose sources and targets are states of the graph", () => {
    expect(graph.transitions.length).toBeGreaterThan(0);
    for (const t of graph.transitions) {
      expect(ids, `source of ${t.event}`).toContain(t.source);
      expect(ids, `target of ${t.event}`).toContain(t.target);
    }
  });

  it("keeps every declared transition (one graph edge per target, or one self-loop when targetless)", () => {
    const declared = allNodes(machine.root).reduce((n, node) => {
      const defs = [...node.transitions.values(), node.always ?? []].flat();
      return n + defs.reduce((k, d) => k + Math.max(1, d.target?.length ?? 0), 0);
    }, 0);
    expect(graph.transitions).toHaveLength(declared);
  });

  it("marks final states, parents and initial children as the machine defines them", () => {
    for (const node of allNodes(machine.root)) {
      const state = graph.states.find((s) => s.id === node.id)!;
      expect(state.type).toBe(node.type);
      expect(state.parent).toBe(node.parent?.id);
      if (node.type === "compound") expect(state.initial).toBe(node.initial.target[0]?.key);
      expect(state.description).toBe(node.description);
    }
  });

  it("names each invoke's result events after the invoked actor", () => {
    for (const state of graph.states) {
      for (const inv of state.invokes) {
        const events = graph.transitions.filter((t) => t.source === state.id).map((t) => t.event);
        if (inv.onDone) expect(events).toContain(`done:${inv.src}`);
        if (inv.onError) expect(events).toContain(`error:${inv.src}`);
      }
    }
    expect(graph.transitions.some((t) => t.event.startsWith("xstate."))).toBe(false);
  });

  it("renders well-formed Mermaid that declares every state and draws every transition", () => {
    const text = toMermaid(graph);
    expect(mermaidProblems(text)).toEqual([]);
    const edgeLines = text.split("\n").filter((l) => / --> /.test(l) && !l.includes("[*]"));
    expect(edgeLines).toHaveLength(graph.transitions.length);
    for (const s of graph.states.slice(1))
      expect(text).toMatch(new RegExp(`state (("${s.key}" as )?${mermaidId(graph, s.id)})( \\{)?$`, "m"));
    for (const s of graph.states.filter((st) => st.type === "final")) expect(text).toContain(`${mermaidId(graph, s.id)} --> [*]`);
  });
});

describe("task machine graph", () => {
  const task = machines.find((m) => m.name === "task")!.machine;
  const graph = machineGraph(task);
  const state = (id: string) => graph.states.find((s) => s.id === id);

  it("shows the CONTINUATION states and the transitions into and out of them", () => {
    expect(state("task.running.awaitingEvaluation")).toMatchObject({
      parent: "task.running",
      type: "atomic",
      tags: ["awaiting_evaluation"],
    });
    expect(state("task.running.awaitingSubtask")).toMatchObject({ parent: "task.running", type: "atomic", tags: ["awaiting_subtask"] });
    for (const target of ["task.running.awaitingEvaluation", "task.running.awaitingSubtask"]) {
      expect(graph.transitions).toContainEqual({
        source: "task.running.executing",
        target,
        event: "task.progress",
        guard: "isProgress",
        actions: ["announce"],
      });
      expect(graph.transitions).toContainEqual({
        source: target,
        target: "task.running.executing",
        event: "task.progress",
        guard: "isProgress",
        actions: ["announce"],
      });
    }
  });

  it("marks completed, failed and cancelled as final and records the evaluate invoke", () => {
    expect(graph.states.filter((s) => s.type === "final").map((s) => s.key)).toEqual(["completed", "failed", "cancelled"]);
    expect(state("task.running")?.invokes).toEqual([{ src: "evaluate", onDone: "task.completed", onError: "task.failed" }]);
    expect(state("task.running")?.entry).toEqual(["announce"]);
    expect(state("task.cancelled")?.entry).toEqual(["assign"]);
    expect(graph.transitions).toContainEqual({
      source: "task.running",
      target: "task.completed",
      event: "done:evaluate",
      guard: "succeeded",
      actions: ["assign"],
    });
  });

  it("renders the expected Mermaid lines", () => {
    const lines = toMermaid(graph).split("\n");
    for (const expected of [
      "stateDiagram-v2",
      "  [*] --> queued",
      "  state running {",
      "    [*] --> running_executing",
      '    state "awaitingEvaluation" as running_awaitingEvaluation',
      "    running_executing --> running_awaitingSubtask : task.progress [isProgress]",
      "    running_awaitingEvaluation --> running_executing : task.progress [isProgress]",
      "  cancelled --> [*]",
      "  queued --> running : task.start",
      "  running --> completed : done:evaluate [succeeded]",
      "  running --> failed : error:evaluate",
    ])
      expect(lines).toContain(expected);
  });
});

describe("conversion details", () => {
  const machine = setup({ guards: { ready: () => true }, actions: { log: () => undefined } }).createMachine({
    id: "demo",
    on: { reset: { target: ".idle" } },
    initial: "idle",
    states: {
      idle: { after: { 100: "both" }, always: { guard: "ready", target: "both", actions: "log" } },
      both: {
        type: "parallel",
        onDone: "finished",
        states: {
          a: { initial: "a1", states: { a1: { on: { go: "a2" } }, a2: { type: "final" } } },
          b: { initial: "b1", states: { b1: { on: { go: { guard: () => true, target: "b2" } } }, b2: { type: "final" } } },
        },
      },
      finished: { type: "final" },
    },
  });
  const graph = machineGraph(machine);

  it("labels delayed, eventless, compound-done and inline-guarded transitions", () => {
    expect(graph.transitions).toContainEqual({ source: "demo.idle", target: "demo.both", event: "after:100", actions: [] });
    expect(graph.transitions).toContainEqual({
      source: "demo.idle",
      target: "demo.both",
      event: "always",
      guard: "ready",
      actions: ["log"],
    });
    expect(graph.transitions).toContainEqual({ source: "demo.both", target: "demo.finished", event: "done", actions: [] });
    expect(graph.transitions).toContainEqual({
      source: "demo.both.b.b1",
      target: "demo.both.b.b2",
      event: "go",
      guard: "inline",
      actions: [],
    });
  });

  it("draws parallel regions separated by '--' and root transitions outside the root block", () => {
    const text = toMermaid(graph);
    expect(mermaidProblems(text)).toEqual([]);
    expect(text).toMatch(/state both \{\n *state "a" as both_a\n *state both_a \{[\s\S]*\n *--\n *state "b" as both_b\n *state both_b \{/);
    expect(text.trimEnd().split("\n").at(-1)).toBe("  demo --> idle : reset");
  });

  it("names built-in and higher-order implementations", () => {
    expect(implementationName("x")).toBe("x");
    expect(implementationName({ type: "announce", params: {} })).toBe("announce");
    expect(implementationName(function namedGuard() {})).toBe("namedGuard");
  });
});

describe("edges across composite states", () => {
  const machine = setup({}).createMachine({
    id: "x",
    initial: "outer",
    states: {
      outer: { initial: "inner", states: { inner: { on: { quit: "#x.gone", next: "other" } }, other: {} } },
      gone: { type: "final" },
    },
  });

  it("writes each edge in the innermost block holding both ends, so Mermaid never redeclares a state", () => {
    const lines = toMermaid(machineGraph(machine)).split("\n");
    const close = lines.indexOf("  }");
    expect(lines.indexOf("    outer_inner --> outer_other : next")).toBeLessThan(close);
    expect(lines.indexOf("  outer_inner --> gone : quit")).toBeGreaterThan(close);
  });
});
