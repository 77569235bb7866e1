/**
 * The input a Handler session starts with (pure): its prompts and model; its hard limits from the task's settings
 * and its Handler's defaults, the context limit a share of the model's context window; the task's budget; and the
 * state it goes on from (a recorded checkpoint, or the suspended session a resume answers).
 */
import type { ExecuteRequest, SessionCheckpoint, SessionSettings } from "../../protocol/index.js";
import { sessionBudget } from "./budget.js";
import { priceOf, type Prices } from "./pricing.js";
import type { HandlerSessionInput } from "./session-context.js";

/** A Handler's defaults for its sessions, fixed for the life of every session it starts. */
export interface SessionDefaults {
  /** Model used when the template names none. */
  defaultModel: string;
  /** Hard limit on assistant messages per session. */
  maxTurns: number;
  /** The base system prompt; the template's `<system>` is appended to it. */
  baseSystemPrompt: string;
  /** Context window of models the tokenizer does not know. Default 128000. */
  contextWindowTokens?: number;
  /** Share of the model's context window a session may use. Default 0.8. */
  maxContextWindowFraction?: number;
  /** Share of the context limit at which a `context.warning` event is sent. Default 0.8. */
  warningThreshold?: number;
  /** Malformed tool calls answered with an error before the session fails. Default 3. */
  maxMalformedToolCalls?: number;
  /** Largest completion of one model call, sent to the model as `max_tokens`. Default: none sent. */
  maxOutputTokens?: number;
  /** Per-1M-token prices by model id; usage of a listed model gets a `cost`. */
  prices?: Prices;
}

/** The context window of a model the tokenizer does not know, without a `contextWindowTokens` of the Handler's. */
export const DEFAULT_CONTEXT_WINDOW = 128_000;

/**
 * The most tokens one model call of a session may send: `maxContextWindowFraction` (default 0.8) of the model's
 * context window, `known` to the tokenizer or else the Handler's `contextWindowTokens`.
 */
export function contextLimit(
  known: number | undefined,
  defaults: Pick<SessionDefaults, "contextWindowTokens" | "maxContextWindowFraction">,
): number {
  return Math.floor((known ?? defaults.contextWindowTokens ?? DEFAULT_CONTEXT_WINDOW) * (defaults.maxContextWindowFraction ?? 0.8));
}

/** The model a request's session asks first. */
export function sessionModel(request: ExecuteRequest, defaults: Pick<SessionDefaults, "defaultModel">): string {
  return request.model ?? defaults.defaultModel;
}

/** The output limit sent with each model call of a session under `settings`, if one is sent. */
export function outputLimit(settings: SessionSettings, defaults: Pick<SessionDefaults, "maxOutputTokens">): number | undefined {
  return settings.maxOutputTokens ?? defaults.maxOutputTokens;
}

/** Joins the base system prompt and the template's system prompt (base first, so a template adds to the runtime's rules and cannot drop them). */
export function buildSystemPrompt(base: string, template: string | undefined): string {
  return template ? `${base}\n\n===\n\n${template}` : base;
}

/** Where a session starts besides its request. */
export interface SessionStart {
  /** The context window of the session's model, when the tokenizer knows it. */
  contextWindow: number | undefined;
  /** The attached context (files and text), appended to the system prompt. */
  attached: string;
  /** The checkpoint of a recorded run of this call, to go on from. */
  recorded?: SessionCheckpoint;
}

/** The input of the session that runs `request` under `settings` (its own, or those of the session it resumes). */
export function sessionInput(
  request: ExecuteRequest,
  settings: SessionSettings,
  defaults: SessionDefaults,
  start: SessionStart,
): HandlerSessionInput {
  const model = sessionModel(request, defaults);
  const maxOutputTokens = outputLimit(settings, defaults);
  return {
    system: buildSystemPrompt(defaults.baseSystemPrompt, request.system) + start.attached,
    prompt: request.prompt,
    model,
    maxTurns: settings.maxTurns ?? defaults.maxTurns,
    contextLimit: contextLimit(start.contextWindow, defaults),
    warningThreshold: defaults.warningThreshold ?? 0.8,
    maxMalformedToolCalls: defaults.maxMalformedToolCalls ?? 3,
    ...(maxOutputTokens ? { maxOutputTokens } : {}),
    ...(start.recorded
      ? { restore: start.recorded }
      : request.resume
        ? { restore: { ...request.resume.session, answer: request.resume.answer } }
        : {}),
    ...sessionBudget(request, priceOf(defaults.prices, request.resume?.session.model ?? model, model)),
  };
}
