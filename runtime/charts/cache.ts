/**
 * Each machine's chart, laid out once. `npm run build` lays out every machine of the registry into
 * `prebuilt-charts.json` next to this module in dist/ (`prebuild.ts`), so `dirigent inspect` serves the charts at
 * once; a chart whose machine's graph is not the one it was laid out from (a machine changed since the build, or the
 * code runs from source with no prebuilt file) is laid out on first use instead. Either way it is kept for the process.
 */
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import type { AnyStateMachine } from "xstate";
import { machineGraph, type MachineGraph } from "./graph.js";
import { machines, type NamedMachine } from "./registry.js";
import { statechartSvg } from "./svg.js";

/** Where `npm run build` writes the charts: next to this module. */
export const PREBUILT_CHARTS = new URL("./prebuilt-charts.json", import.meta.url);

/** The prebuilt file: per machine name, the key of the graph it was laid out from, and its SVG. */
type Prebuilt = Record<string, { graph: string; svg: string }>;

/** A graph's key: the SHA-256 of its JSON, so any change to a state or transition makes a prebuilt chart unusable. */
function graphKey(graph: MachineGraph): string {
  return createHash("sha256").update(JSON.stringify(graph)).digest("hex");
}

/** Charts by machine, taken from a prebuilt file where they match, else laid out once each. */
export interface ChartCache {
  /** The SVG of a machine's chart. */
  svg(named: NamedMachine): Promise<string>;
}

/**
 * A chart cache over a prebuilt file (absent or unreadable: every chart is laid out on first use).
 *
 * @example await createChartCache(PREBUILT_CHARTS).svg(machines[0])
 */
export function createChartCache(file: URL | string): ChartCache {
  let prebuilt: Promise<Prebuilt> | undefined;
  const charts = new WeakMap<AnyStateMachine, Promise<string>>();
  const chartOf = async ({ name, machine }: NamedMachine): Promise<string> => {
    const graph = machineGraph(machine);
    prebuilt ??= readFile(file, "utf8")
      .then((text) => JSON.parse(text) as Prebuilt)
      .catch(() => ({}));
    const built = (await prebuilt)[name];
    return typeof built?.svg === "string" && built.graph === graphKey(graph) ? built.svg : statechartSvg(graph);
  };
  return {
    svg(named) {
      let svg = charts.get(named.machine);
      if (!svg) charts.set(named.machine, (svg = chartOf(named)));
      return svg;
    },
  };
}

/** The process's charts, from dist/'s prebuilt file. */
export const machineCharts: ChartCache = createChartCache(PREBUILT_CHARTS);

/** Lays out every machine of `list` and writes the charts to `file` (what `npm run build` does, for the registry). */
export async function writePrebuiltCharts(file: URL | string, list: readonly NamedMachine[] = machines): Promise<void> {
  const prebuilt: Prebuilt = {};
  for (const { name, machine } of list) {
    const graph = machineGraph(machine);
    prebuilt[name] = { graph: graphKey(graph), svg: await statechartSvg(graph) };
  }
  await writeFile(file, JSON.stringify(prebuilt));
}
