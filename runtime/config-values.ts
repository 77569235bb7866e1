/**
 * How a configuration value written as a string (an environment variable, a flag) becomes a value: lists, JSON and
 * booleans, for `runtime/config.ts` and `DIRIGENT_PROVIDERS` (runtime/model/providers.ts), in a module of its own so
 * that both can use it without importing each other.
 */
import { z } from "zod";

/** A comma-separated list in the environment (blank items dropped), or an array, of `item`s. */
export const list = <T extends z.ZodType>(item: T) =>
  z.preprocess(
    (v) =>
      typeof v === "string"
        ? v
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "")
        : v,
    z.array(item),
  );

/** A JSON object in the environment, or an object. */
export const json = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v, ctx) => {
    if (typeof v !== "string") return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      ctx.addIssue({ code: "custom", message: "must be JSON" });
      return z.NEVER;
    }
  }, schema);

const BOOLEANS: Record<string, boolean> = { "1": true, true: true, yes: true, on: true, "0": false, false: false, no: false, off: false };

/** A boolean: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off` in the environment (any case), or a boolean. */
export const bool = z.preprocess((v) => (typeof v === "string" ? (BOOLEANS[v.toLowerCase()] ?? v) : v), z.boolean());
