/**
 * The effects of the `checkmate` machine (a `<task type="judge_loop">`): the task and criteria are substituted from
 * the node, and each intake, criteria-judge, worker and judge call is one atomic Handler call through
 * `walk.execute` with a prompt built here, under its own node path (`<path>/checkmate:worker2`). Usage, budgets and
 * the Handler's records apply as for any atomic task, so a resumed task replays finished calls: a recorded judge
 * answer is returned as it was, and its verdict is never flipped.
 *
 * A worker or judge call that runs past its timeout is aborted: the Evaluator tells the Handler to stop that
 * session (`node.abort`), which drops the model request.
 *
 * The loop's questions (the intake's, and the human gates of `interactive="true"`) are asked through the task's
 * input subject like `request_user_input`, each announced as `continuation.input` (the task is `awaiting_input`)
 * unless a re-run finds its answer recorded (actors/evaluator/input.ts): then nothing is asked again.
 *
 * Template: `<description>` the task, optional `<criteria>` (text or `<item>`s), `<max_iterations>`, optional
 * `<intake>`, `<worker>`, `<judge>`, `<criteria_judge>` system prompts, `<model>`; attributes `worker_timeout` and
 * `judge_timeout` (seconds), `criteria_judge="true"`, `max_intake_rounds`, `interactive="true"`, `gate_timeout`
 * (seconds: how long a gate waits before its default).
 */
import { fromPromise } from "xstate";
import {
  checkmateMachine,
  type AskInput,
  type AskReply,
  type CriteriaJudgeInput,
  type Gap,
  type IntakeInput,
  type IterationInput,
  type JudgeInput,
  type Prepared,
  type WorkerInput,
} from "../../machines/evaluator/checkmate.js";
import { find, type Env } from "../../machines/language/env.js";
import type { Scoped } from "../../machines/evaluator/evaluation-context.js";
import { taskFailure, type TaskResult } from "../../protocol/index.js";
import { budgetScopes } from "./budget.js";
import { inputFailure } from "./nodes.js";
import { InputTimeout } from "./input.js";
import { messageOf } from "../deps.js";
import type { Walk } from "./document-walk.js";
import { substitute } from "../../machines/language/substitute.js";
import type { TaskNode } from "../../machines/language/ast.js";

type Role = "intake" | "criteria_judge" | "worker" | "judge";

/** Text of a `<worker>`/`<judge>`/`<intake>`/`<criteria_judge>` child of the node. */
function promptOf(node: TaskNode, role: Role): string | undefined {
  const el = node.extra.find((e) => e.name === role);
  const text = el?.text.trim();
  return text === undefined || text === "" ? undefined : text;
}

