/**
 * Tool sources: where the tools of a Handler come from. A source (the built-in tools, an MCP server, the TypeScript
 * tools of `startSystem({ tools })`, later NATS services and library templates) yields {@link ToolSpec}s; the
 * Handler's toolset is their composition ({@link composeTools}): names are checked against the chat-completions
 * rules and against each other at start (a collision is a clear error, never a silent shadowing; a NATS service's
 * clashing tool is left out instead), sizes against their caps, and every call
 * gets the same treatment whatever its source: arguments parsed, a timeout, a result size cap (cut with a note), the
 * process's secrets masked, a thrown error turned into error text for the model.
 */
import type { ToolSourceKind } from "../../protocol/index.js";
import type { ToolCall } from "../../machines/handler/session.js";
import type { ToolAnswer, ToolDefinition, ToolInfo } from "../../actors/handler/toolset.js";
import { CONTINUATION_TOOL_NAMES } from "../../actors/handler/continuation.js";
import { maskDeep, type Masker } from "../../actors/secrets.js";
import { messageOf } from "../../protocol/errors.js";

export type { ToolSourceKind };

/** The name rule of chat-completions function names. */
export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/** Default time one tool call may take before it is answered with a timeout error. */
export const DEFAULT_TOOL_TIMEOUT_MS = 60_000;
/** Default cap of one tool result, in bytes of UTF-8; a longer one is cut with a note. */
export const DEFAULT_TOOL_RESULT_MAX_BYTES = 65_536;
/** Default cap of the description of a tool that is not built in, in bytes of UTF-8; a longer one leaves the tool out. */
export const DEFAULT_TOOL_DESCRIPTION_MAX_BYTES = 4096;
/** Default cap of the JSON Schema of a tool's arguments (not built in), in bytes of its JSON; a larger one leaves the tool out. */
export const DEFAULT_TOOL_SCHEMA_MAX_BYTES = 16_384;

/** The outcome of checking a call's arguments: a call ready to run, or what is wrong with them. */
export type Prepared = { ok: true; run: (signal: AbortSignal) => Promise<string> } | { ok: false; problems: string };

/** One tool as a source offers it. */
export interface ToolSpec {
  /** The name the model calls it by (checked against {@link TOOL_NAME_PATTERN}). */
  name: string;
  source: ToolSourceKind;
  /** Which source of its kind: the MCP server's name, … (shown by `dirigent tools list`). */
  origin?: string;
  description: string;
  /** JSON Schema of the arguments (an object schema). */
  parameters: Record<string, unknown>;
  /** A repeat with the same arguments does no harm (see {@link ToolInfo}). */
  idempotent: boolean;
  /** Longest a call may take; {@link ComposeOptions.timeoutMs} when absent. */
  timeoutMs?: number;
  /** Largest result; {@link ComposeOptions.maxResultBytes} when absent. */
  maxResultBytes?: number;
  /** Checks the parsed arguments. */
  prepare(args: unknown): Prepared;
}

/** A source of tools, started: its tools are known. */
export interface ToolSource {
  kind: ToolSourceKind;
  /** The source's name in messages (`builtin`, `mcp server 'fs'`, …). */
  name: string;
  tools: readonly ToolSpec[];
  /** Secret values of its configuration (tokens taken from the environment): masked in every answer. */
  secrets?: readonly string[];
  /** Stops what the source holds (server processes, connections). */
  close(): Promise<void>;
  /**
   * A source whose tools change while it runs (NATS services found again) calls `changed` after its `tools` did.
   * Its tool whose name collides with another source's or is unusable is left out (logged), not an error, at start
   * as later: such a source must not stop a Handler.
   */
  watch?(changed: () => void): void;
}

