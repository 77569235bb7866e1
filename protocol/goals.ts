/**
 * Autonomous goals, queued, run and alerted over NATS: a goal is decomposed into
 * sub-goals, each sub-goal runs as an ordinary dirigent task, every outcome is checked for divergence, and the goal
 * is replanned or, past its replan limit, paused with an operator alert. Supervisors (any number of processes)
 * run the goal cycles; clients submit and steer goals on the subjects in `subjects.ts` (`<root>.goals.*`).
 */
import { z } from "zod";
import { TASK_ID_PATTERN } from "./ids.js";
import { fencedBlock } from "./fence.js";
import { messageOf } from "./errors.js";

/** A goal id: the same alphabet as task ids, at most 40 characters (sub-goal task ids are derived from it). */
export const GoalId = z.string().regex(TASK_ID_PATTERN, "goal ids use letters, digits, _ and -").max(40);
export type GoalId = z.infer<typeof GoalId>;

/** A sub-goal's life: `pending` until it runs, `in-progress` while its task runs. */
export const SubGoalStatus = z.enum(["pending", "in-progress", "completed", "failed", "skipped"]);
export type SubGoalStatus = z.infer<typeof SubGoalStatus>;

/** `active`: supervisors run it; `paused`: escalated or paused by an operator, waits for `resume`. */
export const GoalStatus = z.enum(["active", "paused", "completed", "cancelled"]);
export type GoalStatus = z.infer<typeof GoalStatus>;

/** What a finished sub-goal's task produced. */
export const SubGoalOutcome = z.object({
  /** The task completed. */
  success: z.boolean(),
  /** The task's answer, cut to 4,000 characters. */
  content: z.string().default(""),
  /** Why it failed (the task's error, `cancelled`, or a timeout). */
  error: z.string().optional(),
  /** The task's cost in the price table's unit (USD), when it has one. */
  costUsd: z.number().nonnegative().optional(),
});
export type SubGoalOutcome = z.infer<typeof SubGoalOutcome>;

/** One step towards a goal. */
export const SubGoal = z.object({
  /** Unique within the goal (`s1`, `s2`, … numbered across replans). */
  id: z.string().regex(/^[A-Za-z0-9_-]{1,12}$/),
  description: z.string().min(1),
  status: SubGoalStatus,
  /** Sub-goals that must be `completed` before this one runs. */
  dependsOn: z.array(z.string()).default([]),
  /** 0 runs first; default 50. */
  priority: z.int().min(0).max(1000).default(50),
  /** The task that runs (or ran) it; derived from the goal, sub-goal and attempt, so a takeover finds it again. */
  taskId: z.string().optional(),
  /** The decomposition round that created it (1 for the first plan). */
  round: z.int().positive(),
  outcome: SubGoalOutcome.optional(),
  /** Why a replan skipped it. */
  skipReason: z.string().optional(),
});
export type SubGoal = z.infer<typeof SubGoal>;

/** How far an outcome strays from the goal; `unknown` when the model's judgement failed. */
export const Severity = z.enum(["none", "minor", "major", "unknown"]);
export type Severity = z.infer<typeof Severity>;

/** The divergence evaluation of one sub-goal outcome. */
export const DivergenceEvaluation = z.object({
  subGoalId: z.string(),
  /** `null`: unknown (the model's judgement failed); never reported as "not divergent". */
  divergent: z.boolean().nullable(),
  severity: Severity,
  reason: z.string().default(""),
  /** `metric`: decided by a metric trigger at no model cost; `model`: the cheap-tier model's judgement. */
  source: z.enum(["metric", "model"]),
});
export type DivergenceEvaluation = z.infer<typeof DivergenceEvaluation>;

/** A cost incurred for the goal at a time (milliseconds since the epoch), for the rolling 24-hour threshold. */
export const CostEntry = z.object({ at: z.number().int().nonnegative(), usd: z.number().nonnegative() });
export type CostEntry = z.infer<typeof CostEntry>;

/** A goal as stored in the goals bucket and answered by `get`. */
export const Goal = z.object({
  id: GoalId,
  description: z.string().min(1),
  status: GoalStatus,
  /** 0 runs first; default 50. */
  priority: z.int().min(0).max(1000).default(50),
  /** `operator`: submitted by a person or client; `agent`: created by a task. */
  source: z.enum(["operator", "agent"]).default("operator"),
  subGoals: z.array(SubGoal).default([]),
  /** Evaluations since the last replan (the replan rule counts these). */
  evaluations: z.array(DivergenceEvaluation).default([]),
  /** Replans since the goal was submitted or last resumed. */
  replanCount: z.int().nonnegative().default(0),
  /** Replans allowed before the goal is paused and an operator alerted. */
  maxReplans: z.int().nonnegative().default(5),
  /** Decompositions made so far (the first plan is 1). */
  rounds: z.int().nonnegative().default(0),
  /** Why the goal is paused. */
  pauseReason: z.string().optional(),
  costs: z.array(CostEntry).default([]),
  /** Milliseconds since the epoch. */
  createdAt: z.number().int().nonnegative(),
  updatedAt: z.number().int().nonnegative(),
});
export type Goal = z.infer<typeof Goal>;

