/**
 * Task ids written by hand in tests. Checked like any id from outside, so a test cannot build one the runtime would
 * refuse at its boundaries.
 */
import { TaskId } from "../../protocol/index.js";

/** The task id `value`; throws when it is not one. */
export const tid = (value: string): TaskId => TaskId.parse(value);