/** Options of {@link composeTools}. */
export interface ComposeOptions {
  /** Default per-call timeout. */
  timeoutMs?: number;
  /** Default result cap in bytes. */
  maxResultBytes?: number;
  /** Largest description of a tool that is not built in, in bytes of UTF-8; {@link DEFAULT_TOOL_DESCRIPTION_MAX_BYTES} by default. */
  maxDescriptionBytes?: number;
  /** Largest JSON Schema of a tool's arguments (not built in), in bytes of its JSON; {@link DEFAULT_TOOL_SCHEMA_MAX_BYTES} by default. */
  maxSchemaBytes?: number;
  /** Masks secret values in every answer, and in the descriptions and schemas offered. */
  mask?: Masker;
  /** Told what was left out: a tool past a size cap, or a changing source's tool whose name is taken or unusable. */
  onProblem?: (message: string) => void;
}
/** The composed tools of a Handler. */
export interface ComposedTools {
  /** The current definitions: a new array after a source's tools changed, the same one until then. */
  readonly definitions: ToolDefinition[];
  readonly specs: ReadonlyMap<string, ToolSpec>;
  run(call: ToolCall, signal: AbortSignal): Promise<ToolAnswer>;
  info(name: string): ToolInfo | undefined;
  close(): Promise<void>;
}

/** A tool source's configuration or tools are unusable: the Handler does not start. */
export class ToolSourceError extends Error {
  override name = "ToolSourceError";
}

/**
 * Composes sources into one set of tools. The sources that do not change come first, so a name one of them has is
 * theirs; a changing source's tool (a NATS service's: any client allowed to offer services may offer one) whose name
 * is taken or unusable is left out and told to `onProblem`, at start as later, and never stops a Handler. A tool
 * that is not built in whose description or schema is past its cap is left out and told too.
 * @throws {ToolSourceError} when a name of a source that does not change breaks the chat-completions rules, is a
 * continuation tool's, or is taken twice.
 */
export function composeTools(sources: readonly ToolSource[], options: ComposeOptions = {}): ComposedTools {
  const ordered = [...sources.filter((s) => !s.watch), ...sources.filter((s) => s.watch)];
  const maxDescriptionBytes = options.maxDescriptionBytes ?? DEFAULT_TOOL_DESCRIPTION_MAX_BYTES;
  const maxSchemaBytes = options.maxSchemaBytes ?? DEFAULT_TOOL_SCHEMA_MAX_BYTES;
  const compose = () => {
    const composed = new Map<string, { spec: ToolSpec; from: string }>();
    const fatal: string[] = [];
    const leftOut: string[] = [];
    for (const source of ordered) {
      const problems = source.watch ? leftOut : fatal;
      for (const spec of source.tools) {
        const taken = composed.get(spec.name);
        const oversized = spec.source === "builtin" ? undefined : oversize(spec, maxDescriptionBytes, maxSchemaBytes);
        if (!TOOL_NAME_PATTERN.test(spec.name))
          problems.push(`${source.name}: tool name '${spec.name}' does not match ${TOOL_NAME_PATTERN.source}`);
        else if (CONTINUATION_TOOL_NAMES.includes(spec.name))
          problems.push(`${source.name}: tool name '${spec.name}' is a continuation tool's`);
        else if (taken)
          problems.push(
            `tool name '${spec.name}' is offered by both ${taken.from} and ${source.name}; rename one (an MCP server's tools are named SERVER__TOOL)`,
          );
        else if (oversized) leftOut.push(`${source.name}: tool '${spec.name}': ${oversized}`);
        else composed.set(spec.name, { spec, from: source.name });
      }
    }
    return { composed, fatal, leftOut };
  };
  const tell = (leftOut: readonly string[]) => {
    for (const problem of leftOut) options.onProblem?.(`tool left out: ${problem}`);
  };
  const first = compose();
  if (first.fatal.length > 0) throw new ToolSourceError(`tools: ${first.fatal.join("; ")}`);
  tell(first.leftOut);
  let specs = first.composed;
  const mask = options.mask ?? ((text: string) => text);
  // What a source offers is masked like what its tools answer: a description may quote a secret it found.
  const definitionsOf = () =>
    [...specs.values()].map(
      ({ spec }): ToolDefinition => ({
        type: "function",
        function: { name: spec.name, description: mask(spec.description), parameters: maskDeep(spec.parameters, mask) },
      }),
    );
  let definitions = definitionsOf();
  const changed = () => {
    const again = compose();
    tell([...again.fatal, ...again.leftOut]);
    specs = again.composed;
    definitions = definitionsOf();
  };
  for (const source of sources) source.watch?.(changed);
  const available = () => [...specs.keys()].join(", ") || "none";
  return {
    get definitions() {
      return definitions;
    },
    get specs() {
      return new Map([...specs].map(([name, { spec }]) => [name, spec]));
    },
    info(name) {
      const found = specs.get(name)?.spec;
      return found ? { source: found.source, idempotent: found.idempotent } : undefined;
    },
    async run(call, signal) {
      const name = call.function.name;
      const spec = specs.get(name)?.spec;
      if (!spec) return { malformed: true, content: `error: no tool named '${name}'; available: ${available()}` };
      let raw: unknown;
      try {
        raw = call.function.arguments.trim() === "" ? {} : JSON.parse(call.function.arguments);
      } catch (err) {
        return { malformed: true, content: `error: the arguments of '${name}' are not valid JSON (${messageOf(err)}); send a JSON object` };
      }
      const prepared = spec.prepare(raw);
      if (!prepared.ok) return { malformed: true, content: `error: invalid arguments for '${name}': ${prepared.problems}` };
      const timeoutMs = spec.timeoutMs ?? options.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
      try {
        const text = await withTimeout(prepared.run, signal, timeoutMs, name);
        // Masked before the cut: a cut must not leave the start of a secret unmasked.
        return {
          malformed: false,
          content: capResult(mask(text), spec.maxResultBytes ?? options.maxResultBytes ?? DEFAULT_TOOL_RESULT_MAX_BYTES),
        };
      } catch (err) {
        if (signal.aborted) throw err;
        const message = err instanceof ToolTimeout || isToolError(err) ? (err as Error).message : `${name} failed: ${messageOf(err)}`;
        return { malformed: false, content: mask(`error: ${message}`) };
      }
    },
    async close() {
      await Promise.allSettled(sources.map((s) => s.close()));
    },
  };
}

