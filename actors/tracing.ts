/**
 * The tracing seam of the actors: spans and W3C trace context (`traceparent`) through the OpenTelemetry API. Until the
 * runtime registers an SDK (runtime/tracing/, only with an OTLP endpoint configured) the API is a no-op: spans are not
 * recorded, nothing is injected into headers, and a call costs a few property reads (no span is built: see
 * `tracing()`). docs/traces.md lists the spans.
 */
import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from "@opentelemetry/api";
import type { TraceContext } from "../protocol/index.js";
import { messageOf } from "./deps.js";

export { ROOT_CONTEXT, SpanKind, type Attributes, type Context };

/** The instrumentation scope of every span dirigent makes. */
export const TRACER_NAME = "dirigent";

/** A `traceparent` value: version, trace id, parent span id, flags (W3C Trace Context). */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Where a span's parent comes from: a context, received headers, or a stored trace context; absent: the active one. */
export type SpanParent = Context | ReadonlyMap<string, string> | TraceContext | undefined;

/** Options of {@link startSpan} and {@link inSpan}. */
export interface SpanOptions {
  parent?: SpanParent;
  kind?: SpanKind;
  attributes?: Attributes;
}

/** A started span and the context it is the active span of. */
export interface TaskSpan {
  readonly span: Span;
  readonly context: Context;
  /** Runs `fn` with this span active (requests asked inside carry it). */
  run<T>(fn: () => T): T;
  /** Marks the span failed with `err`. */
  fail(err: unknown): void;
  end(): void;
}

const mapGetter = {
  get: (carrier: ReadonlyMap<string, string>, key: string) => {
    const direct = carrier.get(key);
    if (direct !== undefined) return direct;
    for (const [name, value] of carrier) if (name.toLowerCase() === key) return value;
    return undefined;
  },
  keys: (carrier: ReadonlyMap<string, string>) => [...carrier.keys()],
};

function isContext(parent: SpanParent): parent is Context {
  return typeof parent === "object" && parent !== null && typeof (parent as Context).getValue === "function";
}

/** The context `parent` names (see {@link SpanParent}). */
export function contextOf(parent: SpanParent): Context {
  if (parent === undefined) return context.active();
  if (isContext(parent)) return parent;
  if (parent instanceof Map) return propagation.extract(context.active(), parent as ReadonlyMap<string, string>, mapGetter);
  const stored = parent as TraceContext;
  return propagation.extract(context.active(), { ...stored });
}

/** What the global tracer provider delegates to while no SDK is registered. */
const NO_SDK = new ProxyTracerProvider().getDelegate();

/**
 * Whether an SDK is registered (runtime/tracing/sdk.ts, or a test's). Without one, a span would be the API's no-op
 * span all the same: {@link startSpan} and {@link inSpan} then skip building it (a tracer, a context, closures: a
 * few µs each, seven spans a trivial task).
 */
function tracing(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NO_SDK;
}

/** The span of every {@link startSpan} while no SDK is registered: records nothing, runs as it is. */
const NOT_TRACED_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
const runAsIs = <T>(fn: () => T): T => fn();
const nothing = (): void => undefined;
/** The {@link TaskSpan} that records nothing, in the root context: every task holds a few for as long as it runs. */
const NOT_TRACED: TaskSpan = { span: NOT_TRACED_SPAN, context: ROOT_CONTEXT, run: runAsIs, fail: nothing, end: nothing };
/** A {@link TaskSpan} that records nothing: its functions shared by all, and the whole of it when in the root context. */
function notTraced(): TaskSpan {
  const active = context.active();
  return active === ROOT_CONTEXT ? NOT_TRACED : { span: NOT_TRACED_SPAN, context: active, run: runAsIs, fail: nothing, end: nothing };
}

/** Starts a span (its parent: see {@link SpanOptions}); end it with {@link TaskSpan.end}. */
export function startSpan(name: string, options: SpanOptions = {}): TaskSpan {
  if (!tracing()) return notTraced();
  const parent = contextOf(options.parent);
  const span = trace
    .getTracer(TRACER_NAME)
    .startSpan(
      name,
      { kind: options.kind ?? SpanKind.INTERNAL, ...(options.attributes ? { attributes: options.attributes } : {}) },
      parent,
    );
  const active = trace.setSpan(parent, span);
  return {
    span,
    context: active,
    run: (fn) => context.with(active, fn),
    fail: (err) => {
      if (!span.isRecording()) return;
      const free = contentFreeOf(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: free ?? messageOf(err) });
      // Neither the message nor the stack (which starts with it) of an error that may quote content.
      if (free !== undefined) span.recordException({ name: err instanceof Error ? err.name : "Error", message: free });
      else if (err instanceof Error) span.recordException(err);
    },
    end: () => span.end(),
  };
}

/**
 * What a span may record of `err` when its message may quote content it does not own: the `contentFree` text of the
 * first error of its cause chain that has one (a failed model call's, whose server may echo the prompt and the
 * request's headers: actors/model.ts). `undefined` for an error whose message is recorded as it is (masked).
 */
export function contentFreeOf(err: unknown): string | undefined {
  let at: unknown = err;
  for (let depth = 0; depth < 8 && at !== null && typeof at === "object"; depth++) {
    const free = (at as { contentFree?: unknown }).contentFree;
    if (typeof free === "string") return free;
    at = (at as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Runs `fn` in a new span, active while it runs; a throw marks it failed. Not tracing, `fn` runs as it is: no
 * frame of this function waits beside it.
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: TaskSpan) => Promise<T>): Promise<T> {
  if (tracing()) return inTracedSpan(name, options, fn);
  try {
    return fn(notTraced());
  } catch (err) {
    // As from an async function: a throw is a rejection.
    return Promise.reject(err);
  }
}

async function inTracedSpan<T>(name: string, options: SpanOptions, fn: (span: TaskSpan) => Promise<T>): Promise<T> {
  const started = startSpan(name, options);
  try {
    return await started.run(() => fn(started));
  } catch (err) {
    started.fail(err);
    throw err;
  } finally {
    started.end();
  }
}

/** The trace context of the active span as message headers (`traceparent`, `tracestate`); empty when not tracing. */
export function traceHeaders(at: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(at, carrier);
  return carrier;
}

/**
 * The trace context to store with an accepted task, so whichever Director runs it continues the trace: the active
 * span's, or else a valid `traceparent` received (a process that does not trace still keeps the client's).
 */
export function storedTraceContext(
  received: ReadonlyMap<string, string> | undefined,
  at: Context = context.active(),
): TraceContext | undefined {
  const active = traceHeaders(at);
  const traceparent = active["traceparent"] ?? (received ? mapGetter.get(received, "traceparent") : undefined);
  if (traceparent === undefined || !TRACEPARENT.test(traceparent)) return undefined;
  const tracestate =
    active["traceparent"] !== undefined ? active["tracestate"] : received ? mapGetter.get(received, "tracestate") : undefined;
  return { traceparent, ...(tracestate ? { tracestate: tracestate.slice(0, 512) } : {}) };
}

/** Whether the active span records (attributes worth computing); false when not tracing. */
export function recording(at: Context = context.active()): boolean {
  return trace.getSpan(at)?.isRecording() === true;
}

/** The active context (a session's, to parent the spans of what its machine runs later). */
export function activeContext(): Context {
  return context.active();
}
