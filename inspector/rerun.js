// "Re-run from here" on a node of an ended task (docs/inspector.md): the task's inputs, as its root node's record
// holds them, in an editable JSON box; "start the fork" posts `/api/tasks/<id>/rerun` (runtime/inspect/nodes.ts, the
// same request as `dirigent rerun`) with the inputs changed in the box, and the page moves to the new task. Values
// the record masked stay as the original's unless edited.
import { el } from "./dom.js";

/** States after which a task can be forked. */
const ENDED = new Set(["completed", "failed", "cancelled"]);

/** Whether a task in `state` can be re-run. */
export const canRerun = (state) => ENDED.has(state);

/** The inputs of `after` whose values differ from `before` (JSON equality). */
export function changedInputs(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) if (JSON.stringify(before[k]) !== JSON.stringify(v)) out[k] = v;
  return out;
}

/**
 * The button and its form, for the node at `path` of task `taskId`; `inputs()` resolves the task's inputs as
 * recorded, `open(taskId)` shows the new task.
 */
export function rerunBox(taskId, path, { inputs, open }) {
  const box = el("div", { class: "rerun", "data-path": path });
  const button = el("button", { type: "button", class: "rerun-button" }, "Re-run from here");
  box.append(button);
  button.onclick = async () => {
    button.disabled = true;
    const recorded = await inputs().catch(() => ({}));
    const text = el("textarea", { class: "rerun-inputs", rows: 6, spellcheck: false });
    text.value = JSON.stringify(recorded, null, 2);
    const status = el("p", { class: "rerun-status hint" }, `nodes before ${path} are answered from this task's records`);
    const start = el("button", { type: "button", class: "rerun-start" }, "Start the fork");
    start.onclick = async () => {
      let edited;
      try {
        edited = JSON.parse(text.value);
        if (typeof edited !== "object" || edited === null || Array.isArray(edited)) throw new Error("not an object");
      } catch (err) {
        status.textContent = `the inputs are not a JSON object: ${err.message}`;
        status.className = "rerun-status error";
        return;
      }
      start.disabled = true;
      const body = { from: path, inputs: changedInputs(recorded, edited) };
      const res = await fetch(`/api/tasks/${encodeURIComponent(taskId)}/rerun`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const answer = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
      if (!res.ok) {
        status.textContent = answer.error ?? `HTTP ${res.status}`;
        status.className = "rerun-status error";
        start.disabled = false;
        return;
      }
      status.textContent = `fork ${answer.taskId}: ${answer.replayed} node${answer.replayed === 1 ? "" : "s"} replayed`;
      open(answer.taskId);
    };
    box.append(el("div", { class: "label" }, "inputs (JSON; edit to change them in the fork)"), text, start, status);
  };
  return box;
}
