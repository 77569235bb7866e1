/**
 * The request/reply subjects of the runtime, each declared once: the subject a request goes to, the subject its
 * responders subscribe to, the schema of its body and the schema of its answer. `ask` (actors/ask.ts) and `serve`
 * (actors/serve.ts) take a definition, so the compiler checks the sender's body and the responder's answer against
 * the same schemas, and both ends validate with them at run time. Subjects are still spelled in subjects.ts only.
 */
import { z } from "zod";
import { CompileReply, CompileRequest } from "./compiler.js";
import { TakeoverNotice, TakeoverReply, UserInput, UserInputReply } from "./control.js";
import { EvaluateReply, EvaluateRequest } from "./evaluator.js";
import { GoalGetReply, GoalListReply, GoalReply, GoalSubmitRequest } from "./goals.js";
import { ExecuteReply, ExecuteRequest, ScriptReply, ScriptRequest } from "./handler.js";
import { PingReply, PingRequest } from "./health.js";
import { MatchReply, MatchRequest } from "./memory.js";
import { NodeDetailReply, NodeGetRequest, NodeListReply } from "./node-records.js";
import { RerunReply, RerunRequest } from "./rerun.js";
import type { Subjects } from "./subjects.js";
import { CancelReply, SubmitReply, SubmitRequest, TaskStatusReply } from "./tasks.js";

/**
 * One request/reply subject. The sender's body has the request schema's input type (the responder decodes it, so
 * defaults and transforms are applied there); the responder's handler gets its output type. The answer is the reply
 * schema's output for the sender, its input for the responder, or an `ErrorReply` instead.
 */
export interface RequestDefinition<Req extends z.ZodType = z.ZodType, Rep extends z.ZodType = z.ZodType, Key extends string[] = []> {
  /** Its name in logs and docs, e.g. `handler.execute`. */
  readonly name: string;
  /** The schema of the body. */
  readonly request: Req;
  /** The schema of the answer (an `ErrorReply` may come instead). */
  readonly reply: Rep;
  /** The body is not read: the answer depends on the subject alone, so any body, JSON or not, is a request. */
  readonly anyBody: boolean;
  /**
   * A call from a role of the same process (actors/local.ts) is handed over and answered as it is, unvalidated: it
   * never left the process, and its schemas apply no defaults or transforms (test/unit/local.test.ts checks them), so
   * validating it again would only copy it. Over NATS it is decoded and validated as any message.
   */
  readonly localAsIs: boolean;
  /** The subject one request goes to; a request about one task or goal takes its id. */
  subjectOf(subjects: Subjects, ...key: Key): string;
  /** The subject responders subscribe to: the same, or a wildcard over the ids. */
  servedOn(subjects: Subjects): string;
  /** This request about one task or goal: a definition whose subject needs no id. */
  at(...key: Key): RequestDefinition<Req, Rep>;
}

/** Any definition, whatever its schemas and key. */
export type AnyRequestDefinition = RequestDefinition<z.ZodType, z.ZodType, [] | [id: string]>;

/** The body type a sender passes for `D`. */
export type RequestBody<D extends AnyRequestDefinition> = z.input<D["request"]>;
/** The answer type a sender gets for `D`. */
export type ReplyOf<D extends AnyRequestDefinition> = z.output<D["reply"]>;

/** Options of {@link defineRequest}. */
interface DefineOptions {
  /** The body is not read (see {@link RequestDefinition.anyBody}). */
  anyBody?: boolean;
  /** A local call goes unvalidated (see {@link RequestDefinition.localAsIs}). */
  localAsIs?: boolean;
}

/** Declares a request whose subject is fixed; responders subscribe to that subject. */
export function defineRequest<Req extends z.ZodType, Rep extends z.ZodType>(
  name: string,
  subjectOf: (subjects: Subjects) => string,
  request: Req,
  reply: Rep,
  options: DefineOptions = {},
): RequestDefinition<Req, Rep> {
  return definition(name, subjectOf, subjectOf, request, reply, options);
}

/** Declares a request about one task or goal: `subjectOf` takes its id, responders subscribe to `servedOn` (a wildcard). */
export function defineRequestById<Req extends z.ZodType, Rep extends z.ZodType>(
  name: string,
  subjectOf: (subjects: Subjects, id: string) => string,
  servedOn: (subjects: Subjects) => string,
  request: Req,
  reply: Rep,
  options: DefineOptions = {},
): RequestDefinition<Req, Rep, [id: string]> {
  return definition(name, subjectOf, servedOn, request, reply, options);
}

function definition<Req extends z.ZodType, Rep extends z.ZodType, Key extends string[]>(
  name: string,
  subjectOf: (subjects: Subjects, ...key: Key) => string,
  servedOn: (subjects: Subjects) => string,
  request: Req,
  reply: Rep,
  options: DefineOptions,
): RequestDefinition<Req, Rep, Key> {
  const anyBody = options.anyBody === true;
  const localAsIs = options.localAsIs === true;
  const at = (...key: Key): RequestDefinition<Req, Rep> => {
    const addressed: RequestDefinition<Req, Rep> = {
      name,
      request,
      reply,
      anyBody,
      localAsIs,
      subjectOf: (subjects) => subjectOf(subjects, ...key),
      servedOn,
      at: () => addressed,
    };
    return addressed;
  };
  return { name, request, reply, anyBody, localAsIs, subjectOf, servedOn, at };
}

