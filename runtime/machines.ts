/** Every XState machine of machines/, by name: the one list the diagram export, its docs and tests iterate. */
import type { AnyStateMachine } from "xstate";
import { checkmateMachine } from "../machines/checkmate.js";
import { continuationMachine } from "../machines/continuation.js";
import { directorEvaluatorMachine } from "../machines/director-evaluator.js";
import { evaluationMachine } from "../machines/evaluation.js";
import { handlerSessionMachine } from "../machines/handler-session.js";
import { memoryMachine } from "../machines/memory.js";
import { reduceMachine } from "../machines/reduce.js";
import { sequentialMachine } from "../machines/sequential.js";
import { taskMachine } from "../machines/task.js";
import { goalMachine } from "../machines/goal.js";
import { supervisorMachine } from "../machines/supervisor.js";

/** A machine and the name it is exported under (kebab-case, the base name of its file in machines/). */
export interface NamedMachine {
  /** File base name in machines/, e.g. `handler-session`; also the exported file name (`<name>.mmd`). */
  name: string;
  /** The machine definition. */
  machine: AnyStateMachine;
}

/** Every machine, in the order the docs show them. A new machine is one more line here. */
export const machines: readonly NamedMachine[] = [
  { name: "task", machine: taskMachine },
  { name: "evaluation", machine: evaluationMachine },
  { name: "sequential", machine: sequentialMachine },
  { name: "reduce", machine: reduceMachine },
  { name: "director-evaluator", machine: directorEvaluatorMachine },
  { name: "continuation", machine: continuationMachine },
  { name: "checkmate", machine: checkmateMachine },
  { name: "handler-session", machine: handlerSessionMachine },
  { name: "memory", machine: memoryMachine },
  { name: "goal", machine: goalMachine },
  { name: "supervisor", machine: supervisorMachine },
];
