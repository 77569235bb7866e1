/**
 * The chart cache serves a machine's chart from the file `npm run build` writes when the machine's graph is the one it
 * was laid out from, and lays it out itself when the graph differs or the file is missing.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createChartCache, writePrebuiltCharts } from "../../runtime/charts/cache.js";
import { machineGraph } from "../../runtime/charts/graph.js";
import { machines } from "../../runtime/charts/registry.js";
import { statechartSvg } from "../../runtime/charts/svg.js";

const dir = mkdtempSync(join(tmpdir(), "dirigent-charts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const task = machines.find((m) => m.name === "task")!;
const sequential = machines.find((m) => m.name === "sequential")!;

describe("chart cache", () => {
  it("writes every machine's chart as laid out, and serves a prebuilt chart only for the graph it was laid out from", async () => {
    const file = join(dir, "charts.json");
    await writePrebuiltCharts(file, [task, sequential]);
    const written = JSON.parse(readFileSync(file, "utf8")) as Record<string, { graph: string; svg: string }>;
    expect(Object.keys(written)).toEqual(["task", "sequential"]);
    const laidOut = await statechartSvg(machineGraph(task.machine));
    expect(written.task?.svg).toBe(laidOut);
    expect(await createChartCache(file).svg(task)).toBe(laidOut);

    // The prebuilt chart is what is served: a marked one comes back as written.
    const marked = `<svg data-machine="task" data-marked="yes"/>`;
    writeFileSync(file, JSON.stringify({ ...written, task: { ...written.task, svg: marked } }));
    const cache = createChartCache(file);
    expect(await cache.svg(task)).toBe(marked);
    // …but not for another graph: the sequential machine's entry under the task's name is laid out anew.
    writeFileSync(file, JSON.stringify({ task: { graph: written.sequential?.graph, svg: marked } }));
    expect(await createChartCache(file).svg(task)).toBe(laidOut);
  });

  it("lays out a chart once per cache when there is no prebuilt file", async () => {
    const cache = createChartCache(join(dir, "missing.json"));
    const first = cache.svg(sequential);
    expect(cache.svg(sequential)).toBe(first);
    expect(await first).toBe(await statechartSvg(machineGraph(sequential.machine)));
  });
});