/** Why a tool is too large to offer (every session pays for its definition in context), or undefined. */
function oversize(spec: ToolSpec, maxDescriptionBytes: number, maxSchemaBytes: number): string | undefined {
  const description = Buffer.byteLength(spec.description, "utf8");
  if (description > maxDescriptionBytes)
    return `its description is ${description} bytes, more than ${maxDescriptionBytes} (DIRIGENT_TOOL_DESCRIPTION_MAX_BYTES)`;
  const schema = Buffer.byteLength(JSON.stringify(spec.parameters), "utf8");
  if (schema > maxSchemaBytes) return `its schema is ${schema} bytes, more than ${maxSchemaBytes} (DIRIGENT_TOOL_SCHEMA_MAX_BYTES)`;
  return undefined;
}

/** A tool call did not answer in time. */
class ToolTimeout extends Error {}

/** An error whose message is meant for the model as it is (the built-ins' `ToolError`). */
const isToolError = (err: unknown) => err instanceof Error && err.name === "ToolError";

/**
 * Runs a call with its own abort signal, aborted by the session's signal or at `timeoutMs`; a tool that ignores its
 * signal is answered at the timeout all the same (its run is left behind).
 */
function withTimeout(run: (signal: AbortSignal) => Promise<string>, outer: AbortSignal, timeoutMs: number, name: string): Promise<string> {
  if (outer.aborted) return Promise.reject(outer.reason);
  const controller = new AbortController();
  return new Promise<string>((resolve, reject) => {
    const onAbort = () => {
      controller.abort(outer.reason);
      settle(() => reject(outer.reason));
    };
    const timer = setTimeout(() => {
      const err = new ToolTimeout(
        `'${name}' did not answer within ${timeoutMs} ms (its timeout); it was stopped. Try again differently or go on without it`,
      );
      controller.abort(err);
      settle(() => reject(err));
    }, timeoutMs);
    let settled = false;
    const settle = (then: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outer.removeEventListener("abort", onAbort);
      then();
    };
    outer.addEventListener("abort", onAbort, { once: true });
    run(controller.signal).then(
      (text) => settle(() => resolve(text)),
      (err: unknown) => settle(() => reject(err)),
    );
  });
}

/** `text` cut to `maxBytes` of UTF-8 (at a character boundary), with a note saying so. */
export function capResult(text: string, maxBytes: number): string {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= maxBytes) return text;
  let kept = Buffer.from(text, "utf8").subarray(0, maxBytes).toString("utf8");
  if (kept.endsWith("\uFFFD")) kept = kept.slice(0, -1);
  return `${kept}\n[cut: the result was ${bytes} bytes; only the first ${maxBytes} are shown]`;
}
