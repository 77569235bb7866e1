/**
 * The Evaluator's node records (protocol/node-records.ts): each evaluation of a node of a task is written to the
 * turns bucket when it ends, before its parent goes on, and announced as a `node.finished` event once stored. A
 * node's own model usage is what its Handler sessions answered; the sessions' record keys lead to their conversations.
 *
 * The write is sent as soon as the node ends, and the walk does not wait for it there: its next step is prepared
 * (actors made, inputs bound, a prompt substituted) while the write travels, and what goes out of the Evaluator
 * next (a Handler session or script, a Memory match, a compile, a question, an event) is held until every record
 * written so far is stored ({@link NodeRecorder.gate}). The task's answer waits for them all. So the round trip of
 * a record no longer adds to each step, and a parent still does nothing anyone can see before its child's record
 * is stored.
 */
import { recordDigest } from "../record-digest.js";
import { find, type Env } from "../../machines/language/env.js";
import type { StepNode } from "../../machines/language/ast.js";
import {
  boundValue,
  boundValues,
  cutText,
  encode,
  EVENT_TEXT_MAX,
  NODE_RECORD_VERSION,
  NodeRecord,
  RECORD_TEXT_MAX,
  RECORD_VALUE_MAX,
  Usage,
  type NodeFinishedEventData,
  type NodeState,
  type ReplayedNode,
  type SessionState,
  type TaskResult,
  type TaskId,
} from "../../protocol/index.js";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import type { TaskStore } from "../bus.js";
import { messageOf, type Logger } from "../deps.js";
import { sessionKey } from "./budget.js";
import { maskDeep, type Masker } from "../secrets.js";

/** The key of the record of the `occurrence`th evaluation of node `path` of task `taskId`. */
export function nodeKey(taskId: TaskId, path: string, occurrence: number): string {
  return `${taskId}.node.${recordDigest([path, occurrence])}`;
}

/** The KV filter of every node record of task `taskId`. */
export const nodeKeys = (taskId: TaskId): string => `${taskId}.node.*`;

/** The replayed evaluations of a fork's walk, looked up by path and occurrence (actors/fork/replay.ts). */
export interface Replays {
  /** The plan's entry for the `occurrence`th evaluation of `path`, when it is replayed. */
  find(path: string, occurrence: number): ReplayedNode | undefined;
  /** Answers `node` from the original's record; its nested nodes' records are copied first. */
  replay(node: ReplayedNode): Promise<TaskResult>;
}

/** A call a walk makes out of the Evaluator. */
type Outbound = (...args: never[]) => Promise<unknown>;

/** The effects of a walk that reach outside the Evaluator (actors/evaluator/walk.ts's `Walk`), held by {@link NodeRecorder.gate}. */
export interface WalkEffects {
  progress(event: string, message: string, data?: Record<string, unknown>): void;
  execute: Outbound;
  resume: Outbound;
  script: Outbound;
  waitForInput: Outbound;
  compile?: Outbound | undefined;
  memoryMatch?: Outbound | undefined;
}

/** Records the nodes of one task's walk. */
export interface NodeRecorder {
  /**
   * A Handler session of the node at `path` answered: its record key (when recorded) and its result (with the session
   * when it suspended for a CONTINUATION). `from`: the suspended session this call resumed, whose use up to then an
   * earlier call already counted (a resumed session's usage and cost are its running totals).
   */
  session(path: string, key: string | undefined, result: SuspendedResult, from?: SessionState): void;
  /**
   * Evaluates the node at `path` by `evaluate` (which answers its result and its environment after binding), then
   * sends its record and, once stored, publishes `node.finished`. The outermost node of the walk (the task's root)
   * returns once every record of the walk is stored and announced; an inner one at once, its parent's next effects
   * held by {@link gate} until then.
   */
  record(path: string, node: StepNode, evaluate: () => Promise<{ result: TaskResult; env?: Env }>): Promise<TaskResult>;
  /**
   * `walk` with its effects held until the records sent before each is called are stored and their `node.finished`
   * published: its progress events queue behind them in order, its calls start after them.
   */
  gate<W extends WalkEffects>(walk: W): W;
}

/** What a {@link NodeRecorder} works with. */
export interface NodeRecorderEnv {
  taskId: TaskId;
  /** The turns bucket; absent: nothing is written, `node.finished` is still published. */
  store?: TaskStore | undefined;
  log: Logger;
  now(): Date;
  /** Masks the secrets this process knows. */
  mask: Masker;
  progress(event: string, message: string, data: Record<string, unknown>): void;
  /** A fork's nodes answered from the original's records (actors/fork/replay.ts); absent: every node runs. */
  replays?: Replays | undefined;
}

