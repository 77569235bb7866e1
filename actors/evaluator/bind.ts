/**
 * Binding a task's `<inputs>` into the environment it runs in (the evaluation machine's `bindNow` action and
 * `bindInputs` actor), and a reduce task's inputs into its items. An input's value comes from the environment
 * (`from`), from a nested task (evaluated by the caller's `evaluate`), or is literal.
 */
import { setMaxListeners } from "node:events";
import { extend, find, type Env } from "../../machines/language/env.js";
import type { BindOutcome } from "../../machines/evaluator/evaluation.js";
import type { ReduceItem, ResolvedItems } from "../../machines/evaluator/reduce.js";
import { listOf } from "../../machines/evaluator/map.js";
import type { TaskResult } from "../../protocol/index.js";
import { nodeBudgetBinding } from "./budget.js";
import { compositeContextBindings } from "./context.js";
import { inputFailure, isTaskInput } from "./nodes.js";
import type { InputBinding, TaskNode } from "../../machines/language/ast.js";

/** Evaluates the nested task of the input at `path` (`<node>.inputs.<i>.task`) in `env`; `signal` stops it early. */
export type EvaluateInputTask = (path: string, env: Env, signal?: AbortSignal) => Promise<TaskResult>;

type InputValue = { value: unknown } | { result: TaskResult } | { skip: true };

/** The reserved binding of the process environment variables templates may read (`from="env:NAME"`). */
export const ENV_INPUTS_BINDING = "$env_inputs";

/** The allowlisted variables (`DIRIGENT_ENV_INPUTS`) and the values of those set, read when the Evaluator started. */
export interface EnvInputs {
  allowed: readonly string[];
  values: Readonly<Record<string, string>>;
}

/** `from="env:NAME"`: the variable's value, when it is allowlisted and set. */
function envValue(input: InputBinding, name: string, env: Env): InputValue {
  const found = find(env, ENV_INPUTS_BINDING);
  const inputs = found.found ? (found.value as EnvInputs) : { allowed: [], values: {} };
  if (!inputs.allowed.includes(name))
    return {
      result: inputFailure(
        `input '${input.name}' reads the environment variable ${name}, which is not an environment input (DIRIGENT_ENV_INPUTS lists those a template may read)`,
        { missing: [`env:${name}`] },
      ),
    };
  const value = inputs.values[name];
  if (value === undefined)
    return {
      result: inputFailure(`missing required input: 'env:${name}' (not set in the Evaluator's environment)`, { missing: [`env:${name}`] }),
    };
  return { value };
}

/** The value of an input that is not a nested task: from the environment, or literal. */
function valueNow(input: InputBinding | undefined, env: Env): InputValue {
  if (!input) return { skip: true };
  if (input.from?.startsWith("env:")) return envValue(input, input.from.slice("env:".length).trim(), env);
  if (input.from !== undefined) {
    const found = find(env, input.from);
    if (!found.found)
      return { result: inputFailure(`missing required input: '${input.from}' (bound to '${input.name}')`, { missing: [input.from] }) };
    return { value: found.value };
  }
  if (input.value !== undefined && input.value !== "") return { value: input.value };
  return { skip: true };
}

async function taskValue(evaluate: EvaluateInputTask, path: string, i: number, env: Env, signal?: AbortSignal): Promise<InputValue> {
  const result = await evaluate(`${path}.inputs.${i}.task`, env, signal);
  return result.status === "COMPLETE" ? { value: result.content } : { result };
}

/**
 * The binding of `node`'s inputs, in order, as steps: it yields the index of each input that is a nested task and
 * takes its value back, and returns the outcome. One walk serves both the binding at once and the one with tasks.
 */
