/**
 * The template library as the tools of `dirigent mcp` and the skills of `dirigent a2a`: each template's name, its
 * description and a JSON Schema of its inputs (a function template's declared parameters, else the `{{var}}` placeholders
 * of its XML), and the XML that runs it.
 */
import type { LibraryTemplate, TemplateLibrary } from "../../actors/library/library.js";
import { templateToolDefinition } from "../../actors/handler/template-tools.js";
import { isPath } from "../../machines/language/env.js";
import type { TemplateToolParam } from "../../protocol/index.js";

/** A library template offered to another protocol's clients. */
export interface LibraryTool {
  /** The template's name, as a tool or skill name (`[A-Za-z0-9_-]`, at most 64 characters). */
  name: string;
  /** What it does: the template's description (placeholders unsubstituted), or its name. */
  description: string;
  /** The template's type and subtype, as written (`atomic:evaluator`). */
  kind: string;
  /** JSON Schema of the inputs: an object with a property per input. */
  inputSchema: { [key: string]: unknown; type: "object" };
  /** The inputs, in order. */
  params: TemplateToolParam[];
  /** The XML submitted to run it, with the inputs as the task's inputs. */
  xml: string;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;
/** The name the runtime binds itself (a sequence's earlier results), never asked of a caller. */
const BOUND_BY_RUNTIME = "step_results";

/** The `{{var}}` inputs a template's XML reads: the first name of each placeholder path, once each, in order. */
export function placeholderInputs(xml: string): string[] {
  const names: string[] = [];
  for (const match of xml.matchAll(PLACEHOLDER)) {
    const path = (match[1] ?? "").trim();
    if (!isPath(path)) continue;
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(path)?.[0];
    if (name && name !== BOUND_BY_RUNTIME && !names.includes(name)) names.push(name);
  }
  return names;
}

function paramsOf(template: LibraryTemplate): TemplateToolParam[] {
  const fn = template.document.templates.find((t) => t.name === template.name);
  if (fn && fn.paramSpecs.length > 0)
    return fn.paramSpecs.map((spec) => ({
      name: spec.name,
      ...(spec.type ? { type: spec.type } : {}),
      required: spec.required !== false && spec.default === undefined,
      ...(spec.description ? { description: spec.description.trim().slice(0, 4_000) } : {}),
    }));
  return placeholderInputs(template.xml).map((name) => ({
    name,
    type: "string",
    required: true,
    description: `the value of {{${name}}}`,
  }));
}

/** The library's templates as tools, in load order; templates whose names are no valid tool names are left out. */
export function libraryTools(library: TemplateLibrary): LibraryTool[] {
  return library.templates
    .filter((t) => TOOL_NAME.test(t.name))
    .map((template) => {
      const params = paramsOf(template);
      const description = template.description.replace(/\s+/g, " ").trim().slice(0, 2_000) || `the library template '${template.name}'`;
      const definition = templateToolDefinition({ name: template.name, description, params });
      return {
        name: template.name,
        description,
        kind: template.subtype ? `${template.type}:${template.subtype}` : template.type,
        inputSchema: { ...definition.function.parameters, type: "object" },
        params,
        xml: template.xml,
      };
    });
}
