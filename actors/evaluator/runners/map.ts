/**
 * The `branches` actor of a map (machines/evaluator/map.ts): it runs each branch it is sent, answers with its result,
 * and, stopped, stops the branches still running. A branch of a map over a list runs the map's one step under its own
 * node paths (`0/map:2:0.steps.0`); under budgets, each branch holds its share of them until it ends.
 */
import { setMaxListeners } from "node:events";
import { extend, type Env } from "../../../machines/language/env.js";
import type { BranchCommand, BranchDone } from "../../../machines/evaluator/map.js";
import { taskFailure, type TaskResult } from "../../../protocol/index.js";
import { messageOf } from "../../../protocol/errors.js";
import { BUDGET_BINDING, budgetScopes, type TaskSpend } from "../budget.js";

/** Evaluates the node at `path` in `env`, its node paths reported under `scope` when given. */
export type EvaluateBranch = (path: string, env: Env, signal: AbortSignal, scope?: string) => Promise<TaskResult>;

/** The body of the `branches` callback actor: runs what `receive` hands it; the cleanup it returns stops them all. */
export function runBranches(
  receive: (listener: (command: BranchCommand) => void) => void,
  sendBack: (event: BranchDone) => void,
  evaluate: EvaluateBranch,
  reserve?: TaskSpend["reserve"],
): () => void {
  const stop = new AbortController();
  // Each branch running listens to it until it ends: a map of more than ten at once is no leak (Node warns past ten).
  setMaxListeners(0, stop.signal);
  receive(({ index, input }) => {
    const held = reserve?.(budgetScopes(input.env), input.parts);
    const env = held ? extend(input.env, { [BUDGET_BINDING]: [...budgetScopes(input.env), held.scope] }) : input.env;
    evaluate(input.path, env, stop.signal, input.scope)
      .catch((err: unknown) => taskFailure("unexpected_error", messageOf(err)))
      .then((result) => {
        held?.release();
        if (!stop.signal.aborted) sendBack({ type: "branch.done", index, result });
      });
  });
  return () => stop.abort();
}
