/**
 * Every machine's chart is readable as drawn: its SVG's geometry (state boxes, edge routes, the boxes the state names
 * and label texts cover) breaks none of the rules of test/support/chart-geometry.ts — no two labels overlap, no edge
 * runs through a state box it does not enter, through another transition's label or through a state's name, no label
 * lies on a state box or a name.
 */
import { describe, expect, it } from "vitest";
import { machineGraph } from "../../runtime/charts/graph.js";
import { machines } from "../../runtime/charts/registry.js";
import { headerBox } from "../../runtime/charts/header.js";
import { statechartSvg } from "../../runtime/charts/svg.js";
import type { Box } from "../../runtime/charts/geometry.js";
import { chartProblems, svgGeometry, type ChartGeometry } from "../support/chart-geometry.js";

describe("chart layout of every machine", () => {
  for (const { name, machine } of machines) {
    it(`lays out ${name} with no overlapping label and no edge through a box or a label`, async () => {
      const graph = machineGraph(machine);
      const geometry = svgGeometry(await statechartSvg(graph), graph);
      // The geometry holds everything drawn, so the rules below see every box and every edge.
      expect([...geometry.states.keys()].sort()).toEqual(graph.states.map((s) => s.id).sort());
      expect([...geometry.names.keys()].sort()).toEqual(graph.states.map((s) => s.id).sort());
      expect(geometry.edges.filter((e) => e.label).length).toBe(graph.transitions.length);
      expect(chartProblems(geometry)).toEqual([]);
    });
  }
});

describe("the readability rules", () => {
  const chart = (edges: ChartGeometry["edges"]): ChartGeometry => ({
    states: new Map([
      ["m", { x: 0, y: 0, width: 300, height: 200 }],
      ["m.a", { x: 10, y: 40, width: 60, height: 30 }],
      ["m.b", { x: 120, y: 40, width: 60, height: 30 }],
      ["m.c", { x: 230, y: 40, width: 60, height: 30 }],
    ]),
    names: new Map([["m", { x: 10, y: 5, width: 50, height: 14 }]]),
    parents: new Map([
      ["m", undefined],
      ["m.a", "m"],
      ["m.b", "m"],
      ["m.c", "m"],
    ]),
    edges,
  });
  /** A straight edge from `from` to `to` with its label. */
  const edge = (name: string, source: string, target: string, from: [number, number], to: [number, number], label: Box) => ({
    name,
    source,
    target,
    points: [from, to].map(([x, y]) => ({ x, y })),
    label,
  });
  const ab = edge("a→b", "m.a", "m.b", [70, 55], [120, 55], { x: 75, y: 40, width: 40, height: 12 });

  it("accepts an edge between neighbours with its label beside it", () => {
    expect(chartProblems(chart([ab]))).toEqual([]);
  });

  it("finds overlapping labels, an edge through a box and through a label, a label on a box", () => {
    const ac = edge("a→c", "m.a", "m.c", [70, 50], [230, 50], { x: 100, y: 44, width: 60, height: 16 });
    expect(chartProblems(chart([ab, ac]))).toEqual([
      "labels overlap: a→b / a→c",
      "edge crosses label of a→c: a→b",
      "edge crosses state m.b: a→c",
      "edge crosses label of a→b: a→c",
      "label lies on state m.b: a→c",
    ]);
  });

  it("finds an edge through a state's name and a label on it", () => {
    const into = edge("m→a", "m", "m.a", [20, 0], [20, 40], { x: 30, y: 10, width: 20, height: 8 });
    expect(chartProblems(chart([into]))).toEqual(["edge crosses the name of m: m→a", "label lies on the name of m: m→a"]);
  });
});

describe("a compound state's name", () => {
  const state = { x: 0, y: 0, width: 200, height: 100 };

  it("goes at the left of the band above the children when nothing runs there", () => {
    expect(headerBox(state, 28, 50, 14, [], [])).toEqual({ x: 10, y: 7, width: 50, height: 14 });
  });

  it("moves right past an edge running down through the band and a label lying in it", () => {
    const down = [
      { x: 30, y: -20 },
      { x: 30, y: 60 },
    ];
    expect(headerBox(state, 28, 50, 14, [down], []).x).toBe(34);
    expect(headerBox(state, 28, 50, 14, [down], [{ x: 80, y: 5, width: 20, height: 10 }]).x).toBe(102);
    // No room left: back at the left.
    expect(headerBox({ ...state, width: 90 }, 28, 50, 14, [down], []).x).toBe(10);
  });
});