function* bindSteps(node: TaskNode, env: Env, entry: boolean): Generator<number, BindOutcome, InputValue> {
  const budget = nodeBudgetBinding(node, env);
  if ("error" in budget) return { result: inputFailure(budget.error) };
  // No prototype: an input may be named `__proto__` (template names are the submitter's).
  const bindings: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, budget.bindings);
  if (node.inputSource !== undefined) {
    // `<input_source>x</input_source>` makes the value of `x` this task's `input`: templates that pass a result on
    // by name (as evaluator tasks reading `last_evaluator_output` do) keep working.
    const found = find(env, node.inputSource);
    if (!found.found)
      return {
        result: inputFailure(`missing required input: '${node.inputSource}' (the task's <input_source>)`, { missing: [node.inputSource] }),
      };
    bindings["input"] = found.value;
  }
  for (let i = 0; i < node.inputs.length; i++) {
    const input = node.inputs[i];
    if (!input) continue;
    // On the entry node a literal is a default: the submitted inputs win over it.
    if (entry && input.from === undefined && !input.task && find(env, input.name).found) continue;
    const got = isTaskInput(input) ? yield i : valueNow(input, env);
    if ("result" in got) return { result: got.result };
    if ("value" in got) bindings[input.name] = got.value;
  }
  return { env: extend(env, { ...compositeContextBindings(node, env), ...bindings }) };
}

/** Binds the inputs of a node none of whose inputs is a nested task (`EvalNode.inputTasks` not set), at once. */
export function bindInputsNow(node: TaskNode, env: Env, entry: boolean): BindOutcome {
  const step = bindSteps(node, env, entry).next();
  if (step.done) return step.value;
  throw new Error(`input ${step.value} of the task is a nested task: it cannot be bound at once`);
}

/**
 * Evaluates the nested tasks among `node`'s inputs at once: they are independent, so the parent step waits only for
 * the slowest. The first one to fail stops the ones still running, and is the outcome.
 */
async function taskValues(
  evaluate: EvaluateInputTask,
  node: TaskNode,
  path: string,
  env: Env,
  signal?: AbortSignal,
): Promise<InputValue[]> {
  const stop = new AbortController();
  // Each input task running listens to it until it ends: more than ten inputs is no leak (Node warns past ten).
  setMaxListeners(0, stop.signal);
  const abort = () => stop.abort();
  signal?.addEventListener("abort", abort, { once: true });
  let failed: number | undefined;
  try {
    const values = await Promise.all(
      node.inputs.map(async (input, i): Promise<InputValue> => {
        if (!isTaskInput(input)) return { skip: true };
        const got = await taskValue(evaluate, path, i, env, stop.signal);
        if ("result" in got && failed === undefined) {
          failed = i;
          stop.abort();
        }
        return got;
      }),
    );
    // The failure that stopped the others is the outcome, not the cancellations it caused.
    return failed === undefined ? values : values.map((v, i) => (i === failed || !("result" in v) ? v : { skip: true }));
  } finally {
    signal?.removeEventListener("abort", abort);
  }
}

/** Binds the inputs of the node at `path`, evaluating those that are nested tasks at once. */
export async function bindInputs(
  evaluate: EvaluateInputTask,
  node: TaskNode,
  path: string,
  env: Env,
  entry: boolean,
  signal?: AbortSignal,
): Promise<BindOutcome> {
  const values = await taskValues(evaluate, node, path, env, signal);
  const steps = bindSteps(node, env, entry);
  let step = steps.next();
  while (!step.done) step = steps.next(values[step.value] ?? { skip: true });
  return step.value;
}

/**
 * The items of a reduce task: the value of each of its inputs, in order (their nested tasks evaluated at once), or
 * with `over` the elements of that list.
 */
export async function resolveItems(
  evaluate: EvaluateInputTask,
  node: TaskNode,
  path: string,
  env: Env,
  signal?: AbortSignal,
): Promise<ResolvedItems> {
  const over = node.map?.over;
  if (over !== undefined) {
    // The reduce's own inputs are bound first, so `over` may name one of them.
    const bound = bindInputs(evaluate, node, path, env, false, signal);
    const outcome = await bound;
    if ("result" in outcome) return outcome;
    const list = listOf(outcome.env, over);
    if ("error" in list) return { result: inputFailure(list.error) };
    return { items: list.items.map((value, i) => ({ name: `${over}[${i}]`, value })) };
  }
  const values = await taskValues(evaluate, node, path, env, signal);
  const items: ReduceItem[] = [];
  for (let i = 0; i < node.inputs.length; i++) {
    const input = node.inputs[i];
    const got = isTaskInput(input) ? (values[i] ?? { skip: true }) : valueNow(input, env);
    if ("result" in got) return { result: got.result };
    if ("value" in got) items.push({ name: input?.name ?? String(i), value: got.value });
  }
  return { items };
}
