import { expect, it } from "vitest";
import { TaskId, type TaskEvent } from "../../protocol/index.js";
import { firstComing } from "../../runtime/event-repeats.js";

const taskId = TaskId.parse("t1");
const event = (seq: number, type = "model.turn", at = `2026-11-29T10:00:00.00${seq % 10}Z`): TaskEvent => ({
  taskId,
  seq,
  type,
  state: "running",
  at,
});

it("is true for an event the first time and false when the same event comes again", () => {
  const fresh = firstComing();
  expect([event(1), event(2), event(2), event(1)].map(fresh)).toEqual([true, true, false, false]);
});

it("keeps two events that share a number but differ in type or time", () => {
  const fresh = firstComing();
  expect([event(3), event(3, "task.resumed"), event(3, "model.turn", "2026-11-29T10:00:09.000Z")].map(fresh)).toEqual([true, true, true]);
});

it("remembers only the latest events it was told to", () => {
  const fresh = firstComing(2);
  expect([event(1), event(2), event(3)].map(fresh)).toEqual([true, true, true]);
  // 1 was forgotten when 3 came; 2 and 3 are still remembered.
  expect([event(3), event(2), event(1)].map(fresh)).toEqual([false, false, true]);
});
