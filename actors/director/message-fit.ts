/**
 * Events and results that must fit one message of the transport (`Bus.maxMessageBytes`): a publish of a larger
 * one would fail every time. The rule, documented in docs/protocol.md:
 *
 * - an event too large keeps its fields but `data`, which becomes `{"truncated": true, "bytes": <size of the whole
 *   event>}`, and its `message` is cut to {@link KEPT_MESSAGE_CHARS} characters;
 * - a result too large has its `content` cut to fit, `parsedContent` dropped, and the note `truncated` set to
 *   `{"bytes": <size of the whole result>}`. The task's record keeps the whole result (the store holds large values).
 */
import { encode, TaskEvent, TaskOutcome } from "../../protocol/index.js";

const encoder = new TextEncoder();

/** Characters of `message` an event cut to fit keeps. */
export const KEPT_MESSAGE_CHARS = 4096;

/** The body of `event`, cut to fit `maxBytes` (none: as it is). */
export function fitEvent(event: TaskEvent, maxBytes: number | undefined): Uint8Array {
  const body = encode(TaskEvent, event);
  if (maxBytes === undefined || body.byteLength <= maxBytes) return body;
  const { message, data: _data, ...rest } = event;
  const cut: TaskEvent = {
    ...rest,
    ...(message === undefined
      ? {}
      : { message: message.length > KEPT_MESSAGE_CHARS ? `${message.slice(0, KEPT_MESSAGE_CHARS)}…` : message }),
    data: { truncated: true, bytes: body.byteLength },
  };
  return encode(TaskEvent, cut);
}

/** `outcome`, its content cut to fit `maxBytes` once encoded (none: as it is). */
export function fitOutcome(outcome: TaskOutcome, maxBytes: number | undefined, overhead = 0): TaskOutcome {
  const bytes = encode(TaskOutcome, outcome).byteLength + overhead;
  if (maxBytes === undefined || bytes <= maxBytes) return outcome;
  const { parsedContent: _parsed, ...rest } = outcome;
  const notes = { ...outcome.notes, truncated: { bytes } };
  // Cut by the share of the content's encoded bytes that is too much, again until it fits.
  let content = outcome.content;
  for (;;) {
    const fitted: TaskOutcome = { ...rest, notes, content };
    const size = encode(TaskOutcome, fitted).byteLength + overhead;
    if (size <= maxBytes || content === "") return fitted;
    const contentBytes = encoder.encode(JSON.stringify(content)).byteLength;
    const keep = 1 - (size - maxBytes + 64) / contentBytes;
    content = keep <= 0 ? "" : content.slice(0, Math.floor(content.length * keep));
  }
}
