/**
 * TypeScript tools: functions of the process that embeds dirigent, offered to the model like the built-ins.
 * `startSystem({ tools: [defineTool({ name, description, parameters, run })] })`; the zod schema of the arguments
 * gives both the JSON Schema the model sees and the check of what it sends.
 */
import { z } from "zod";
import type { ToolSource, ToolSpec } from "./source.js";
import { messageOf } from "../../protocol/errors.js";

/** What a TypeScript tool's `run` gets besides its arguments. */
export interface ToolRunContext {
  /** Aborted when the call times out or its task is cancelled: stop the work. */
  signal: AbortSignal;
}

/** A TypeScript tool, as {@link defineTool} makes it. */
export interface TypeScriptTool {
  readonly kind: "ts";
  readonly spec: ToolSpec;
}

/** The declaration of a TypeScript tool. */
export interface ToolDeclaration<S extends z.ZodType> {
  /** Name the model calls it by: `^[a-zA-Z0-9_-]{1,64}$`, unique among the Handler's tools. */
  name: string;
  description: string;
  /** The arguments, as a zod object schema. */
  parameters: S;
  /** Does the work; a string is the answer as it is, any other value is sent as JSON. A throw is an error answer. */
  run(args: z.infer<S>, context: ToolRunContext): unknown;
  /** A repeat with the same arguments does no harm: a call in flight in a Handler that stopped is run again. Default false. */
  idempotent?: boolean;
  /** Longest a call may take (ms); the Handler's default (DIRIGENT_TOOL_TIMEOUT_MS, 60 s) when absent. */
  timeoutMs?: number;
  /** Largest answer in bytes; the Handler's default (DIRIGENT_TOOL_RESULT_MAX_BYTES) when absent. */
  maxResultBytes?: number;
}

/**
 * Declares a TypeScript tool.
 * @throws {TypeError} when the parameters are not a zod object schema or convert to no JSON Schema.
 */
export function defineTool<S extends z.ZodType>(declaration: ToolDeclaration<S>): TypeScriptTool {
  const { name, description, parameters: schema, run } = declaration;
  if (!(schema instanceof z.ZodObject))
    throw new TypeError(`defineTool '${name}': parameters must be a zod object schema (z.object({...}))`);
  let parameters: Record<string, unknown>;
  try {
    const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { io: "input" });
    parameters = json;
  } catch (err) {
    throw new TypeError(`defineTool '${name}': its parameters have no JSON Schema (${messageOf(err)})`);
  }
  return {
    kind: "ts",
    spec: {
      name,
      source: "ts",
      description,
      parameters,
      idempotent: declaration.idempotent ?? false,
      ...(declaration.timeoutMs === undefined ? {} : { timeoutMs: declaration.timeoutMs }),
      ...(declaration.maxResultBytes === undefined ? {} : { maxResultBytes: declaration.maxResultBytes }),
      prepare(raw) {
        const parsed = schema.safeParse(raw);
        if (!parsed.success)
          return { ok: false, problems: parsed.error.issues.map((i) => `${i.path.join(".") || "(arguments)"}: ${i.message}`).join("; ") };
        return {
          ok: true,
          run: async (signal) => {
            const value: unknown = await run(parsed.data, { signal });
            return typeof value === "string" ? value : (JSON.stringify(value) ?? "");
          },
        };
      },
    },
  };
}

/** The TypeScript tools as one source. */
export function typeScriptSource(tools: readonly TypeScriptTool[]): ToolSource {
  return { kind: "ts", name: "the TypeScript tools (startSystem tools)", tools: tools.map((t) => t.spec), close: async () => {} };
}
