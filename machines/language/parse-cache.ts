/**
 * Parsed templates kept by their text: the same template arrives again and again (a template run with other inputs,
 * the Director's validation and then the Evaluator's walk of one submission), and parsing it is a large part of a
 * trivial task's CPU. Documents are shared read-only (frozen), as library templates are. Only small, valid
 * templates are kept.
 */
import type { ParseOutcome } from "./ast.js";
import { parseTemplate } from "./parse.js";

/** Templates kept at most; the oldest is dropped first. */
const MAX_ENTRIES = 64;
/** Longest template text kept (characters). */
const MAX_TEXT = 16 * 1024;

/** Freezes a parsed template all the way down: a walk that tried to change a shared document would throw. */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Templates parsed before, by their text; one per system (runtime/system.ts), shared by the roles that parse. */
export interface ParseCache {
  /** {@link parseTemplate}, answered from the templates parsed last when the same text was parsed before. */
  parse(xml: string): ParseOutcome;
}

/** A new, empty {@link ParseCache}: at most 64 valid templates of up to 16 KiB each, the oldest dropped first. */
export function createParseCache(): ParseCache {
  const kept = new Map<string, ParseOutcome>();
  return {
    parse(xml) {
      const hit = kept.get(xml);
      if (hit !== undefined) return hit;
      const outcome = parseTemplate(xml);
      if (outcome.ok && typeof xml === "string" && xml.length <= MAX_TEXT) {
        if (kept.size >= MAX_ENTRIES) kept.delete(kept.keys().next().value as string);
        kept.set(xml, deepFreeze(outcome));
      }
      return outcome;
    },
  };
}