/** Body of `<root>.goals.submit`. */
export const GoalSubmitRequest = z.strictObject({
  /** Client-chosen id; the same id again answers `duplicate`. */
  goalId: GoalId.optional(),
  description: z.string().trim().min(1).max(20_000),
  priority: z.int().min(0).max(1000).optional(),
  maxReplans: z.int().min(0).max(100).optional(),
});
export type GoalSubmitRequest = z.infer<typeof GoalSubmitRequest>;

/** Answer to a goal submission, `resume` or `cancel`. */
export const GoalReply = z.object({
  goalId: GoalId,
  /** `accepted`/`duplicate` for submit; `resumed`, `cancelled`, or `not_paused`/`already_final` when nothing changed. */
  status: z.enum(["accepted", "duplicate", "resumed", "not_paused", "cancelled", "already_final"]),
});
export type GoalReply = z.infer<typeof GoalReply>;

/** Answer to `<root>.goals.<id>.get`. */
export const GoalGetReply = z.object({ goal: Goal });
export type GoalGetReply = z.infer<typeof GoalGetReply>;

/** One line of `<root>.goals.list`. */
export const GoalSummary = Goal.pick({
  id: true,
  description: true,
  status: true,
  priority: true,
  replanCount: true,
  pauseReason: true,
  updatedAt: true,
}).extend({
  /** Sub-goals by status. */
  counts: z.record(z.string(), z.int()),
});
export type GoalSummary = z.infer<typeof GoalSummary>;

/** Answer to `<root>.goals.list`. */
export const GoalListReply = z.object({ goals: z.array(GoalSummary) });
export type GoalListReply = z.infer<typeof GoalListReply>;

/** An event on `<root>.goals.<id>.events`. */
export const GoalEvent = z.object({
  goalId: GoalId,
  /** `goal.decomposed`, `subgoal.started`, `subgoal.completed`, `subgoal.failed`, `goal.evaluation`, `goal.replanned`, `goal.paused`, `goal.completed`, … */
  type: z.string(),
  status: GoalStatus,
  message: z.string(),
  /** The supervisor process that published it. */
  supervisor: z.string(),
  at: z.number().int().nonnegative(),
  data: z.record(z.string(), z.unknown()).optional(),
});
export type GoalEvent = z.infer<typeof GoalEvent>;

/** A message on `<root>.operator.alerts` (and POSTed to the webhook): only escalations and major replans. */
export const OperatorAlert = z.object({
  kind: z.enum(["goal.escalated", "goal.major_replan"]),
  goalId: GoalId,
  description: z.string(),
  reason: z.string(),
  replanCount: z.int().nonnegative(),
  at: z.number().int().nonnegative(),
  /** What to do: `dirigent goal resume <id>` for an escalation. */
  action: z.string().optional(),
});
export type OperatorAlert = z.infer<typeof OperatorAlert>;

/** On `<root>.control.goals`, to every Supervisor: stop a goal's loop, or reconcile now (a goal was added or resumed). */
export const GoalControl = z.discriminatedUnion("action", [
  z.object({ action: z.literal("stop"), goalId: GoalId, reason: z.string() }),
  z.object({ action: z.literal("reconcile") }),
]);
export type GoalControl = z.infer<typeof GoalControl>;

/** The cheap-tier model's divergence judgement (JSON only; code fences are stripped). */
export const DivergenceJudgement = z.object({
  divergent: z.boolean(),
  severity: z.enum(["none", "minor", "major"]).default("none"),
  reason: z.string().default(""),
});
export type DivergenceJudgement = z.infer<typeof DivergenceJudgement>;

/** A decomposition: the model's plan of sub-goals; `dependsOn` names other items by their `id`. */
export const GoalPlan = z.object({
  subGoals: z
    .array(
      z.object({
        id: z.string().optional(),
        description: z.string().min(1),
        dependsOn: z.array(z.string()).default([]),
        priority: z.int().min(0).max(1000).default(50),
      }),
    )
    .min(1)
    .max(20),
});
export type GoalPlan = z.infer<typeof GoalPlan>;

/** During a replan, whether an in-progress sub-goal is kept. */
export const KeepDecision = z.object({ keep: z.boolean(), reason: z.string().default("") });
export type KeepDecision = z.infer<typeof KeepDecision>;

/** The JSON text of a model answer: a fenced block if there is one, else the outermost `{…}`. */
export function jsonOfAnswer(text: string): string {
  const fenced = fencedBlock(text);
  if (fenced?.includes("{")) return fenced.trim();
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  return start >= 0 && end > start ? text.slice(start, end + 1) : text.trim();
}

/** Parses and validates a model's JSON answer against `schema`; the error names what is wrong. */
export function parseAnswer<T extends z.ZodType>(schema: T, text: string): { ok: true; value: z.infer<T> } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(jsonOfAnswer(text));
  } catch (err) {
    return { ok: false, error: `not JSON: ${messageOf(err)}` };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    return { ok: false, error: parsed.error.issues.map((i) => `${i.path.join(".") || "(answer)"}: ${i.message}`).join("; ") };
  return { ok: true, value: parsed.data };
}