interface Own {
  keys: string[];
  usage?: Usage;
  cost?: number;
  models: string[];
}

/** The {@link NodeRecorder} of one walk of a task. */
export function nodeRecorder(env: NodeRecorderEnv): NodeRecorder {
  return new WalkRecords(env);
}

/**
 * A task in flight keeps its recorder and a record call per node being evaluated: a class and a promise callback
 * rather than closures and async frames, so that a task waiting on its model holds little.
 */
class WalkRecords implements NodeRecorder {
  readonly #env: NodeRecorderEnv;
  readonly #occurrences = new Map<string, number>();
  /**
   * What the Handler sessions of the nodes running answered, by path. Made when first written, as is
   * `#suspendedCost`: while a task waits on its first model call both are empty, and an empty Map is 0.2 KB.
   */
  #own: Map<string, Own> | undefined;
  /** The cost of each suspended session so far, by {@link sessionKey}: a resumed session's cost is its running total. */
  #suspendedCost: Map<string, number> | undefined;
  /** Nodes being evaluated: when the last one ends, it is the walk's outermost. */
  #evaluating = 0;
  /**
   * What goes out of the walk, in order: each record's write followed by its `node.finished`, and the progress
   * events published while one is pending. `#queued` counts the items not done yet; at 0 nothing waits.
   */
  #outbox: Promise<void> = Promise.resolve();
  #queued = 0;

  constructor(env: NodeRecorderEnv) {
    this.#env = env;
  }

  #enqueue(item: () => void | Promise<void>): void {
    this.#queued++;
    this.#outbox = this.#outbox
      .then(item)
      .catch((err: unknown) => this.#env.log.warn({ taskId: this.#env.taskId, err: messageOf(err) }, "progress of the walk not published"))
      .finally(() => void this.#queued--);
  }

  /** `call` once everything queued so far has gone out; at once when nothing is. */
  #after<T>(call: () => Promise<T>): Promise<T> {
    return this.#queued === 0 ? call() : this.#outbox.then(call);
  }

  gate<W extends WalkEffects>(walk: W): W {
    // Changed in place: the walk is the Evaluator's own object, made for this task.
    const effects: WalkEffects = walk;
    const held =
      (call: Outbound): Outbound =>
      (...args) =>
        this.#after(() => call(...args));
    const { progress } = effects;
    effects.progress = (event, message, data) =>
      this.#queued === 0 ? progress(event, message, data) : this.#enqueue(() => progress(event, message, data));
    effects.execute = held(effects.execute);
    effects.resume = held(effects.resume);
    effects.script = held(effects.script);
    effects.waitForInput = held(effects.waitForInput);
    if (effects.compile) effects.compile = held(effects.compile);
    if (effects.memoryMatch) effects.memoryMatch = held(effects.memoryMatch);
    return walk;
  }