/** The body of a request whose body is not read: senders send `{}`. */
export const NoBody = z.object({});
export type NoBody = z.infer<typeof NoBody>;

/**
 * Every request/reply subject of the runtime, keyed like its subject in subjects.ts. The Director's submit, get and
 * cancel, the Evaluator's input and the ping are answered by subscriptions of their own (not `serve`: raw XML
 * bodies, many answers), which use these schemas and subjects all the same.
 */
export const Requests = {
  /** Public: submit a task; a raw XML body is accepted too (the Director's own decoding). */
  submit: defineRequest("tasks.submit", (s) => s.submit, SubmitRequest, SubmitReply),
  /** Public: a task's state and result. */
  taskGet: defineRequestById(
    "tasks.get",
    (s, id) => s.taskGet(id),
    (s) => s.anyTaskGet,
    NoBody,
    TaskStatusReply,
    { anyBody: true },
  ),
  /** Public: cancel a task. */
  taskCancel: defineRequestById(
    "tasks.cancel",
    (s, id) => s.taskCancel(id),
    (s) => s.anyTaskCancel,
    NoBody,
    CancelReply,
    { anyBody: true },
  ),
  /** Public: the records of a task's nodes, listed. */
  taskNodes: defineRequestById(
    "tasks.nodes",
    (s, id) => s.taskNodes(id),
    (s) => s.anyTaskNodes,
    NoBody,
    NodeListReply,
    { anyBody: true },
  ),
  /** Public: one node's record, with the conversations of its sessions. */
  taskNode: defineRequestById(
    "tasks.node",
    (s, id) => s.taskNode(id),
    (s) => s.anyTaskNode,
    NodeGetRequest,
    NodeDetailReply,
  ),
  /** Public: a new task forked from a finished one, its nodes before `from` answered from the original's records. */
  taskRerun: defineRequestById(
    "tasks.rerun",
    (s, id) => s.taskRerun(id),
    (s) => s.anyTaskRerun,
    RerunRequest,
    RerunReply,
  ),
  /** Public: the answer to a task's pending `request_user_input`; only the Evaluator waiting for it subscribes. */
  taskInput: defineRequestById(
    "tasks.input",
    (s, id) => s.taskInput(id),
    (s) => s.anyTaskInput,
    UserInput,
    UserInputReply,
  ),
  /** Internal: Director → Evaluator. */
  evaluate: defineRequest("evaluator.evaluate", (s) => s.evaluate, EvaluateRequest, EvaluateReply, { localAsIs: true }),
  /** Internal: Director → the Director whose claim on a task it replaced, addressed by that Director's owner id. */
  directorTakeover: defineRequestById(
    "director.takeover",
    (s, owner) => s.directorTakeover(owner),
    (s) => s.anyDirectorTakeover,
    TakeoverNotice,
    TakeoverReply,
  ),
  /** Internal: Evaluator → Handler, an atomic task. */
  execute: defineRequest("handler.execute", (s) => s.execute, ExecuteRequest, ExecuteReply, { localAsIs: true }),
  /** Internal: Evaluator → Handler, one command of a `script` task. */
  script: defineRequest("handler.script", (s) => s.script, ScriptRequest, ScriptReply),
  /** Internal: Evaluator → Memory. */
  memoryMatch: defineRequest("memory.match", (s) => s.memoryMatch, MatchRequest, MatchReply),
  /** Public: a request in words → a template, or a failed node → a sub-tree. */
  compile: defineRequest("compiler.compile", (s) => s.compile, CompileRequest, CompileReply),
  /** Public: submit a goal. */
  goalsSubmit: defineRequest("goals.submit", (s) => s.goalsSubmit, GoalSubmitRequest, GoalReply),
  /** Public: list the goals. */
  goalsList: defineRequest("goals.list", (s) => s.goalsList, NoBody, GoalListReply, { anyBody: true }),
  /** Public: a goal with its sub-goals. */
  goalGet: defineRequestById(
    "goals.get",
    (s, id) => s.goalGet(id),
    (s) => s.anyGoalRequest("get"),
    NoBody,
    GoalGetReply,
    { anyBody: true },
  ),
  /** Public: resume a paused goal. */
  goalResume: defineRequestById(
    "goals.resume",
    (s, id) => s.goalResume(id),
    (s) => s.anyGoalRequest("resume"),
    NoBody,
    GoalReply,
    { anyBody: true },
  ),
  /** Public: cancel a goal and its tasks. */
  goalCancel: defineRequestById(
    "goals.cancel",
    (s, id) => s.goalCancel(id),
    (s) => s.anyGoalRequest("cancel"),
    NoBody,
    GoalReply,
    { anyBody: true },
  ),
  /** Public: liveness; every process answers (no queue group), an empty body is `{}`. */
  ping: defineRequest("ping", (s) => s.ping, PingRequest, PingReply),
} as const;
