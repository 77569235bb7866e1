/**
 * Entry point of the template parser: XML text → typed AST ({@link TemplateDocument}) or a located
 * `INVALID_TEMPLATE` error. Well-formedness comes from fast-xml-parser (`./xml.ts`); the language
 * rules (aliases, enum checks, defaults: docs/design.md) live in the builders (`./nodes.ts`, `./task-elements.ts`).
 */
import type { ExecutableNode, FragmentPiece, ParseOutcome, TemplateNode, TemplateWarning, TopLevelNode } from "./ast.js";
import { InvalidTemplateError } from "./errors.js";
import {
  buildCall,
  buildCond,
  buildFunction,
  buildLibrary,
  buildStep,
  buildTask,
  buildTaskTemplate,
  buildTemplate,
  isFunctionStyleTask,
} from "./nodes.js";
import {
  checkContext,
  contextManagement,
  filePaths,
  inputBinding,
  inputList,
  modelSpec,
  outputFormat,
  scriptExecution,
  scriptSpec,
  terminationCondition,
} from "./task-elements.js";
import { type BuildContext, clip, fail, prose, unsupported } from "./values.js";
import { type XmlElement, readXml } from "./xml.js";

const TEXT_FRAGMENTS = new Set(["description", "instructions", "system", "criteria", "provider", "expected_output"]);

/**
 * Parse a task template (one or more top-level elements, comments allowed).
 *
 * Never throws for bad input: text that is not XML, not well-formed, larger than 1 MiB, or
 * semantically invalid yields `{ ok: false, error: { code: "INVALID_TEMPLATE", message, line, col } }`.
 * Constructs the runtime does not support parse, with warnings.
 *
 * @example
 * const outcome = parseTemplate('<task><description>Hi {{name}}</description></task>');
 * if (outcome.ok && outcome.document.entry?.kind === "task") console.log(outcome.document.entry.description);
 */
export function parseTemplate(xml: string): ParseOutcome {
  const warnings: TemplateWarning[] = [];
  try {
    if (typeof xml !== "string") throw new InvalidTemplateError("template must be a string", { line: 1, col: 1 });
    const { source, roots } = readXml(xml);
    const ctx: BuildContext = {
      source,
      warn: (kind, message, loc) => warnings.push({ kind, message, line: loc.line, col: loc.col }),
      step: (el) => buildStep(ctx, el),
    };
    for (const root of roots) {
      if (root.type === "text" && root.text.trim() !== "") {
        const at = source.locate(source.firstContent(root.at));
        throw new InvalidTemplateError(`not XML: expected an element, found text '${clip(root.text.trim())}'`, at);
      }
    }
    const elements = roots.filter((root): root is XmlElement => root.type === "element");
    if (elements.length === 0) {
      throw new InvalidTemplateError("empty template: no element found", source.locate(source.firstContent(0)));
    }

    const templates: TemplateNode[] = [];
    const nodes: TopLevelNode[] = [];
    let entry: ExecutableNode | undefined;
    for (const el of elements) {
      if (el.name === "template") templates.push(buildTemplate(ctx, el));
      else if (isFunctionStyleTask(el)) templates.push(buildTaskTemplate(ctx, el));
      else {
        const node = topLevel(ctx, el);
        nodes.push(node);
        if (entry === undefined && (node.kind === "task" || node.kind === "call" || node.kind === "cond")) entry = node;
      }
    }
    const document = entry === undefined ? { templates, nodes } : { templates, nodes, entry };
    return { ok: true, document, warnings };
  } catch (error) {
    if (error instanceof InvalidTemplateError) return { ok: false, error: error.toTemplateError() };
    throw error;
  }
}

function topLevel(ctx: BuildContext, el: XmlElement): TopLevelNode {
  switch (el.name) {
    case "task":
      return buildTask(ctx, el);
    case "call":
      return buildCall(ctx, el);
    case "cond":
      return buildCond(ctx, el);
    case "library":
      return buildLibrary(ctx, el);
    case "function":
      return buildFunction(ctx, el);
    case "arg":
      return fail(el, "<arg> is allowed only inside <call>");
    default: {
      const piece = fragment(ctx, el);
      return piece === undefined ? unsupported(ctx, el, "template") : { kind: "fragment", loc: el.loc, piece };
    }
  }
}

function fragment(ctx: BuildContext, el: XmlElement): FragmentPiece | undefined {
  if (TEXT_FRAGMENTS.has(el.name)) return { kind: "text", loc: el.loc, element: el.name, text: prose(ctx, el) };
  switch (el.name) {
    case "context_management": {
      const cm = contextManagement(ctx, el);
      checkContext(ctx, cm, false);
      return cm;
    }
    case "file_paths":
      return filePaths(ctx, el);
    case "output_format":
      return outputFormat(ctx, el);
    case "script_execution":
      return scriptExecution(ctx, el);
    case "execution":
      return scriptSpec(ctx, el);
    case "input":
      return inputBinding(ctx, el);
    case "inputs": {
      const list = inputList(ctx, el);
      return { kind: "inputs", loc: el.loc, inputs: list.inputs, extra: list.extra };
    }
    case "termination_condition":
      return terminationCondition(ctx, el);
    case "model":
      return modelSpec(el);
    default:
      return undefined;
  }
}