  session(path: string, key: string | undefined, result: SuspendedResult, from?: SessionState): void {
    const own = (this.#own ??= new Map());
    const entry = own.get(path) ?? { keys: [], models: [] };
    own.set(path, entry);
    if (key !== undefined && !entry.keys.includes(key)) entry.keys.push(key);
    const usage = Usage.safeParse(result.notes["usage"]);
    if (usage.success)
      entry.usage = {
        promptTokens: (entry.usage?.promptTokens ?? 0) + Math.max(0, usage.data.promptTokens - (from?.usage.promptTokens ?? 0)),
        completionTokens:
          (entry.usage?.completionTokens ?? 0) + Math.max(0, usage.data.completionTokens - (from?.usage.completionTokens ?? 0)),
      };
    const suspendedCost = (this.#suspendedCost ??= new Map());
    const before = from ? (suspendedCost.get(sessionKey(path, from)) ?? 0) : 0;
    if (from) suspendedCost.delete(sessionKey(path, from));
    const cost = result.notes["cost"];
    const priced = typeof cost === "number" && Number.isFinite(cost) && cost >= 0;
    if (priced) entry.cost = (entry.cost ?? 0) + Math.max(0, cost - before);
    if (result.session) suspendedCost.set(sessionKey(path, result.session), priced ? cost : 0);
    const model = result.notes["model"];
    if (typeof model === "string" && !entry.models.includes(model)) entry.models.push(model);
  }

  record(path: string, node: StepNode, evaluate: () => Promise<{ result: TaskResult; env?: Env }>): Promise<TaskResult> {
    const occurrences = this.#occurrences;
    const occurrence = (occurrences.get(path) ?? 0) + 1;
    occurrences.set(path, occurrence);
    const { replays } = this.#env;
    const replayed = replays?.find(path, occurrence);
    if (replays && replayed) {
      // The nodes evaluated within it in the original count as evaluated: a later evaluation of one is the next.
      for (const inner of replayed.nested ?? []) occurrences.set(inner.path, Math.max(occurrences.get(inner.path) ?? 0, inner.occurrence));
      // Its copies and their events come after the records of the nodes before it.
      return this.#after(() => replays.replay(replayed));
    }
    const started = this.#env.now();
    this.#own?.delete(path);
    this.#evaluating++;
    let evaluating: Promise<{ result: TaskResult; env?: Env }>;
    try {
      evaluating = evaluate();
    } catch (err) {
      this.#evaluating--;
      return Promise.reject(err);
    }
    return evaluating.then(
      (evaluated) => {
        this.#evaluating--;
        return this.#recorded(path, occurrence, node, evaluated, started);
      },
      (err: unknown) => {
        this.#evaluating--;
        throw err;
      },
    );
  }

  /** Sends the record of a node evaluated, queues its `node.finished`; the outermost waits for all to go out. */
  #recorded(
    path: string,
    occurrence: number,
    node: StepNode,
    { result, env: bound }: { result: TaskResult; env?: Env },
    started: Date,
  ): TaskResult | Promise<TaskResult> {
    const env = this.#env;
    const ended = env.now();
    const mine = this.#own?.get(path);
    this.#own?.delete(path);
    const masked = maskDeep(recordOf(env.taskId, path, occurrence, node, result, bound, mine, started, ended), env.mask);
    // Sent now, in the same tick as whatever the walk sends next; `node.finished` once it is stored.
    const written = env.store?.put(nodeKey(env.taskId, path, occurrence), encode(NodeRecord, masked)).catch((err: unknown) => {
      env.log.warn({ taskId: env.taskId, path, err: messageOf(err) }, "node record not written");
    });
    const data: NodeFinishedEventData = {
      nodePath: path,
      occurrence,
      name: masked.name,
      kind: masked.kind,
      status: result.status,
      durationMs: masked.durationMs,
      ...(masked.usage ? { usage: masked.usage } : {}),
      ...(masked.cost === undefined ? {} : { cost: masked.cost }),
      preview: cutText(masked.error ? (errorMessage(masked.error) ?? "") : masked.output.content, EVENT_TEXT_MAX),
    };
    const message = `${masked.name}: ${result.status} in ${formatMs(masked.durationMs)}`;
    this.#enqueue(async () => {
      await written;
      env.progress("node.finished", message, data);
    });
    // The task's root: its answer goes once every record of the walk is stored and announced.
    return this.#evaluating === 0 ? this.#outbox.then(() => result) : result;
  }
}

function recordOf(
  taskId: TaskId,
  path: string,
  occurrence: number,
  node: StepNode,
  result: TaskResult,
  bound: Env | undefined,
  mine: Own | undefined,
  started: Date,
  ended: Date,
): NodeRecord {
  const inputs = bound && node.kind === "task" && node.inputs.length > 0 ? inputsOf(node.inputs, bound) : undefined;
  return {
    v: NODE_RECORD_VERSION,
    taskId: taskId as NodeRecord["taskId"],
    path,
    occurrence,
    name: nodeName(node, path, bound),
    kind: kindOf(node),
    state: stateOf(result),
    startedAt: started.toISOString(),
    endedAt: ended.toISOString(),
    durationMs: Math.max(0, ended.getTime() - started.getTime()),
    ...(inputs ? { inputs } : {}),
    output: {
      status: result.status,
      content: cutText(result.content, RECORD_TEXT_MAX),
      ...(result.content.length > RECORD_TEXT_MAX ? { contentTruncated: true } : {}),
      notes: boundValues(result.notes, RECORD_VALUE_MAX),
      ...(result.parsedContent === undefined ? {} : { parsedContent: boundValue(result.parsedContent, RECORD_VALUE_MAX) }),
    },
    ...(result.error ? { error: boundError(result.error) } : {}),
    ...(mine?.usage ? { usage: mine.usage } : {}),
    ...(mine?.cost === undefined ? {} : { cost: mine.cost }),
    ...(mine && mine.models.length > 0 ? { models: mine.models } : {}),
    ...(mine && mine.keys.length > 0 ? { sessions: mine.keys } : {}),
  };
}

function inputsOf(inputs: readonly { name: string }[], bound: Env): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const input of inputs) {
    const found = find(bound, input.name);
    if (found.found) out[input.name] = boundValue(found.value, RECORD_VALUE_MAX);
  }
  return out;
}

function boundError(error: NonNullable<TaskResult["error"]>): NonNullable<TaskResult["error"]> {
  const message = errorMessage(error);
  return message === undefined ? error : { ...error, message: cutText(message, RECORD_TEXT_MAX) };
}

