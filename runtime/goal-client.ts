/**
 * A client of the goal API (`<root>.goals.*`, served by Supervisors), over any {@link Bus}: submit, list, get,
 * resume, cancel, and follow a goal's events and the operator alerts.
 */
import type { Bus, BusSubscription } from "../actors/bus.js";
import { ask } from "../actors/ask.js";
import { clientDeps } from "./client.js";
import {
  decode,
  GoalEvent,
  GoalGetReply,
  GoalListReply,
  GoalReply,
  OperatorAlert,
  Requests,
  type GoalSubmitRequest,
  type Subjects,
} from "../protocol/index.js";

/** Client of the goal API. */
export class GoalClient {
  constructor(
    private readonly bus: Bus,
    private readonly subjects: Subjects,
    private readonly timeoutMs = 10_000,
  ) {}

  private deps() {
    return clientDeps(this.bus, this.subjects);
  }

  /** Submits a goal; `duplicate` when its id exists. @throws {RemoteError} `INVALID_MESSAGE`, `NO_RESPONDERS` (no Supervisor). */
  submit(request: GoalSubmitRequest): Promise<GoalReply> {
    return ask(this.deps(), Requests.goalsSubmit, request, { timeoutMs: this.timeoutMs });
  }

  list(): Promise<GoalListReply> {
    return ask(this.deps(), Requests.goalsList, {}, { timeoutMs: this.timeoutMs });
  }

  /** @throws {RemoteError} `NOT_FOUND` for an unknown goal. */
  get(goalId: string): Promise<GoalGetReply> {
    return ask(this.deps(), Requests.goalGet.at(goalId), {}, { timeoutMs: this.timeoutMs });
  }

  /** Resumes a paused goal (its replan count starts again); `not_paused` otherwise. */
  resume(goalId: string): Promise<GoalReply> {
    return ask(this.deps(), Requests.goalResume.at(goalId), {}, { timeoutMs: this.timeoutMs });
  }

  /** Cancels a goal and every task of its tree; `already_final` when it had ended. */
  cancel(goalId: string): Promise<GoalReply> {
    return ask(this.deps(), Requests.goalCancel.at(goalId), {}, { timeoutMs: this.timeoutMs });
  }

  /** Follows a goal's events (`*`: every goal's). */
  events(goalId: string, onEvent: (event: GoalEvent) => void): BusSubscription {
    return this.bus.subscribe(goalId === "*" ? this.subjects.anyGoalEvents : this.subjects.goalEvents(goalId), (msg) => {
      const decoded = decode(GoalEvent, msg.data);
      if (decoded.ok) onEvent(decoded.value);
    });
  }

  /** Resolves once the subscriptions made so far are in place at the server. */
  flush(): Promise<void> {
    return this.bus.flush();
  }

  /** Follows the operator alerts. */
  alerts(onAlert: (alert: OperatorAlert) => void): BusSubscription {
    return this.bus.subscribe(this.subjects.operatorAlerts, (msg) => {
      const decoded = decode(OperatorAlert, msg.data);
      if (decoded.ok) onAlert(decoded.value);
    });
  }
}
