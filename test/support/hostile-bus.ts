/**
 * The bus side of the hostile e2e test (test/e2e/hostile.test.ts): the subjects under attack with a well-formed body
 * each and the schema of a good answer, hostile ids for a subject's id token, and raw requests over a plain NATS
 * connection that report what came back (a reply, no responders, a timeout, or a refusal by the client).
 */
import { createInbox, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import type { z } from "zod";
import {
  CancelReply,
  CompileReply,
  EvaluateReply,
  ExecuteReply,
  GoalGetReply,
  GoalListReply,
  GoalReply,
  MatchReply,
  ScriptReply,
  SubmitReply,
  TaskStatusReply,
  UserInputReply,
} from "../../protocol/index.js";
import type { HostileCase } from "./hostile.js";

export const REQUEST_TIMEOUT_MS = 10_000;

/** What came back for one request. */
export type Answer =
  | { kind: "reply"; text: string }
  | { kind: "no-responders" }
  | { kind: "timeout" }
  | { kind: "refused"; message: string };

/** A request over a plain NATS connection; empty bodies (keepalives) are skipped, NATS's 503 is "no responders". */
export async function send(nc: NatsConnection, subject: string, body: Uint8Array, headers?: Record<string, string>): Promise<Answer> {
  const inbox = createInbox();
  const sub = nc.subscribe(inbox);
  const timer = setTimeout(() => sub.unsubscribe(), REQUEST_TIMEOUT_MS);
  try {
    const h = headers === undefined ? undefined : natsHeaders();
    for (const [k, v] of Object.entries(headers ?? {})) h?.set(k, v);
    nc.publish(subject, body, { reply: inbox, ...(h ? { headers: h } : {}) });
  } catch (err) {
    clearTimeout(timer);
    sub.unsubscribe();
    return { kind: "refused", message: String(err) };
  }
  try {
    for await (const m of sub) {
      if (m.headers?.code === 503) return { kind: "no-responders" };
      if (m.data.length > 0) return { kind: "reply", text: m.string() };
    }
    return { kind: "timeout" };
  } finally {
    clearTimeout(timer);
    sub.unsubscribe();
  }
}

/** A subject under attack: a well-formed body to mutate, and the schema of a good answer. */
export interface Target {
  name: string;
  subject: string;
  valid: Record<string, unknown>;
  /** A good answer other than an error; `undefined`: only errors are good answers. */
  reply?: z.ZodType;
  count: number;
  /** Nobody answers unless something waits (a task's input): NATS's no-responders is an answer. */
  maybeNobody?: boolean;
  /** Publish only (broadcasts): no answer is expected, the processes must only survive it. */
  publish?: boolean;
}

export const TEMPLATE = "<task><description>Say hi about {{topic}}</description></task>";

export function targets(root: string): Target[] {
  const s = (rest: string) => `${root}.${rest}`;
  return [
    {
      name: "tasks.submit",
      subject: s("tasks.submit"),
      valid: { taskId: "h-valid", xml: TEMPLATE, inputs: { topic: "cats" } },
      reply: SubmitReply,
      count: 420,
    },
    { name: "tasks.<id>.get", subject: s("tasks.h-none.get"), valid: { any: 1 }, reply: TaskStatusReply, count: 120 },
    { name: "tasks.<id>.cancel", subject: s("tasks.h-none.cancel"), valid: { any: 1 }, reply: CancelReply, count: 120 },
    {
      name: "tasks.<id>.input",
      subject: s("tasks.h-none.input"),
      valid: { text: "Oslo" },
      reply: UserInputReply,
      count: 80,
      maybeNobody: true,
    },
    {
      name: "goals.submit",
      subject: s("goals.submit"),
      valid: { description: "grow", priority: 1, maxReplans: 0 },
      reply: GoalReply,
      count: 150,
    },
    { name: "goals.list", subject: s("goals.list"), valid: {}, reply: GoalListReply, count: 80 },
    { name: "goals.<id>.get", subject: s("goals.h-none.get"), valid: {}, reply: GoalGetReply, count: 60 },
    { name: "goals.<id>.resume", subject: s("goals.h-none.resume"), valid: {}, reply: GoalReply, count: 60 },
    { name: "goals.<id>.cancel", subject: s("goals.h-none.cancel"), valid: {}, reply: GoalReply, count: 60 },
    {
      name: "compiler.compile",
      subject: s("compiler.compile"),
      valid: { type: "compiler.compile", prompt: "Summarise", inputNames: ["topic"], maxAttempts: 1 },
      reply: CompileReply,
      count: 150,
    },
    {
      name: "evaluator.evaluate",
      subject: s("evaluator.evaluate"),
      valid: { type: "evaluator.evaluate", taskId: "h-eval", xml: TEMPLATE, inputs: { topic: "cats" } },
      reply: EvaluateReply,
      count: 300,
    },
    {
      name: "handler.execute",
      subject: s("handler.execute"),
      valid: { type: "handler.execute", taskId: "h-exec", nodePath: "0", prompt: "hi" },
      reply: ExecuteReply,
      count: 250,
    },
    {
      name: "handler.script",
      subject: s("handler.script"),
      valid: { type: "handler.script", taskId: "h-script", nodePath: "0", argv: ["true"], timeoutMs: 2000 },
      reply: ScriptReply,
      count: 200,
    },
    {
      name: "memory.match",
      subject: s("memory.match"),
      valid: { type: "memory.match", templateDescription: "d", templateType: "atomic", inputs: { topic: "cats" } },
      reply: MatchReply,
      count: 200,
    },
    { name: "control.cancel", subject: s("control.cancel"), valid: { type: "task.cancel", taskId: "h-none" }, count: 60, publish: true },
    {
      name: "control.superseded",
      subject: s("control.superseded"),
      valid: { type: "task.superseded", taskId: "h-none", owner: "x" },
      count: 60,
      publish: true,
    },
    {
      name: "control.goals",
      subject: s("control.goals"),
      valid: { action: "stop", goalId: "h-none", reason: "x" },
      count: 60,
      publish: true,
    },
    {
      name: "progress.<id>",
      subject: s("progress.h-none"),
      valid: { type: "task.progress", taskId: "h-none", event: "x" },
      count: 60,
      publish: true,
    },
  ];
}

/** Ids in a subject's id token: wildcards are delivered as they are, dots make another subject, spaces cannot be sent. */
export const SUBJECT_IDS = [
  "*",
  ">",
  "a.b",
  "$JS.API.STREAM.LIST",
  "a b",
  "tab\there",
  "nul\u0000x",
  "esc\u001b[31m",
  "del\u007f",
  "é",
  "😀",
  "x".repeat(65),
  "x".repeat(300),
  "__proto__",
  "constructor",
  "prototype",
];

/** NATS headers holding `values`. */
export function toHeaders(values: Record<string, string>) {
  const h = natsHeaders();
  for (const [k, v] of Object.entries(values)) h.set(k, v);
  return h;
}

/** The parsed answer of a request that must be answered. */
export async function replyOf(nc: NatsConnection, subject: string, body: string): Promise<unknown> {
  const answer = await send(nc, subject, new TextEncoder().encode(body));
  if (answer.kind !== "reply") throw new Error(`${subject}: ${answer.kind}`);
  return JSON.parse(answer.text) as unknown;
}

/** Which other branch a timeout may belong to (size limits, token counting, XML limits). */
export function hint(hostile: HostileCase): string {
  if (hostile.kind === "900 KB body") return " (size limits and token counting are another branch's: confirm after merging it)";
  if (/xml/.test(hostile.kind)) return " (XML entity and depth limits are another branch's: confirm after merging it)";
  return "";
}
