/** Every XState machine of machines/, by name: the one list the diagram export, its docs and tests iterate. */
import type { AnyStateMachine } from "xstate";
import { checkmateMachine } from "../../machines/evaluator/checkmate.js";
import { continuationMachine } from "../../machines/evaluator/continuation.js";
import { directorEvaluatorMachine } from "../../machines/evaluator/loop.js";
import { evaluationMachine } from "../../machines/evaluator/evaluation.js";
import { handlerSessionMachine } from "../../machines/handler/session.js";
import { memoryMachine } from "../../machines/memory/memory.js";
import { reduceMachine } from "../../machines/evaluator/reduce.js";
import { mapMachine } from "../../machines/evaluator/map.js";
import { sequentialMachine } from "../../machines/evaluator/sequential.js";
import { runMachine } from "../../machines/director/run.js";
import { taskMachine } from "../../machines/director/task.js";
import { goalMachine } from "../../machines/supervisor/goal.js";
import { supervisorMachine } from "../../machines/supervisor/supervisor.js";

/** A machine, the name it is exported under and the file of machines/ that defines it. */
export interface NamedMachine {
  /** Kebab-case name, e.g. `handler-session`; also the exported file name (`<name>.mmd`). */
  name: string;
  /** The defining file, relative to machines/ (e.g. `handler/session.ts`): one folder per role. */
  file: string;
  /** The machine definition. */
  machine: AnyStateMachine;
}

/** Every machine, in the order the docs show them. A new machine is one more line here. */
export const machines: readonly NamedMachine[] = [
  { name: "run", file: "director/run.ts", machine: runMachine },
  { name: "task", file: "director/task.ts", machine: taskMachine },
  { name: "evaluation", file: "evaluator/evaluation.ts", machine: evaluationMachine },
  { name: "sequential", file: "evaluator/sequential.ts", machine: sequentialMachine },
  { name: "map", file: "evaluator/map.ts", machine: mapMachine },
  { name: "reduce", file: "evaluator/reduce.ts", machine: reduceMachine },
  { name: "director-evaluator", file: "evaluator/loop.ts", machine: directorEvaluatorMachine },
  { name: "continuation", file: "evaluator/continuation.ts", machine: continuationMachine },
  { name: "checkmate", file: "evaluator/checkmate.ts", machine: checkmateMachine },
  { name: "handler-session", file: "handler/session.ts", machine: handlerSessionMachine },
  { name: "memory", file: "memory/memory.ts", machine: memoryMachine },
  { name: "goal", file: "supervisor/goal.ts", machine: goalMachine },
  { name: "supervisor", file: "supervisor/supervisor.ts", machine: supervisorMachine },
];
