/**
 * When a Director about to ask its Evaluator again gives up the task (actors/director/records.ts claimLostBy): only on
 * a record newer than its own last write that is not its claim. A read answered by a replica still catching up after
 * a leader election (no record yet, or an older revision) is no proof, and a task failed on it in the three-node
 * cluster test.
 */
import { describe, expect, it } from "vitest";
import { claimLostBy, pendingClaim, type Claim } from "../../actors/director/records.js";
import type { TaskRecord } from "../../protocol/index.js";
import { fixedNow, queuedRecord } from "../support/durability.js";

const queued = queuedRecord("t-lost");
const stored = (): Claim => {
  const claim = pendingClaim(queued, "director-a", fixedNow, 7);
  claim.pending = false;
  claim.written = { record: claim.record, revision: 12 };
  return claim;
};
const other = (extra: Partial<TaskRecord> = {}): TaskRecord => ({
  ...queued,
  state: "running",
  owner: "director-b",
  claimedAt: "2026-11-22T10:05:00.000Z",
  ...extra,
});

describe("claimLostBy", () => {
  it("is not lost on a read that found no record, whether the claim is stored or pending", () => {
    expect(claimLostBy(undefined, stored())).toBe(false);
    expect(claimLostBy(undefined, pendingClaim(queued, "director-a", fixedNow, 7))).toBe(false);
  });

  it("is not lost on the claim's own record, at its revision or later", () => {
    const claim = stored();
    expect(claimLostBy({ record: claim.record, revision: 12 }, claim)).toBe(false);
    expect(claimLostBy({ record: { ...claim.record, seq: 5 }, revision: 15 }, claim)).toBe(false);
  });

  it("is not lost on an older revision than its own last write (a stale replica)", () => {
    expect(claimLostBy({ record: queued, revision: 3 }, stored())).toBe(false);
    expect(claimLostBy({ record: other(), revision: 11 }, stored())).toBe(false);
  });

  it("is lost on a newer record of another owner, or its own record made final", () => {
    const claim = stored();
    expect(claimLostBy({ record: other(), revision: 13 }, claim)).toBe(true);
    expect(claimLostBy({ record: { ...claim.record, state: "cancelled" }, revision: 14 }, claim)).toBe(true);
  });

  it("is lost, for a claim not stored yet, on any record that is not its own", () => {
    expect(claimLostBy({ record: other(), revision: 2 }, pendingClaim(queued, "director-a", fixedNow, 7))).toBe(true);
  });
});
