/**
 * Comma-separated lists of the configuration (`runtime/config.ts`, `DIRIGENT_PROVIDERS` in runtime/model/providers.ts):
 * one helper, in a module of its own so that both can use it without importing each other.
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
