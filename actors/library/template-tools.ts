/**
 * The function templates of the library offered to sessions as tools (`DIRIGENT_TEMPLATE_TOOLS`): each named template's
 * parameters and description as a {@link TemplateTool} the Handler turns into a tool definition. A call of one comes
 * back as a `subtask_request` naming the template (the Evaluator's `bindTemplateInputs` applies its defaults and types).
 */
import type { TemplateTool } from "../../protocol/index.js";
import type { TemplateLibrary } from "./library.js";

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The tools of library templates `names`.
 * @throws {TypeError} naming every name that is no function template of the library or no valid tool name.
 */
export function templateToolsOf(library: TemplateLibrary, names: readonly string[]): TemplateTool[] {
  const problems: string[] = [];
  const tools: TemplateTool[] = [];
  for (const name of new Set(names)) {
    const entry = library.get(name);
    const template = entry?.document.templates.find((t) => t.name === name);
    if (!entry) problems.push(`'${name}' is not a template of the library`);
    else if (!template)
      problems.push(`'${name}' (${entry.file}) is a ${entry.type} task, not a function template (<template name params>)`);
    else if (!TOOL_NAME.test(name)) problems.push(`'${name}' is no valid tool name (${TOOL_NAME.source})`);
    if (!entry || !template || !TOOL_NAME.test(name)) continue;
    const body = template.body.kind === "task" ? (template.body.description ?? "").trim() : "";
    tools.push({
      name,
      description:
        `Runs the library template '${name}' as a subtask and answers with its result.${body ? ` The template's task: ${body}` : ""}`.slice(
          0,
          8_000,
        ),
      params: template.paramSpecs.map((spec) => ({
        name: spec.name,
        ...(spec.type ? { type: spec.type } : {}),
        required: spec.required !== false && spec.default === undefined,
        ...(spec.description ? { description: spec.description.trim().slice(0, 4_000) } : {}),
      })),
    });
  }
  if (problems.length > 0) throw new TypeError(`DIRIGENT_TEMPLATE_TOOLS: ${problems.join("; ")}`);
  return tools;
}
