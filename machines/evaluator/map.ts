/**
 * A `map` task (docs/task-language.md#map): its branches run at once, at most `max_parallel` of them at a time.
 *
 * A map of steps has one branch per `<steps>` child, at the step's own path (`0.steps.2`); a map over a list (`over`)
 * runs its single step once per element of the list, the element bound to `as` (`item`) and its 0-based index to
 * `<as>_index`, each branch under the scope `<path>/map:<i>:`. Every branch sees the map's environment only: no branch
 * sees a sibling's result.
 *
 * idle → resolving → running → done | failed, or running → cancelling → failed. The machine decides which branch starts
 * when; the `branches` actor (invoked for the whole run, provided by the shell) runs each one it is sent
 * (`branch.start`: the shell evaluates the node at the branch's path) and answers with `branch.done`, and stopping it
 * stops the branches still running; a branch that finishes frees its slot for the next. Branches are not child actors: a map of 1,000
 * would otherwise carry 1,000 finished children in every snapshot. With `on_failure="fail_fast"` (the default) the first failed branch stops the running ones (`CANCELLED`) and
 * the map fails naming it; with `collect` every branch runs and the map fails after all of them, naming each failed
 * branch, with the results of the others. Output: `content` is the JSON list of the branch contents, `parsedContent`
 * their values (a branch's parsed JSON, or its text), and `notes.step_results` one `{content, status, parsedContent?,
 * notes?}` per branch, in branch order.
 */
import { fromCallback, setup } from "xstate";
import { taskFailure, type TaskResult } from "../../protocol/index.js";
import { extend, find, type Env } from "../language/env.js";
import type { MapFailurePolicy } from "../language/ast.js";
import { notProvided } from "../not-provided.js";
import { idleUntilStarted, type StartEvent } from "../invoke-events.js";
import { compositeFailure, stepResultOf, type ProgressParams, type StepResult } from "./sequential.js";
import { messageOf } from "../../protocol/errors.js";
import type { Scoped } from "./evaluation-context.js";

/** Branches of a map running at once when the task does not say (`max_parallel`). */
export const DEFAULT_MAX_PARALLEL = 10;

/** Input of a map actor. */
export interface MapInput extends Scoped {
  /** Path of the map task node; its steps are `<path>.steps.<i>`. */
  path: string;
  /** Number of `<steps>`. */
  stepCount: number;
  /** The environment of the map (its inputs bound). */
  env: Env;
  maxParallel: number;
  onFailure: MapFailurePolicy;
  /** The variable path of the list a map over a list runs its step for. */
  over?: string;
  /** The name each element is bound to (`item`). */
  as: string;
}

/** How one branch stands. */
export type BranchStatus = "pending" | "running" | "COMPLETE" | "FAILED" | "CANCELLED";

/** Context of a map actor. */
export interface MapContext extends MapInput {
  /** Branches in all. */
  total: number;
  /** The elements of the list, for a map over a list. */
  items: unknown[];
  branches: { status: BranchStatus; result?: TaskResult }[];
  /** Index of the next branch to start. */
  next: number;
  /** Branches running now. */
  running: number;
  /** Branches finished (whatever their status). */
  finished: number;
  /** Indexes of the failed branches, in the order they failed. */
  failedAt: number[];
  /** The list could not be read. */
  failure?: TaskResult;
}

/** What the `runBranch` actor evaluates: the node at `path` in `env`, its node paths reported under `scope`. */
export interface BranchInput {
  path: string;
  env: Env;
  /** `<map path>/map:<i>:` for the branches of a map over a list. */
  scope?: string;
  /** Branches not started before this one (itself included): it reserves its share of the budgets left for them. */
  parts: number;
}

/** The list a map over `over` runs for: a list value, or text holding a JSON list. */
export function listOf(env: Env, over: string): { items: unknown[] } | { error: string } {
  const found = find(env, over);
  if (!found.found) return { error: `over="${over}": no variable '${over}' is bound here` };
  let value = found.value;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value) as unknown;
    } catch (err) {
      return { error: `over="${over}": its text is not a JSON list (${messageOf(err)})` };
    }
  }
  if (!Array.isArray(value))
    return { error: `over="${over}": expected a list (a JSON array), got ${value === null ? "null" : typeof value}` };
  return { items: value };
}

