/**
 * `dirigent goal …` and `dirigent alerts` as a user runs them, against a runtime on a real nats-server with the
 * scripted model.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";
import { startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
let flags: string[];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        {
          match: { lastUser: { regex: "Decompose this goal[\\s\\S]*GOAL-CLI" } },
          reply: JSON.stringify({
            subGoals: [
              { id: "1", description: "CLI-STEP-ONE" },
              { id: "2", description: "CLI-STEP-TWO", dependsOn: ["1"] },
            ],
          }),
        },
        {
          match: { lastUser: { regex: "Decompose this goal[\\s\\S]*GOAL-BROKEN" } },
          reply: JSON.stringify({ subGoals: [{ description: "BROKEN-STEP" }] }),
        },
        {
          match: { lastUser: { regex: "Does this outcome diverge" } },
          reply: JSON.stringify({ divergent: false, severity: "none", reason: "fine" }),
        },
        { match: { lastUser: "BROKEN-STEP" }, status: 500 },
      ],
    },
  });
  stack = await startStack({ url: server.url, mock, config: { supervisorTickMs: 200, supervisorStaggerMs: 0 } });
  flags = ["--nats", server.url, "--prefix", stack.root];
});

afterAll(async () => {
  await stack?.stop();
  await mock?.close();
  await server?.stop();
});

describe("dirigent goal", () => {
  it("adds a goal and watches it to completion, then lists it and shows its sub-goals", async () => {
    const add = startCli(["goal", "add", "GOAL-CLI: two steps", "--goal-id", "cli-goal", "--watch", ...flags]);
    expect(await add.exited).toBe(0);
    const out = add.output();
    expect(out).toMatch(/^cli-goal$/m);
    expect(out).toContain("[goal cli-goal] goal.decomposed    plan 1: 2 sub-goal(s)");
    expect(out).toMatch(/\[goal cli-goal\] goal\.completed\s+completed: 2 completed/);

    const list = startCli(["goal", "list", ...flags]);
    expect(await list.exited).toBe(0);
    expect(list.output()).toMatch(/cli-goal\s+completed\s+p50\s+GOAL-CLI: two steps\s+\(2 completed\)/);

    const status = startCli(["goal", "status", "cli-goal", ...flags]);
    expect(await status.exited).toBe(0);
    expect(status.output()).toContain("s2   completed   CLI-STEP-TWO after s1");
  });

  it("shows the escalation alert, pauses the goal, and exits 1; resume answers and a second resume does not", async () => {
    const alerts = startCli(["alerts", ...flags]);
    await alerts.waitFor(/listening for operator alerts/);
    const add = startCli(["goal", "add", "GOAL-BROKEN: fails", "--goal-id", "cli-broken", "--max-replans", "0", "--watch", ...flags]);
    expect(await add.exited).toBe(1);
    expect(add.output()).toMatch(
      /ALERT goal\.escalated goal cli-broken \(replans 1\): escalated after 0 replan\(s\): major divergence at s1: Sub-goal failed: .* — dirigent goal resume cli-broken/,
    );
    expect(add.output()).toMatch(/goal\.paused/);
    await alerts.waitFor(/ALERT goal\.escalated goal cli-broken/);
    await alerts.stop();

    const resume = startCli(["goal", "resume", "cli-broken", ...flags]);
    expect(await resume.exited).toBe(0);
    expect(resume.output()).toContain('"status":"resumed"');
    const cancel = startCli(["goal", "cancel", "cli-broken", ...flags]);
    expect(await cancel.exited).toBe(0);
    const again = startCli(["goal", "resume", "cli-broken", ...flags]);
    expect(await again.exited).toBe(1);
    expect(again.output()).toContain('"status":"not_paused"');
  });

  it("refuses bad input with exit code 2 and a named error", async () => {
    const empty = startCli(["goal", "add", "  ", ...flags]);
    expect(await empty.exited).toBe(2);
    expect(empty.output()).toContain("the goal's description is empty");
    const priority = startCli(["goal", "add", "x", "--priority", "high", ...flags]);
    expect(await priority.exited).toBe(2);
    expect(priority.output()).toContain("--priority 'high': expected an integer from 0 to 1000");
    const unknown = startCli(["goal", "status", "no-such-goal", ...flags]);
    expect(await unknown.exited).toBe(2);
    expect(unknown.output()).toContain("NOT_FOUND: no goal 'no-such-goal'");
  });
});
