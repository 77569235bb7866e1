/**
 * What the durability tests (test/integration/durability*.test.ts) share: the task they run, a fixed clock, a queued
 * task record, and a recorder of a task's event and result messages.
 */
import { createSubjects, decode, TaskEvent, TaskOutcome, type TaskRecord } from "../../protocol/index.js";
import { Recorder } from "./recorder.js";
import type { Stack } from "./stack.js";

/** A task the mock model answers "Paris". */
export const XML = `<task><description>Name the capital of {{country}}.</description><model>scripted-model</model></task>`;

/** A clock stopped at one instant. */
export const fixedNow = () => new Date("2026-11-22T10:00:00.000Z");

/** The record of a queued task (`XML` for France), with `extra` fields. */
export const queuedRecord = (taskId: string, extra: Partial<TaskRecord> = {}): TaskRecord => ({
  taskId: taskId as TaskRecord["taskId"],
  state: "queued",
  xml: XML,
  inputs: { country: "France" },
  submittedAt: fixedNow().toISOString(),
  updatedAt: fixedNow().toISOString(),
  ...extra,
});

/** Records every event and result message of a task on the stack's bus. */
export function watch(stack: Stack, taskId: string) {
  const events = new Recorder<TaskEvent>();
  const results = new Recorder<TaskOutcome>();
  const subjects = createSubjects(stack.root);
  stack.transport.bus.subscribe(subjects.taskEvents(taskId), (m) => {
    const d = decode(TaskEvent, m.data);
    if (d.ok) events.push(d.value);
  });
  stack.transport.bus.subscribe(subjects.taskResult(taskId), (m) => {
    const d = decode(TaskOutcome, m.data);
    if (d.ok) results.push(d.value);
  });
  return { events, results, subjects };
}

/** {@link watch}, once the server has the subscriptions: nothing published after this returns is missed. */
export async function follow(stack: Stack, taskId: string) {
  const watched = watch(stack, taskId);
  await stack.transport.bus.flush();
  return watched;
}
