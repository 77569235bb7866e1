/**
 * The one failure mode of template parsing, thrown inside the parser and turned into a
 * `TemplateError` result by `parseTemplate` (callers never see the exception).
 */
import type { SourceLocation, TemplateError } from "./ast.js";

/** A template that is not XML, not well-formed, or semantically invalid. */
export class InvalidTemplateError extends Error {
  override name = "InvalidTemplateError";
  constructor(
    message: string,
    /** Where the problem is (1-based). */
    readonly loc: SourceLocation,
    /** The element concerned, for semantic errors. */
    readonly element?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  /** The wire/result shape of this error. */
  toTemplateError(): TemplateError {
    const base = { code: "INVALID_TEMPLATE", message: this.message, line: this.loc.line, col: this.loc.col } as const;
    return this.element === undefined ? base : { ...base, element: this.element };
  }
}