function seconds(node: TaskNode, name: string): number | undefined {
  const raw = node.attributes[name];
  const value = raw === undefined ? Number.NaN : Number(raw);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

const section = (title: string, body: string) => `${title}:\n${body.trim() === "" ? "(none)" : body.trim()}`;

/** The intake prompt: criteria as blocking / non-blocking checklists, or `[NEEDS_CLARIFICATION]` with questions. */
export function intakePrompt(input: IntakeInput): string {
  const parts = [
    "You are the intake of a checkmate loop. Turn the task below into acceptance criteria a judge can check from the output alone.",
    section("TASK", input.task),
    [
      "Answer in this format:",
      "# Acceptance Criteria: <title>",
      "## Must Pass (blocking)",
      "- [ ] <binary, testable item> (5-10 items)",
      "## Should Pass (non-blocking)",
      "- [ ] <item>",
      "## Context",
      "<1-3 sentences>",
      "",
      "If the task is too ambiguous to write criteria, answer instead with [NEEDS_CLARIFICATION] followed by numbered questions for the user.",
    ].join("\n"),
  ];
  if (input.clarifications.length > 0)
    parts.push(
      section(
        "THE USER ANSWERED YOUR QUESTIONS",
        input.clarifications.map((c) => `Questions:\n${c.questions}\nAnswer:\n${c.answer}`).join("\n\n"),
      ),
    );
  if (input.feedback !== undefined)
    parts.push(
      section("YOUR PREVIOUS DRAFT", input.previousDraft ?? ""),
      section("CRITERIA JUDGE FEEDBACK (fix these issues)", input.feedback),
    );
  return parts.join("\n\n");
}

/**
 * The criteria judge prompt: vague criteria make every later verdict arbitrary, so they are judged (APPROVED or
 * NEEDS_WORK) before any work starts.
 */
export function criteriaJudgePrompt(input: CriteriaJudgeInput): string {
  return [
    "You are the criteria judge of a checkmate loop. Decide whether the acceptance criteria below are good enough to judge the task's output: binary, specific, covering the implicit requirements, checkable from the output alone.",
    section("TASK", input.task),
    section("ACCEPTANCE CRITERIA", input.criteria),
    "Answer with **Result:** APPROVED or **Result:** NEEDS_WORK, then ## Issues and ## Suggested Fixes.",
  ].join("\n\n");
}

/** Every gap so far, oldest first. */
export function gapList(gaps: readonly Gap[]): string {
  return gaps.map((g) => `- Iteration ${g.iteration}: ${g.gapSummary}`).join("\n");
}

/**
 * The worker prompt: task, criteria, previous attempt and judge feedback, with all accumulated gaps, not only the last,
 * so a fix for one gap does not undo an earlier one.
 */
export function workerPrompt(input: WorkerInput): string {
  const parts = [
    `You are the worker in a checkmate loop (iteration ${input.iteration}/${input.maxIterations}).`,
    section("TASK", input.task),
    section("ACCEPTANCE CRITERIA", input.criteria),
  ];
  if (input.previous !== undefined) parts.push(section("PREVIOUS ATTEMPT", input.previous));
  if (input.directions.length > 0)
    parts.push(
      section(
        "USER DIRECTION (the user's guidance; follow it)",
        input.directions.map((d) => `- After iteration ${d.iteration}: ${d.text}`).join("\n"),
      ),
    );
  if (input.gaps.length > 0) {
    parts.push(section("JUDGE FEEDBACK (what to fix; every gap so far)", gapList(input.gaps)));
    parts.push(
      "Produce an improved version that directly addresses the judge's feedback.\nDo not address non-blocking observations unless the blocking criteria are all met.",
    );
  }
  parts.push("Do the work yourself. Answer with the deliverable only.");
  return parts.join("\n\n");
}

/** The judge prompt: a typed JSON verdict (protocol/checkmate.ts). */
export function judgePrompt(input: JudgeInput): string {
  return [
    `You are the judge in a checkmate loop (iteration ${input.iteration}/${input.maxIterations}). Judge the output against the acceptance criteria. Never fix the output.`,
    section("TASK", input.task),
    section("ACCEPTANCE CRITERIA", input.criteria),
    section("OUTPUT TO JUDGE", input.output),
    [
      "Answer with JSON only:",
      '{"result": "PASS" or "FAIL", "score": 0-100, "criteria": [{"item": "<criterion>", "pass": true or false, "evidence": "<quote from the output>"}], "gapSummary": "<2-4 sentences on what to fix; empty on PASS>"}',
      "PASS only if every blocking criterion passes. Ground each failing item in a quote.",
    ].join("\n"),
  ].join("\n\n");
}

/** The task text and criteria of the node, `{{var}}`s substituted from `env`. */
export function prepareCheckmate(walk: Walk, node: TaskNode, env: Env): Prepared {
  const task = [node.description, node.instructions].filter((t): t is string => !!t && t.trim() !== "").join("\n\n");
  if (task.trim() === "") return { result: inputFailure("a judge_loop task needs a <description>: the task for the worker") };
  const criteria =
    node.criteria === undefined ? "" : typeof node.criteria === "string" ? node.criteria : node.criteria.map((c) => `- ${c}`).join("\n");
  const missing = new Set<string>();
  const fill = (text: string) => {
    const done = substitute(text, (p) => find(env, p), walk.substitution ?? "strict");
    if (done.ok) return done.text;
    for (const m of done.missing) missing.add(m);
    return text;
  };
  const filled = { task: fill(task), criteria: fill(criteria) };
  if (missing.size > 0)
    return { result: inputFailure(`missing required input: ${[...missing].map((m) => `'${m}'`).join(", ")}`, { missing: [...missing] }) };
  const gateTimeoutS = seconds(node, "gate_timeout");
  const gates = {
    ...(node.attributes["interactive"]?.trim() === "true" ? { interactive: true } : {}),
    ...(gateTimeoutS === undefined ? {} : { gateTimeoutS }),
  };
  return filled.criteria.trim() === "" ? { task: filled.task, ...gates } : { ...filled, ...gates };
}

/**
 * Puts a question of the loop to the user and waits for the answer: announced as `continuation.input` (the task
 * is `awaiting_input`) and `continuation.resumed`, unless the answer is recorded from an earlier run of the task.
 * No answer in time is a reply too (`timedOut`): the machine takes the gate's default.
 */
export async function askUser(walk: Walk, input: AskInput, signal: AbortSignal): Promise<AskReply> {
  const { path, gate, request } = input;
  const replayed = (await walk.inputRecorded?.(request)) === true;
  // Listening before the question is announced: an answer sent as soon as it is seen is heard.
  const answered = walk.waitForInput(path, request, signal);
  if (!replayed) walk.progress("continuation.input", request.question, { nodePath: path, request, gate });
  let reply: AskReply;
  try {
    reply = { answer: await answered };
  } catch (err) {
    if (!(err instanceof InputTimeout) || signal.aborted) throw err;
    reply = { timedOut: messageOf(err) };
  }
  if (!replayed)
    walk.progress("continuation.resumed", "answer" in reply ? "resumed after input" : "no answer in time", { nodePath: path, gate });
  return reply;
}

/** One atomic Handler call of the loop, bounded by the role's timeout; a timeout is a FAILED `execution_timeout` result. */
async function call(
  walk: Walk,
  node: TaskNode,
  path: string,
  role: Role,
  name: string,
  prompt: string,
  env: Env,
  signal: AbortSignal,
  timeoutS?: number,
): Promise<TaskResult> {
  const system = promptOf(node, role);
  const model = node.model?.name?.trim();
  const fields = { prompt, ...(system ? { system } : {}), ...(model ? { model } : {}), continuations: [] };
  const timer = timeoutS === undefined ? undefined : AbortSignal.timeout(timeoutS * 1000);
  const bounded = timer ? AbortSignal.any([signal, timer]) : signal;
  try {
    const { session: _session, ...result } = await walk.execute(`${path}/checkmate:${name}`, fields, bounded, budgetScopes(env));
    return result;
  } catch (err) {
    if (timer?.aborted && !signal.aborted) {
      return taskFailure("execution_timeout", `the ${role.replace("_", " ")} did not answer within ${timeoutS} s`);
    }
    throw err;
  }
}

/**
 * The checkmate machine with effects that act for the walk of the scope their machine's `scopeKey` names (`walkOf`):
 * built once per Evaluator.
 */
export function provideCheckmate(walkOf: (scopeKey: string | undefined) => Walk, taskAt: (walk: Walk, path: string) => TaskNode) {
  /** The worker's or the judge's call of an iteration, bounded by the node's `worker_timeout` or `judge_timeout`. */
  const iteration = (role: "worker" | "judge", input: IterationInput, prompt: string, signal: AbortSignal) => {
    const walk = walkOf(input.scopeKey);
    const node = taskAt(walk, input.path);
    return call(walk, node, input.path, role, `${role}${input.iteration}`, prompt, input.env, signal, seconds(node, `${role}_timeout`));
  };
  return checkmateMachine.provide({
    actions: { progress: ({ context }, p) => walkOf(context.scopeKey).progress(p.event, p.message, p.data) },
    actors: {
      prepare: fromPromise<Prepared, { path: string; env: Env } & Scoped>(async ({ input }) => {
        const walk = walkOf(input.scopeKey);
        return prepareCheckmate(walk, taskAt(walk, input.path), input.env);
      }),
      runIntake: fromPromise<TaskResult, IntakeInput>(({ input, signal }) => {
        const walk = walkOf(input.scopeKey);
        return call(walk, taskAt(walk, input.path), input.path, "intake", `intake${input.round}`, intakePrompt(input), input.env, signal);
      }),
      runCriteriaJudge: fromPromise<TaskResult, CriteriaJudgeInput>(({ input, signal }) => {
        const walk = walkOf(input.scopeKey);
        return call(
          walk,
          taskAt(walk, input.path),
          input.path,
          "criteria_judge",
          `criteria${input.round}`,
          criteriaJudgePrompt(input),
          input.env,
          signal,
        );
      }),
      askUser: fromPromise<AskReply, AskInput>(({ input, signal }) => askUser(walkOf(input.scopeKey), input, signal)),
      runWorker: fromPromise<TaskResult, WorkerInput>(({ input, signal }) => iteration("worker", input, workerPrompt(input), signal)),
      runJudge: fromPromise<TaskResult, JudgeInput>(({ input, signal }) => iteration("judge", input, judgePrompt(input), signal)),
    },
  });
}
