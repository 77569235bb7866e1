/**
 * Draws a machine's chart as SVG from its ELK layout (`layout.ts`): every state a box at the place ELK gave it
 * (compound states around their children), every transition the route ELK found, with its label in the box ELK
 * reserved for it. Every state is a `<g class="state" data-state="<state id>">` and every transition a
 * `<g class="transition" data-source data-target data-event>`, so the inspector page highlights the active states and
 * the transition just taken by id. Every name it embeds (machine id, state ids and keys, descriptions, tags, events,
 * guards) goes through {@link escapeXml}, so the SVG holds them as text only; the page parses it as XML and keeps
 * only the elements and attributes drawn here.
 */
import type { MachineGraph } from "./graph.js";
import { INITIAL_RADIUS, LABEL_FONT, layoutChart, STATE_FONT, stateName, type ChartLayout, type StateBox } from "./layout.js";
import type { Point } from "./geometry.js";

/** Escapes text for SVG/XML. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}

/** A number as written in the SVG: at most one decimal. */
function n(value: number): string {
  return String(Math.round(value * 10) / 10);
}

function path(points: readonly Point[]): string {
  return points.map((p, i) => `${i === 0 ? "M" : "L"} ${n(p.x)} ${n(p.y)}`).join(" ");
}

/** The baseline that centres a line of text of `fontSize` vertically on `y` (DejaVu Sans: ascent .93, descent .24 em). */
function baseline(y: number, fontSize: number): string {
  return n(y + 0.35 * fontSize);
}

function stateSvg(b: StateBox): string {
  const s = b.state;
  const kind = s.parent === undefined ? "root" : s.type;
  const title = escapeXml([s.id, s.description, s.tags.length ? `tags: ${s.tags.join(", ")}` : ""].filter(Boolean).join("\n"));
  const name = escapeXml(stateName(s));
  const middle = b.name.y + b.name.height / 2;
  const out = [
    `<g class="state ${escapeXml(kind)}" data-state="${escapeXml(s.id)}"><title>${title}</title>`,
    `<rect x="${n(b.x)}" y="${n(b.y)}" width="${n(b.width)}" height="${n(b.height)}" rx="${b.compound ? 10 : 16}"/>`,
  ];
  if (s.type === "final")
    out.push(`<rect class="inner" x="${n(b.x + 4)}" y="${n(b.y + 4)}" width="${n(b.width - 8)}" height="${n(b.height - 8)}" rx="12"/>`);
  out.push(
    b.compound
      ? `<text x="${n(b.name.x)}" y="${baseline(middle, STATE_FONT)}">${name}</text>`
      : `<text x="${n(b.x + b.width / 2)}" y="${baseline(middle, STATE_FONT)}" text-anchor="middle">${name}</text>`,
    `</g>`,
  );
  return out.join("");
}

/**
 * The SVG of a laid-out chart.
 *
 * @example drawChart(await layoutChart(machineGraph(taskMachine))) // '<svg … data-machine="task">…'
 */
export function drawChart(layout: ChartLayout): string {
  const states = layout.states.map(stateSvg);
  const initials = layout.initials.map(
    (i) =>
      `<g class="initial" data-target="${escapeXml(i.target)}"><circle cx="${n(i.centre.x)}" cy="${n(i.centre.y)}" r="${INITIAL_RADIUS}"/><path d="${path(i.points)}" marker-end="url(#arrow)"/></g>`,
  );
  const edges = layout.transitions.map(({ transition: t, points, label }) => {
    const attrs = `class="transition" data-source="${escapeXml(t.source)}" data-target="${escapeXml(t.target)}" data-event="${escapeXml(t.event)}"`;
    const text = `<text x="${n(label.x + label.width / 2)}" y="${baseline(label.y + label.height / 2, LABEL_FONT)}" text-anchor="middle">${escapeXml(label.text)}</text>`;
    return `<g ${attrs}><path d="${path(points)}" marker-end="url(#arrow)"/>${text}</g>`;
  });
  const { width, height } = layout;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="statechart" data-machine="${escapeXml(layout.id)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">`,
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>`,
    ...states,
    ...initials,
    `<g class="transitions">${edges.join("")}</g>`,
    `</svg>`,
  ].join("\n");
}

/**
 * The SVG of a machine's chart, laid out by ELK.
 *
 * @example await statechartSvg(machineGraph(taskMachine)) // '<svg … data-machine="task">…'
 */
export async function statechartSvg(graph: MachineGraph): Promise<string> {
  return drawChart(await layoutChart(graph));
}
