/**
 * Secrets masked in every field of a span before it is exported: its name, attributes, status message, events (an
 * exception's message and stack among them) and links. Whatever put a secret into a span (an error quoting a URL
 * with a password, a server echoing a request's `Authorization` header), the trace backend gets `[redacted]`.
 */
import type { Context } from "@opentelemetry/api";
import type { tracing } from "@opentelemetry/sdk-node";
import { maskDeep, type Masker } from "../../actors/secrets.js";

/** The span `span` as it is, but for every string of its fields masked with `mask` (its own fields are untouched). */
export function maskedSpan(span: tracing.ReadableSpan, mask: Masker): tracing.ReadableSpan {
  // A view over the span: what is not masked (its context, times, resource) is read through to it.
  return Object.create(span, {
    name: { value: mask(span.name) },
    status: { value: span.status.message === undefined ? span.status : { ...span.status, message: mask(span.status.message) } },
    attributes: { value: maskDeep(span.attributes, mask) },
    events: {
      value: span.events.map((e) => ({ ...e, name: mask(e.name), ...(e.attributes ? { attributes: maskDeep(e.attributes, mask) } : {}) })),
    },
    links: { value: span.links.map((l) => (l.attributes ? { ...l, attributes: maskDeep(l.attributes, mask) } : l)) },
  }) as tracing.ReadableSpan;
}

/** `inner`, handed each ended span masked with `mask` ({@link maskedSpan}). */
export function maskingSpanProcessor(inner: tracing.SpanProcessor, mask: Masker): tracing.SpanProcessor {
  return {
    onStart: (span: tracing.Span, parent: Context) => inner.onStart(span, parent),
    onEnd: (span: tracing.ReadableSpan) => inner.onEnd(maskedSpan(span, mask)),
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
  };
}
