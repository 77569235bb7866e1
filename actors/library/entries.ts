/**
 * What one template file contributes to the library: every top-level function template (`<template name>`,
 * function-style `<task name parameters>`), every named top-level task, call or cond, the file's first unnamed one
 * (under the file's base name), and the named tasks of a `<library>`. Pure: text in, templates and located errors out.
 */
import type { ExecutableNode, TemplateDocument, TemplateNode, TopLevelNode } from "../../machines/language/ast.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { isExecutable, isFunctionStyleTask } from "../../machines/language/nodes.js";
import { type XmlElement, readXml } from "../../machines/language/xml.js";

/** One registered template. */
export interface LibraryTemplate {
  /** Unique name: the `name` attribute, or the file's base name for the file's unnamed task. */
  name: string;
  /** The task's `type` (`atomic` when absent); `call` or `cond` for a template that is a call or a cond. */
  type: string;
  /** The task's `subtype` (`evaluator`, `subtask`, …), when written. */
  subtype?: string;
  /** The task's `<description>`, trimmed (`{{…}}` not substituted); empty when it has none. */
  description: string;
  /** The task's `<criteria>` (a list joined by spaces), when written: it joins the description in matching. */
  criteria?: string;
  /** The file it was read from (as named to the loader). */
  file: string;
  /**
   * XML that runs this template when submitted: the whole file when the template is the file's first task, else
   * the file's function templates followed by the template's own element (for a `<template>`, its body). For a
   * function-style `<task name parameters>` it is the whole file: run `document` instead.
   */
  xml: string;
  /**
   * The template as a document the Evaluator can walk: `entry` (and `nodes[0]`) is the template's task (for a
   * function template, its body; its parameters are bound from the inputs), `templates` the file's function
   * templates. Locations are those of the file.
   */
  document: TemplateDocument;
}

/** A problem with a template file, located when the file was read. */
export interface LibraryError {
  /** The file (or the directory, when it cannot be read). */
  file: string;
  /** 1-based line, when known. */
  line?: number;
  /** 1-based column, when known. */
  col?: number;
  /** Short, lowercase explanation. */
  message: string;
}

/** The templates, errors and warnings of one file. */
export interface FileTemplates {
  readonly templates: LibraryTemplate[];
  readonly errors: LibraryError[];
  readonly warnings: LibraryError[];
}

/** The name an unnamed template of `file` is registered under: its base name without `.xml`. */
export function baseName(file: string): string {
  const last = file.split(/[\\/]/).pop() ?? file;
  return last.replace(/\.xml$/i, "") || last;
}

/**
 * The templates one file defines. A file that does not parse gives one error with its line and column; a file
 * that parses but registers nothing gives an error too (it is no template).
 */
export function templatesOfFile(file: string, xml: string): FileTemplates {
  const parsed = parseTemplate(xml);
  if (!parsed.ok) {
    const { line, col, message } = parsed.error;
    return { templates: [], errors: [{ file, line, col, message }], warnings: [] };
  }
  const { document } = parsed;
  const warnings: LibraryError[] = parsed.warnings.map((w) => ({ file, line: w.line, col: w.col, message: w.message }));
  const errors: LibraryError[] = [];
  const templates: LibraryTemplate[] = [];
  const { definitions, others } = topLevelElements(xml);
  const definitionsXml = definitions.map((el) => xml.slice(el.start, el.end)).join("\n");
  /** XML that runs `el` on its own: the file's function templates, then the element. */
  const standalone = (el: XmlElement | undefined) => (el === undefined ? xml : `${definitionsXml}\n${xml.slice(el.start, el.end)}`);
  const add = (name: string, node: ExecutableNode, source: string): void => {
    templates.push(entryOf(file, name, node, source, document.templates));
  };

  document.templates.forEach((template, i) => {
    add(template.name, template.body, template.form === "template" ? standalone(bodyElement(definitions[i])) : xml);
  });
  let unnamed: ExecutableNode | undefined;
  document.nodes.forEach((node, i) => {
    const source = node === document.entry ? xml : standalone(others[i]);
    if (node.kind === "library") {
      const children = (others[i]?.children ?? []).filter((c): c is XmlElement => c.type === "element");
      node.entries.forEach((child, k) => {
        if (child.kind === "task" && child.name) add(child.name, child, standalone(children[k]));
        else if (child.kind !== "element")
          warnings.push({ ...at(file, child), message: `unnamed <${child.kind}> in <library> is not registered: give it a name` });
      });
      return;
    }
    if (!isExecutableNode(node)) return;
    const name = node.kind === "task" && node.name ? node.name : undefined;
    if (name !== undefined) return add(name, node, source);
    if (unnamed === undefined) {
      unnamed = node;
      return add(baseName(file), node, source);
    }
    errors.push({
      ...at(file, node),
      message: `a second unnamed <${node.kind}>: the name '${baseName(file)}' is taken by the one at line ${unnamed.loc.line}; give this one a name attribute`,
    });
  });
  if (templates.length === 0 && errors.length === 0) {
    const first = document.nodes[0];
    errors.push({ ...(first ? at(file, first) : { file }), message: "defines no task or template to register" });
  }
  return { templates, errors, warnings };
}

function entryOf(file: string, name: string, node: ExecutableNode, xml: string, templates: readonly TemplateNode[]): LibraryTemplate {
  const document: TemplateDocument = { templates, nodes: [node], entry: node };
  const base = { name, file, xml, document };
  if (node.kind !== "task") return { ...base, type: node.kind, description: "" };
  const description = (node.description ?? "").trim();
  const criteria = node.criteria === undefined ? "" : typeof node.criteria === "string" ? node.criteria.trim() : node.criteria.join(" ");
  const withCriteria = criteria === "" ? { ...base, description } : { ...base, description, criteria };
  return node.subtype ? { ...withCriteria, type: node.type, subtype: node.subtype } : { ...withCriteria, type: node.type };
}

function isExecutableNode(node: TopLevelNode): node is ExecutableNode {
  return node.kind === "task" || node.kind === "call" || node.kind === "cond";
}

function at(file: string, node: { readonly loc: { readonly line: number; readonly col: number } }): LibraryError {
  return { file, line: node.loc.line, col: node.loc.col, message: "" };
}

/** Top-level elements split the way the parser splits them: definitions (→ `templates`) and the rest (→ `nodes`). */
function topLevelElements(xml: string): { definitions: XmlElement[]; others: XmlElement[] } {
  const definitions: XmlElement[] = [];
  const others: XmlElement[] = [];
  for (const root of readXml(xml).roots) {
    if (root.type !== "element") continue;
    (root.name === "template" || isFunctionStyleTask(root) ? definitions : others).push(root);
  }
  return { definitions, others };
}

/** The body element of a `<template>`: its first task, call or cond. */
function bodyElement(el: XmlElement | undefined): XmlElement | undefined {
  return el?.children.find((c): c is XmlElement => c.type === "element" && isExecutable(c.name));
}