const errorMessage = (error: NonNullable<TaskResult["error"]>): string | undefined =>
  "message" in error && typeof error.message === "string" ? error.message : undefined;

function stateOf(result: TaskResult): NodeState {
  if (result.status === "COMPLETE") return "completed";
  if (result.status === "CONTINUATION") return "suspended";
  const halted = result.error?.type === "TASK_FAILURE" && result.error.reason === "execution_halted";
  return halted ? "cancelled" : "failed";
}

/** What a node is: its task type, `call`, `cond`, or its element name. */
export function kindOf(node: StepNode): string {
  return node.kind === "task" ? node.type : node.kind === "element" ? node.name : node.kind;
}

/** Words of a description a name keeps. */
const NAME_WORDS = 6;

/**
 * A node's name: its place among its parent's children (`step 2`, `input 1`, `branch 3`, `director`, …) and what the
 * template calls it: its `name` or `id` attribute, else the first words of its description or instructions, else its
 * kind. `step 2 · summarise the notes`. Placeholders are left out, but for a description of placeholders only (a
 * subtask's `{{description}}`), whose words are their text values in `env`, the node's environment.
 */
export function nodeName(node: StepNode, path: string, env?: Env): string {
  const label = labelOf(node, env);
  const place = placeOf(path);
  return place === undefined ? label : `${place} · ${label}`;
}

/** The words of `text` (no word of punctuation only: a placeholder left out may leave its punctuation alone). */
const wordsOf = (text: string) => text.split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w));

function labelOf(node: StepNode, env: Env | undefined): string {
  switch (node.kind) {
    case "task": {
      const named = node.name ?? node.attributes["id"] ?? node.attributes["name"];
      if (named?.trim()) return named.trim();
      const described = node.description ?? node.instructions ?? "";
      let words = wordsOf(described.replace(/\{\{[^}]*\}\}/g, " "));
      if (words.length === 0 && env)
        words = wordsOf(
          described.replace(/\{\{\s*([\w.]+)\s*\}\}/g, (_, name: string) => {
            const found = find(env, name);
            return found.found && typeof found.value === "string" ? ` ${found.value} ` : " ";
          }),
        );
      if (words.length === 0) return node.ref ? `ref ${node.ref}` : node.type;
      const first = words.slice(0, NAME_WORDS).join(" ");
      return `${first.replace(/[.,;:!?]+$/, "")}${words.length > NAME_WORDS ? " …" : ""}`.toLowerCase();
    }
    case "call":
      return `call ${node.templateName}`;
    case "cond":
      return "cond";
    case "element":
      return node.name;
  }
}

/** The node's place in its parent, read from the end of its path. */
function placeOf(path: string): string | undefined {
  // A branch of a map over a list: the map's one step under the scope `<map path>/map:<i>:`.
  const branch = /^(.*)\/map:(\d+):([^/]*)$/.exec(path);
  if (branch && branch[3] === `${branch[1]?.slice(branch[1].lastIndexOf(":") + 1)}.steps.0`) return `branch ${Number(branch[2]) + 1}`;
  // The root of a subtask's template: `<path>/subtask<n>:0` (run_subtask) or `<path>/spawn<n>:0` (spawn_subtask).
  const subtask = /\/(subtask|spawn)(\d+):0$/.exec(path);
  if (subtask) return `${subtask[1] === "spawn" ? "spawned subtask" : "subtask"} ${subtask[2]}`;
  const last = /\.(steps|inputs|cases|args)\.(\d+)(?:\.(?:task|value|body))?$/.exec(path);
  if (last) {
    const n = Number(last[2]) + 1;
    return { steps: `step ${n}`, inputs: `input ${n}`, cases: `case ${n}`, args: `argument ${n}` }[last[1] as "steps"];
  }
  const field = /\.(director|evaluator|scriptExecution|initialValue)(?:\.task)?$/.exec(path);
  if (field) return field[1] === "scriptExecution" ? "script" : field[1] === "initialValue" ? "initial value" : field[1];
  return undefined;
}

function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Evaluates a node by `evaluate`, recorded when its walk records its nodes (`scope`: the walk's path prefix). */
export function recordedNode(
  walk: { records?: NodeRecorder | undefined; scope?: string | undefined },
  path: string,
  node: StepNode,
  evaluate: () => Promise<{ result: TaskResult; env?: Env }>,
): Promise<TaskResult> {
  if (!walk.records) return evaluate().then((evaluated) => evaluated.result);
  return walk.records.record(`${walk.scope ?? ""}${path}`, node, evaluate);
}
