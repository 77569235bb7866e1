import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClaimsDue } from "../../actors/director/claims-due.js";
import type { RunActor } from "../../actors/director/run-actors.js";

/** A stand-in run actor that notes the events it is sent. */
function fakeRun(name: string, sent: string[]): RunActor {
  return { send: (event: { type: string }) => void sent.push(`${name}:${event.type}`) } as unknown as RunActor;
}

describe("ClaimsDue (one clock for the pending claims of a Director's runs)", () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it("tells each run `claim.due` once its delay passed since it was added, in the order added", () => {
    const sent: string[] = [];
    const due = new ClaimsDue(1000);
    due.add(fakeRun("a", sent));
    vi.advanceTimersByTime(400);
    due.add(fakeRun("b", sent));
    vi.advanceTimersByTime(599);
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual(["a:claim.due"]);
    vi.advanceTimersByTime(399);
    expect(sent).toEqual(["a:claim.due"]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual(["a:claim.due", "b:claim.due"]);
    // Told once: nothing more comes.
    vi.advanceTimersByTime(5000);
    expect(sent).toHaveLength(2);
  });

  it("tells nothing to a run deleted (ended) before its delay passed, nor to any once stopped", () => {
    const sent: string[] = [];
    const due = new ClaimsDue(1000);
    const a = fakeRun("a", sent);
    due.add(a);
    due.add(fakeRun("b", sent));
    due.delete(a);
    vi.advanceTimersByTime(1000);
    expect(sent).toEqual(["b:claim.due"]);
    due.add(fakeRun("c", sent));
    due.stop();
    vi.advanceTimersByTime(2000);
    expect(sent).toEqual(["b:claim.due"]);
  });
});
