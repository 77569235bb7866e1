/**
 * The settings of a Handler session: the Handler's own ({@link HandlerConfig}, fixed for the life of every session it
 * starts, and the system prompt built from it) and what a task sets of its own session
 * (docs/tools.md#which-tools-a-task-gets): the tools it is offered (`<tools>`, else the Handler's default
 * `DIRIGENT_TOOLS`), and the models tried when the first is unavailable (`<model fallback>`). Turn limit, temperature
 * and output limit are applied where the session starts.
 */
import { selectTools, type ContinuationKind, type ExecuteRequest, type SessionSettings, type TemplateTool } from "../../protocol/index.js";
import { templateToolDefinition } from "./template-tools.js";
import { continuationTools } from "./continuation.js";
import type { ToolDefinition, Toolset } from "./toolset.js";
import type { SessionDefaults } from "../../machines/handler/session-input.js";

/** Handler configuration, immutable for the life of every session it starts. */
export interface HandlerConfig extends SessionDefaults {
  /**
   * Whether this Handler offers the tools of NATS services (`DIRIGENT_NATS_TOOLS`); when off, a task naming a tool it
   * lacks is told that a NATS service's tool needs it on.
   */
  natsTools?: "on" | "off";
  /** Sessions run at once in this process. */
  concurrency: number;
  /**
   * The tools (names and globs) offered to a session whose task names none (`DIRIGENT_TOOLS`); default: every tool
   * of the toolset. A task's `<tools>` chooses among all of the toolset's tools.
   */
  defaultTools?: readonly string[];
  /**
   * Stream completions and publish each piece of assistant text as a `model.delta` event. A request's own
   * `stream` field wins. Default false.
   */
  streamDeltas?: boolean;
  /**
   * Secret values the process knows (API key, NATS password, …): masked as `[redacted]` in every reply before it
   * leaves the Handler (results, program outputs), besides the toolset's own masking of tool answers.
   */
  secrets?: readonly string[];
}

/** The settings a request runs under: its own, or for a resume those of the session it resumes. */
export function settingsOf(request: ExecuteRequest): SessionSettings {
  if (request.resume) return request.resume.session.settings ?? {};
  const { tools, maxTurns, temperature, maxOutputTokens, fallbackModels, provider } = request;
  return {
    ...(tools === undefined ? {} : { tools }),
    ...(maxTurns === undefined ? {} : { maxTurns }),
    ...(temperature === undefined ? {} : { temperature }),
    ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }),
    ...(fallbackModels === undefined ? {} : { fallbackModels }),
    ...(provider === undefined ? {} : { provider }),
  };
}

/** The tools of one session: what the model is offered, and which of the toolset's tools it may call. */
export interface SessionTools {
  definitions: readonly ToolDefinition[];
  /** The toolset's tools offered; absent: all of them. */
  offered?: ReadonlySet<string>;
}

/** Chooses the tools of sessions; `missing`: the task named tools (or globs) this Handler does not have. */
export type ChooseTools = (
  patterns: readonly string[] | undefined,
  kinds: readonly ContinuationKind[],
  templateTools?: readonly TemplateTool[],
) => SessionTools | { missing: string[] };

/** Distinct tool sets kept: one array per set, so the token count of each is kept too (the counter keys on it). */
const KEPT = 64;

/**
 * The tool choice of a Handler whose tools are `toolset`'s; `defaults` is the selection of a task that names none
 * (`DIRIGENT_TOOLS`; absent: every tool). A default entry no tool matches is left out (`unmatched` hears of it); a
 * task's is missing. A NATS service's tool is offered only where a list names it exactly: any client allowed to
 * offer services may offer one, so neither a glob nor "every tool" brings it into a session.
 */
export function toolChoice(
  toolset: Toolset,
  defaults: readonly string[] | undefined,
  unmatched?: (patterns: string[]) => void,
): ChooseTools {
  // The toolset's tools may change (NATS services found again): names, sets and the default selection follow.
  let seen: readonly ToolDefinition[] | undefined;
  let names: string[] = [];
  let byName = new Map<string, ToolDefinition>();
  /** The tools selected by their exact name only, and what a task without a list and without defaults gets. */
  let exactOnly: ReadonlySet<string> = new Set();
  let everyTool: readonly ToolDefinition[] = [];
  const kept = new Map<string, SessionTools>();
  let fallback: readonly string[] | undefined;
  let warned = false;
  const refresh = () => {
    if (toolset.definitions === seen) return;
    seen = toolset.definitions;
    names = seen.map((d) => d.function.name);
    byName = new Map(seen.map((d) => [d.function.name, d]));
    exactOnly = new Set(names.filter((name) => toolset.info?.(name)?.source === "nats"));
    everyTool = exactOnly.size === 0 ? seen : seen.filter((d) => !exactOnly.has(d.function.name));
    kept.clear();
    const selection = defaults === undefined ? undefined : selectTools(defaults, names, exactOnly);
    if (selection && selection.missing.length > 0 && !warned) {
      warned = true;
      unmatched?.(selection.missing);
    }
    fallback = selection?.selected;
  };
  const choose = (
    selected: readonly string[] | undefined,
    kinds: readonly ContinuationKind[],
    templateTools: readonly TemplateTool[],
  ): SessionTools => {
    const key = `${selected?.join(",") ?? "*"}|${kinds.join(",")}${templateTools.length === 0 ? "" : `|${JSON.stringify(templateTools)}`}`;
    const known = kept.get(key);
    if (known) return known;
    const direct = selected === undefined ? everyTool : selected.flatMap((n) => byName.get(n) ?? []);
    const made: SessionTools = {
      definitions:
        kinds.length === 0 && templateTools.length === 0
          ? direct
          : [...direct, ...continuationTools(kinds), ...templateTools.map(templateToolDefinition)],
      ...(selected === undefined && exactOnly.size === 0 ? {} : { offered: new Set(direct.map((d) => d.function.name)) }),
    };
    if (kept.size >= KEPT) kept.clear();
    kept.set(key, made);
    return made;
  };
  refresh();
  return (patterns, kinds, templateTools = []) => {
    refresh();
    if (patterns === undefined) return choose(fallback, kinds, templateTools);
    const { selected, missing } = selectTools(patterns, names, exactOnly);
    return missing.length > 0 ? { missing } : choose(selected, kinds, templateTools);
  };
}

/** The message of a task refused because it names tools this Handler does not have. */
export function missingToolsMessage(missing: readonly string[], toolset: Toolset, natsTools: "on" | "off" = "on"): string {
  const names = toolset.definitions.map((d) => d.function.name);
  const has = names.length === 0 ? "none" : names.length > 30 ? `${names.slice(0, 30).join(", ")}, …` : names.join(", ");
  const which = missing.map((m) => `'${m}'`).join(", ");
  const nats = names.some((n) => toolset.info?.(n)?.source === "nats") ? "; a NATS service's tool is selected by its exact name only" : "";
  const off = natsTools === "off" ? "; if it is a tool of a NATS service, this Handler offers those only with DIRIGENT_NATS_TOOLS=on" : "";
  return `the task's <tools> names ${missing.length === 1 ? "a tool" : "tools"} this Handler does not have: ${which} (its tools: ${has}${nats})${off}`;
}