function initial(input: MapInput): MapContext {
  const base = { ...input, items: [] as unknown[], next: 0, running: 0, finished: 0, failedAt: [] as number[] };
  if (input.over === undefined) return { ...base, total: input.stepCount, branches: pendingBranches(input.stepCount) };
  const list = listOf(input.env, input.over);
  if ("error" in list) {
    return { ...base, total: 0, branches: [], failure: taskFailure("input_validation_failure", list.error) };
  }
  return { ...base, items: list.items, total: list.items.length, branches: pendingBranches(list.items.length) };
}

const pendingBranches = (n: number) => Array.from({ length: n }, () => ({ status: "pending" as BranchStatus }));

/** The node path a branch is reported under. */
export function branchPath(context: Pick<MapContext, "path" | "over">, i: number): string {
  return context.over === undefined ? `${context.path}.steps.${i}` : `${context.path}/map:${i}`;
}

function branchInput(context: MapContext, i: number): BranchInput {
  const parts = context.total - i;
  if (context.over === undefined) return { path: `${context.path}.steps.${i}`, env: context.env, parts };
  const env = extend(context.env, { [context.as]: context.items[i], [`${context.as}_index`]: i });
  return { path: `${context.path}.steps.0`, env, scope: `${context.path}/map:${i}:`, parts };
}

/** One `step_results` entry per branch. */
export function stepResults(context: MapContext): StepResult[] {
  return context.branches.map((branch) => {
    const result = branch.result;
    if (!result) return { content: "", status: branch.status === "CANCELLED" ? "CANCELLED" : "NOT_STARTED" };
    // A failed branch's entry keeps its error, for the report.
    return { ...stepResultOf(result), ...(result.error ? { error: result.error } : {}) };
  });
}

function mapFailure(context: MapContext): TaskResult {
  // In branch order for the report; the first to fail is the cause.
  const failedOnes = [...context.failedAt].sort((x, y) => x - y);
  const firstFailed = context.failedAt[0] ?? 0;
  const first = context.branches[firstFailed]?.result;
  const why = (i: number) => context.branches[i]?.result?.error?.message ?? "no error given";
  const message =
    context.onFailure === "fail_fast"
      ? `branch ${firstFailed + 1}/${context.total} failed: ${why(firstFailed)}`
      : `${failedOnes.length} of ${context.total} branches failed: ${failedOnes.map((i) => `branch ${i + 1}: ${why(i)}`).join("; ")}`;
  const cancelled = context.branches.flatMap((b, i) => (b.status === "CANCELLED" ? [i + 1] : []));
  return compositeFailure(first?.error, message, {
    failedBranches: failedOnes.map((i) => i + 1),
    ...(cancelled.length > 0 ? { cancelledBranches: cancelled } : {}),
    totalBranches: context.total,
    partialResults: stepResults(context),
  });
}

function mapResult(context: MapContext): TaskResult {
  const results = stepResults(context);
  return {
    content: JSON.stringify(results.map((r) => r.content)),
    status: "COMPLETE",
    notes: { branches: context.total, step_results: results },
    parsedContent: results.map((r) => r.parsedContent ?? r.content),
  };
}

/** What the `branches` actor is sent: run one branch. Stopping the actor (leaving `running`) stops every branch still running. */
export type BranchCommand = { type: "branch.start"; index: number; input: BranchInput };
/** A branch's result (a branch that threw is a failed result). */
export type BranchDone = { type: "branch.done"; index: number; result: TaskResult };

/** The map's types and effects; its composed actions below are written against it, then named in {@link mapMachine}'s setup. */
const mapBase = setup({
  types: {
    input: {} as MapInput,
    context: {} as MapContext,
    events: {} as BranchDone | StartEvent,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
  },
  actors: {
    branches: fromCallback<BranchCommand, Scoped>(() => notProvided("map.branches")),
  },
});

const report = (context: MapContext, i: number, status: string, finished: number): ProgressParams => ({
  event: "branch.finished",
  message: `branch ${i + 1}/${context.total} ${status}`,
  data: { nodePath: branchPath(context, i), mapPath: context.path, branch: i + 1, total: context.total, status, finished },
});

