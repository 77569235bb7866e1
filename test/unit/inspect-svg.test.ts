import { describe, expect, it } from "vitest";
import { machineGraph } from "../../runtime/machine-graph.js";
import { escapeXml, statechartSvg, transitionLabel } from "../../runtime/inspect-svg.js";
import { machines } from "../../runtime/machines.js";

describe("statechart SVG of every machine", () => {
  for (const { name, machine } of machines) {
    it(`draws ${name}: every state once, every transition with its label, boxes nested inside their parents`, () => {
      const graph = machineGraph(machine);
      const svg = statechartSvg(graph);
      expect(svg).toMatch(new RegExp(`^<svg [^>]*data-machine="${graph.id}"`));
      for (const state of graph.states) expect(svg.split(`data-state="${escapeXml(state.id)}"`).length - 1).toBe(1);
      const edges = [...svg.matchAll(/<g class="transition"/g)];
      expect(edges.length).toBe(graph.transitions.length);
      for (const t of graph.transitions) expect(svg).toContain(`>${escapeXml(transitionLabel(t))}</text>`);
      // A child's rectangle lies inside its parent's.
      const rect = (id: string) => {
        const m = new RegExp(`data-state="${escapeXml(id).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"><title>[^<]*</title>\\s*<rect x="([\\d.-]+)" y="([\\d.-]+)" width="([\\d.]+)" height="([\\d.]+)"`).exec(svg);
        return m ? m.slice(1).map(Number) : undefined;
      };
      for (const state of graph.states.filter((s) => s.parent !== undefined)) {
        const [x, y, w, h] = rect(state.id) ?? [];
        const [px, py, pw, ph] = rect(state.parent as string) ?? [];
        expect(x! >= px! && y! >= py! && x! + w! <= px! + pw! && y! + h! <= py! + ph!, `${state.id} inside ${state.parent}`).toBe(true);
      }
    });
  }

  it("draws the task machine's CONTINUATION states inside running", () => {
    const svg = statechartSvg(machineGraph(machines.find((m) => m.name === "task")!.machine));
    for (const id of ["task.running.awaitingSubtask", "task.running.awaitingEvaluation", "task.running.awaitingInput"]) expect(svg).toContain(`data-state="${id}"`);
  });
});
