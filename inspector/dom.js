// The inspector page's DOM building: elements made with createElement and text only, and a chart's SVG parsed as XML
// with only the elements and attributes a chart has (inspector/app.js, docs/inspector.md "Runtime data is text").

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c);
  return node;
}

// What a chart may contain: the elements and attributes runtime/charts/svg.ts draws, nothing that runs code or loads.
const SVG_ELEMENTS = new Set(["svg", "defs", "marker", "g", "path", "rect", "circle", "text", "title"]);
const SVG_ATTRIBUTES = new Set([
  "xmlns",
  "class",
  "viewBox",
  "width",
  "height",
  "x",
  "y",
  "rx",
  "cx",
  "cy",
  "r",
  "d",
  "text-anchor",
  "marker-end",
  "id",
  "refX",
  "refY",
  "markerWidth",
  "markerHeight",
  "orient",
]);

/**
 * A chart's SVG text as a node of this page: parsed as XML (never as HTML), keeping only the allowed elements and
 * attributes (`data-*` included), so no script, event handler, link or foreign object from the text reaches the page.
 */
export function svgElement(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  if (!(root instanceof SVGSVGElement) || doc.getElementsByTagName("parsererror").length > 0) {
    return el("p", { class: "hint" }, "this chart could not be read");
  }
  const walk = (node) => {
    for (const child of [...node.children]) {
      if (!SVG_ELEMENTS.has(child.localName) || !(child instanceof SVGElement)) child.remove();
      else walk(child);
    }
    for (const attr of [...node.attributes]) {
      const allowed = attr.namespaceURI === null && (SVG_ATTRIBUTES.has(attr.name) || /^data-[a-z-]+$/.test(attr.name));
      // The one id a chart has is its arrow marker's: no other id may shadow the page's own elements.
      const fixed = (attr.name === "id" && attr.value !== "arrow") || (attr.name === "marker-end" && attr.value !== "url(#arrow)");
      if (!allowed || fixed) node.removeAttribute(attr.name);
    }
  };
  walk(root);
  return document.importNode(root, true);
}