/** Start branches until `max_parallel` run or none is left (none after a failure with fail_fast). */
const launch = mapBase.enqueueActions(({ context, enqueue }) => {
  if (context.onFailure === "fail_fast" && context.failedAt.length > 0) return;
  let next = context.next;
  let running = context.running;
  const branches = [...context.branches];
  for (; running < context.maxParallel && next < context.total; running++, next++) {
    branches[next] = { status: "running" };
    const i = next;
    enqueue({
      type: "progress",
      params: {
        event: "branch.started",
        message: `branch ${i + 1}/${context.total}`,
        data: { nodePath: branchPath(context, i), mapPath: context.path, branch: i + 1, total: context.total },
      },
    });
    enqueue.sendTo("branches", { type: "branch.start", index: i, input: branchInput(context, i) } satisfies BranchCommand);
  }
  enqueue.assign({ next, running, branches });
});

/** A branch finished: its result is kept, and reported with how many have finished. */
const settle = mapBase.enqueueActions(({ context, event, enqueue }) => {
  if (event.type !== "branch.done") return;
  const i = event.index;
  if (context.branches[i]?.status !== "running") return;
  const status = event.result.status === "COMPLETE" ? "COMPLETE" : "FAILED";
  const branches = [...context.branches];
  branches[i] = { status, result: event.result };
  const finished = context.finished + 1;
  enqueue.assign({
    branches,
    finished,
    running: context.running - 1,
    ...(status === "FAILED" ? { failedAt: [...context.failedAt, i] } : {}),
  });
  enqueue({ type: "progress", params: report(context, i, status, finished) });
});

/**
 * fail_fast: the running branches are reported cancelled (leaving `running` stops the `branches` actor, which stops
 * them); those not started never start.
 */
const cancelRunning = mapBase.enqueueActions(({ context, enqueue }) => {
  let finished = context.finished;
  const branches = context.branches.map((b, i) => {
    if (b.status !== "running") return b;
    finished++;
    enqueue({ type: "progress", params: report(context, i, "CANCELLED", finished) });
    return { status: "CANCELLED" as const };
  });
  enqueue.assign({ branches, finished, running: 0 });
});

/** The map machine. */
export const mapMachine = setup({
  types: {
    input: {} as MapInput,
    context: {} as MapContext,
    events: {} as BranchDone | StartEvent,
    output: {} as TaskResult,
  },
  actions: { progress: (_, _params: ProgressParams) => undefined, launch, settle, cancelRunning },
  actors: { branches: fromCallback<BranchCommand, Scoped>(() => notProvided("map.branches")) },
  guards: {
    unreadable: ({ context }) => context.failure !== undefined,
    empty: ({ context }) => context.total === 0,
    failFast: ({ context }) => context.onFailure === "fail_fast" && context.failedAt.length > 0,
    allFinished: ({ context }) => context.finished === context.total,
    anyFailed: ({ context }) => context.failedAt.length > 0,
  },
}).createMachine({
  id: "map",
  context: ({ input }) => initial(input),
  initial: "idle",
  states: {
    idle: idleUntilStarted("resolving"),
    resolving: {
      description: "Count the branches: the steps, or the elements of the list a map over a list runs for.",
      always: [{ guard: "unreadable", target: "failed" }, { guard: "empty", target: "done" }, { target: "running" }],
    },
    running: {
      description: "Branches run, at most max_parallel at once; each one that finishes frees its slot for the next.",
      invoke: { id: "branches", src: "branches", input: ({ context }) => ({ scopeKey: context.scopeKey }) },
      entry: [
        {
          type: "progress",
          params: ({ context }) => ({
            event: "map.started",
            message: `map started: ${context.total} branches, ${Math.min(context.maxParallel, context.total)} at once`,
            data: {
              nodePath: context.path,
              kind: "map",
              total: context.total,
              maxParallel: context.maxParallel,
              onFailure: context.onFailure,
            },
          }),
        },
        "launch",
      ],
      on: { "branch.done": { actions: ["settle", "launch"] } },
      always: [
        { guard: "failFast", target: "cancelling", actions: "cancelRunning" },
        { guard: "allFinished", target: "finishing" },
      ],
    },
    cancelling: {
      description: "fail_fast: a branch failed; the branches still running were stopped.",
      always: { target: "failed" },
    },
    finishing: {
      description: "Every branch finished: the map completes, or (collect) fails naming each failed branch.",
      always: [{ guard: "anyFailed", target: "failed" }, { target: "done" }],
    },
    done: { description: "Every branch completed.", type: "final" },
    failed: { description: "The list could not be read, or a branch failed.", type: "final" },
  },
  output: ({ context }) => context.failure ?? (context.failedAt.length > 0 ? mapFailure(context) : mapResult(context)),
});
