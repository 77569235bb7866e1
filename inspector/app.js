// The dirigent inspector page. Loads every machine's chart and the cluster's state from the server it came from,
// then applies the changes the server pushes over Server-Sent Events. No library, no request beyond this origin.
import { el, svgElement } from "./dom.js";
import { mapStrip, nodeLabel, parentPath } from "./task-tree.js";
import { nodeKey, nodesAt, nodeTable, treeRows } from "./nodes.js";
import { nodeDetail } from "./conversation.js";
import { canRerun, rerunBox } from "./rerun.js";

const $ = (id) => document.getElementById(id);
const actors = new Map(); // actorId → actor view
const actorRows = new Map(); // actorId → <li>
const tasks = new Map(); // taskId → task view
const taskRows = new Map();
const timelines = new Map(); // taskId → timeline entries (only of the selected task, plus live appends)
const charts = new Map(); // machine id → { svg text }
const filter = { task: "", role: "", process: "", finished: true };
let selectedActor;
let selectedTask;
const nodeLists = new Map(); // taskId → { nodes } or { error }: its node records
let selectedNode; // key (path#occurrence) of the node shown in detail
let nodesTimer; // a reload of the node list, after a node.finished event
let scrubAt; // the moment the scrubber shows (ms), or undefined: now
let galleryDirty = false; // an actor of the selected task changed: its states in the gallery need redrawing
const stats = { deltas: 0, lags: [] }; // read by the benchmark
window.__inspector = stats;

/** Active state node ids of a machine's snapshot value: `{ running: "executing" }` → task.running, task.running.executing. */
function activeStates(machineId, value) {
  const out = [];
  const walk = (prefix, v) => {
    if (typeof v === "string") out.push(`${prefix}.${v}`);
    else if (v && typeof v === "object") {
      for (const [key, child] of Object.entries(v)) {
        out.push(`${prefix}.${key}`);
        walk(`${prefix}.${key}`, child);
      }
    }
  };
  walk(machineId, value);
  return out;
}

function valueText(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  return Object.entries(value)
    .map(([k, v]) => (v && typeof v === "object" && Object.keys(v).length === 0 ? k : `${k}.${valueText(v)}`))
    .join(", ");
}

function shortProcess(p) {
  return p;
}

function groupOf(actor) {
  const proc = actor.process;
  let procEl = document.querySelector(`.process[data-process="${CSS.escape(proc)}"]`);
  if (!procEl) {
    procEl = el("div", { class: "process", "data-process": proc }, el("div", { class: "name" }, shortProcess(proc)));
    $("actors").append(procEl);
    const option = el("option", { value: proc }, proc);
    $("filter-process").append(option);
  }
  const key = actor.taskId ?? `(${actor.role})`;
  let group = procEl.querySelector(`.group[data-group="${CSS.escape(key)}"]`);
  if (!group) {
    const name = el("div", { class: "name" }, actor.taskId ? `task ${actor.taskId}` : `${actor.role} (no task)`);
    if (actor.taskId) name.onclick = () => selectTask(actor.taskId);
    group = el("ul", { class: "group", "data-group": key, "data-task": actor.taskId ?? "" }, name);
    procEl.append(group);
  }
  return group;
}

function visible(actor) {
  if (filter.task && !(actor.taskId ?? "").includes(filter.task)) return false;
  if (filter.role && actor.role !== filter.role) return false;
  if (filter.process && actor.process !== filter.process) return false;
  if (!filter.finished && actor.snapshot.status !== "active") return false;
  return true;
}

function renderActor(actor) {
  let row = actorRows.get(actor.actorId);
  if (!row) {
    row = el("li", {
      class: "actor",
      "data-actor-id": actor.actorId,
      "data-machine": actor.machine,
      "data-role": actor.role,
      title: actor.actorId,
    });
    row.append(el("span", { class: "machine" }, actor.machine), " ", el("span", { class: "value" }));
    row.onclick = () => selectActor(actor.actorId);
    actorRows.set(actor.actorId, row);
    groupOf(actor).append(row);
    $("no-actors").classList.add("hidden");
  }
  const text = actor.isMachine ? valueText(actor.snapshot.value) : actor.snapshot.status;
  row.querySelector(".value").textContent = text;
  row.dataset.state = text;
  row.dataset.status = actor.snapshot.status;
  row.classList.toggle("finished", actor.snapshot.status !== "active");
  row.classList.toggle("hidden", !visible(actor));
}

function renderTask(task) {
  let row = taskRows.get(task.taskId);
  if (!row) {
    row = el(
      "li",
      { class: "task", "data-task-id": task.taskId },
      el("span", { class: "id" }, task.taskId),
      el("span", { class: "state" }),
    );
    row.onclick = () => selectTask(task.taskId);
    taskRows.set(task.taskId, row);
    $("tasks").prepend(row);
  }
  const state = task.state ?? (task.status ? task.status.toLowerCase() : "");
  row.querySelector(".state").textContent = `${state}${task.replayed ? " (replayed)" : ""}`;
  row.dataset.state = state;
  const hidden =
    (filter.task && !task.taskId.includes(filter.task)) ||
    (filter.role && !task.roles.includes(filter.role)) ||
    (filter.process && !task.processes.includes(filter.process));
  row.classList.toggle("hidden", Boolean(hidden));
  if (task.taskId === selectedTask) renderTaskDetail();
}

function applyFilters() {
  filter.task = $("filter-task").value.trim();
  filter.role = $("filter-role").value;
  filter.process = $("filter-process").value;
  filter.finished = $("filter-finished").checked;
  for (const actor of actors.values()) renderActor(actor);
  for (const task of tasks.values()) renderTask(task);
  if (filter.task && tasks.has(filter.task) && selectedTask !== filter.task) selectTask(filter.task);
  else if (filter.task && !tasks.has(filter.task) && /^[A-Za-z0-9_-]+$/.test(filter.task)) loadTask(filter.task);
}

function highlight(container, actor) {
  const svg = container.querySelector("svg");
  if (!svg) return;
  const active = new Set(actor && actor.isMachine ? activeStates(actor.machine, actor.snapshot.value) : []);
  for (const g of svg.querySelectorAll("g.state")) g.classList.toggle("active", active.has(g.dataset.state));
  for (const t of svg.querySelectorAll("g.transition"))
    t.classList.toggle("taken", Boolean(actor && t.dataset.event === actor.lastEvent && active.has(t.dataset.target)));
}

/**
 * The states of the selected task's machine actors: now (the live actors), or, while the scrubber is back in the
 * task's history, the state each actor had entered by then (from the task's `state` timeline entries).
 */
function taskMachineStates() {
  if (!selectedTask) return [];
  if (scrubAt === undefined)
    return [...actors.values()]
      .filter((a) => a.taskId === selectedTask && a.isMachine)
      .map((a) => ({ machine: a.machine, value: a.snapshot.value }));
  const byActor = new Map();
  for (const entry of timelines.get(selectedTask) ?? [])
    if (entry.kind === "state" && entry.at <= scrubAt) byActor.set(entry.actorId, { machine: entry.machine, value: entry.value });
  return [...byActor.values()];
}

/**
 * Highlights, on every machine's chart in the gallery, the states of all the selected task's actors of that machine
 * (class `in-task`), so the whole task is visible at once, not only the focused actor; at the scrubber's moment
 * while it is back in the task's history.
 */
function renderGallery() {
  galleryDirty = false;
  const active = new Map(); // machine id → Set of state ids
  for (const a of taskMachineStates()) {
    let set = active.get(a.machine);
    if (!set) active.set(a.machine, (set = new Set()));
    for (const id of activeStates(a.machine, a.value)) set.add(id);
  }
  for (const svg of $("machines").querySelectorAll("svg[data-machine]")) {
    const set = active.get(svg.dataset.machine);
    for (const g of svg.querySelectorAll("g.state")) g.classList.toggle("in-task", Boolean(set?.has(g.dataset.state)));
  }
}

function showChart(machine) {
  const chart = charts.get(machine);
  const box = $("focus-chart");
  if (box.dataset.machine === machine) return;
  box.dataset.machine = machine ?? "";
  box.replaceChildren(
    chart ? svgElement(chart.svg) : el("p", { class: "hint" }, machine ? `${machine} is not a state machine (an invoked promise)` : ""),
  );
}

function renderFocus() {
  const actor = actors.get(selectedActor);
  // The scrubber shows the task machine as it was: live changes wait until it is back at now.
  if (!actor || (scrubAt !== undefined && actor.taskId === selectedTask)) return;
  $("focus-title").textContent =
    `${actor.machine} · ${actor.role} · ${actor.taskId ? `task ${actor.taskId} · ` : ""}${actor.isMachine ? valueText(actor.snapshot.value) : actor.snapshot.status}`;
  showChart(actor.isMachine ? actor.machine : undefined);
  highlight($("focus-chart"), actor);
  $("focus").dataset.actorId = actor.actorId;
  $("focus").dataset.state = valueText(actor.snapshot.value);
}

function selectActor(actorId) {
  for (const r of document.querySelectorAll(".actor.selected")) r.classList.remove("selected");
  selectedActor = actorId;
  actorRows.get(actorId)?.classList.add("selected");
  renderFocus();
  const actor = actors.get(actorId);
  if (actor?.taskId && actor.taskId !== selectedTask) selectTask(actor.taskId, false);
}

/** The task machine actor of a task (the newest, after a resume). */
function taskActorOf(taskId) {
  let found;
  for (const a of actors.values()) if (a.taskId === taskId && a.machine === "task" && (!found || a.updatedAt >= found.updatedAt)) found = a;
  return found;
}

async function loadTask(taskId) {
  const res = await fetch(`/api/tasks/${encodeURIComponent(taskId)}`);
  if (!res.ok) {
    // Not seen yet: its events are collected from now on.
    if (!timelines.has(taskId)) timelines.set(taskId, []);
    return false;
  }
  const task = await res.json();
  timelines.set(taskId, task.timeline);
  for (const a of task.actors) upsertActor(a);
  tasks.set(taskId, task);
  renderTask(task);
  return true;
}

async function selectTask(taskId, focusActor = true) {
  selectedTask = taskId;
  for (const r of document.querySelectorAll(".task.selected")) r.classList.remove("selected");
  taskRows.get(taskId)?.classList.add("selected");
  $("detail").dataset.taskId = taskId;
  if (!timelines.has(taskId) || tasks.get(taskId)?.replayed) await loadTask(taskId);
  if (selectedTask !== taskId) return;
  renderTaskDetail();
  renderGallery();
  selectedNode = undefined;
  scrubAt = undefined;
  $("node-detail").textContent = "";
  $("nodes").textContent = "";
  // A task not seen yet has no records: they are read once its first node has finished.
  if (tasks.has(taskId)) void loadNodes(taskId);
  const main = taskActorOf(taskId);
  if (focusActor && main) selectActor(main.actorId);
  else if (focusActor && !main) {
    // A replayed task: draw the task machine in its last known state.
    const state = tasks.get(taskId)?.state;
    showChart("task");
    highlight($("focus-chart"), state ? { isMachine: true, machine: "task", snapshot: { value: replayValue(state) } } : undefined);
    $("focus-title").textContent = `task · ${taskId} · ${state ?? ""} (replayed)`;
  }
}

function replayValue(state) {
  const running = {
    running: "executing",
    awaiting_evaluation: "awaitingEvaluation",
    awaiting_subtask: "awaitingSubtask",
    awaiting_input: "awaitingInput",
  };
  return running[state] ? { running: running[state] } : state;
}

function renderTaskDetail() {
  const taskId = selectedTask;
  const task = tasks.get(taskId);
  $("detail-task").textContent = taskId ?? "–";
  $("detail-state").textContent = task
    ? `${task.state ?? ""}${task.status ? ` · ${task.status}` : ""} · ${task.processes.length} processes · roles ${task.roles.join(", ")}`
    : "";
  const tree = $("tree");
  tree.textContent = "";
  if (task) {
    const paths = task.nodes;
    const items = new Map();
    const root = el("li", { "data-node": "" }, `task ${taskId}`, el("ul"));
    tree.append(root);
    const maps = task.maps ?? [];
    const mapPaths = new Set(maps.map((m) => m.nodePath));
    // A node recorded already is named as its record names it (`step 2 · describe each animal`).
    const names = new Map((nodeLists.get(taskId)?.nodes ?? []).map((n) => [n.path, n.name]));
    for (const p of paths) {
      const name = names.get(p);
      items.set(
        p,
        el("li", { "data-node": p }, nodeLabel(p, mapPaths), ...(name ? [el("span", { class: "node-name" }, ` · ${name}`)] : []), el("ul")),
      );
    }
    for (const p of paths) (items.get(parentPath(p, paths)) ?? root).querySelector("ul").append(items.get(p));
    // Each map's branches go between its label and its child nodes.
    for (const map of maps) (items.get(map.nodePath) ?? root).querySelector(":scope > ul").before(mapStrip(map));
  }
  const list = $("timeline");
  list.textContent = "";
  let previous;
  for (const entry of timelines.get(taskId) ?? []) {
    if (listed(entry, previous)) list.append(timelineItem(entry));
    if (entry.kind !== "state") previous = entry;
  }
}

/** Reads the selected task's node records and redraws the tree and waterfall. */
async function loadNodes(taskId) {
  $("task-nodes").hidden = false;
  const res = await fetch(`/api/tasks/${encodeURIComponent(taskId)}/nodes`);
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  nodeLists.set(
    taskId,
    res.ok ? { nodes: body.nodes, truncated: body.truncated } : { error: body.error ?? `HTTP ${res.status}`, code: body.code },
  );
  if (taskId !== selectedTask) return;
  renderNodes();
  renderTaskDetail();
  // The running node on show has ended: its record replaces what it streamed.
  const open = $("node-detail").querySelector('.node-detail[data-state="running"]');
  const ended = open && (body.nodes ?? []).find((n) => n.path === open.dataset.path);
  if (ended) void selectNode(ended);
}

/** Reloads the node list soon (several nodes often finish together). */
function reloadNodesSoon(taskId) {
  clearTimeout(nodesTimer);
  nodesTimer = setTimeout(() => void loadNodes(taskId), 250);
}

const FINAL = new Set(["completed", "failed", "cancelled"]);

/** The task's nodes seen in its events but not recorded yet, while it runs: `{ path, startedAt }`. */
function runningNodes(taskId) {
  const task = tasks.get(taskId);
  if (!task || FINAL.has(task.state)) return [];
  const first = new Map();
  for (const entry of timelines.get(taskId) ?? []) if (entry.nodePath && !first.has(entry.nodePath)) first.set(entry.nodePath, entry.at);
  return task.nodes.filter((p) => first.has(p)).map((p) => ({ path: p, startedAt: new Date(first.get(p)).toISOString() }));
}

function renderNodes() {
  const running = scrubAt === undefined ? runningNodes(selectedTask) : [];
  // Before any record (none read yet, or none written yet) the nodes seen running are listed alone.
  const stored = nodeLists.get(selectedTask);
  const list = running.length && (!stored || stored.code === "NOT_FOUND") ? { nodes: [] } : stored;
  const box = $("nodes");
  if (!list) return;
  $("task-nodes").hidden = false;
  if (list.error) {
    $("nodes-status").textContent = list.code === "NOT_FOUND" ? "no records yet" : list.error;
    box.textContent = "";
    return;
  }
  const axis = taskSpan(selectedTask, list.nodes);
  const rows = scrubAt === undefined ? treeRows(list.nodes, running) : treeRows(nodesAt(list.nodes, scrubAt));
  $("nodes-status").textContent = `${list.nodes.length} recorded${list.truncated ? " (the first ones)" : ""}`;
  box.replaceChildren(
    rows.length
      ? nodeTable(rows, { selected: selectedNode, onSelect: selectNode, axis: scrubAt === undefined ? undefined : axis })
      : el("p", { class: "hint" }, scrubAt === undefined ? "no node has ended yet" : "no node had started yet"),
  );
  renderScrubber(axis);
}

/** From the task's first event or node to its last (ms). */
function taskSpan(taskId, nodes) {
  const times = [
    ...(timelines.get(taskId) ?? []).map((e) => e.at),
    ...nodes.flatMap((n) => [Date.parse(n.startedAt), Date.parse(n.endedAt)]),
  ].filter(Number.isFinite);
  return times.length ? { t0: Math.min(...times), t1: Math.max(...times) } : undefined;
}

/**
 * The scrubber over the task's history: at a moment before its end, the tree and the waterfall show the nodes as
 * they were then, the timeline the entries up to then, and the focused chart the task machine's state then (from
 * the state its lifecycle events carried).
 */
function renderScrubber(axis) {
  const box = $("scrubber");
  box.hidden = !axis;
  if (!axis) return;
  const input = $("scrub");
  input.min = String(axis.t0);
  input.max = String(axis.t1);
  input.value = String(scrubAt ?? axis.t1);
  $("scrub-time").textContent =
    scrubAt === undefined ? "now" : `${new Date(scrubAt).toISOString().slice(11, 23)} (+${scrubAt - axis.t0} ms)`;
  box.dataset.at = scrubAt === undefined ? "" : String(scrubAt);
  for (const li of $("timeline").children) li.classList.toggle("after-scrub", scrubAt !== undefined && Number(li.dataset.at) > scrubAt);
  if (scrubAt === undefined) return;
  let state;
  for (const entry of timelines.get(selectedTask) ?? [])
    if (entry.at <= scrubAt && entry.kind === "task" && entry.state) state = entry.state;
  showChart("task");
  highlight($("focus-chart"), state ? { isMachine: true, machine: "task", snapshot: { value: replayValue(state) } } : undefined);
  $("focus-title").textContent = `task · ${selectedTask} · ${state ?? ""} at ${$("scrub-time").textContent}`;
  $("focus").dataset.state = state ?? "";
}

function scrubTo(value) {
  const list = nodeLists.get(selectedTask);
  const axis = list?.nodes ? taskSpan(selectedTask, list.nodes) : undefined;
  if (!axis) return;
  scrubAt = value >= axis.t1 ? undefined : value;
  renderGallery();
  renderNodes();
  if (scrubAt === undefined) renderFocus();
}

/** The text a running node's model has streamed so far (its `model.delta` events), or undefined when none. */
function streamedText(taskId, path) {
  const pieces = (timelines.get(taskId) ?? []).filter((e) => e.type === "model.delta" && e.nodePath === path).map((e) => e.message ?? "");
  return pieces.length ? pieces.join("") : undefined;
}

/** A node that runs and has no record yet: what its model has streamed so far, growing as `model.delta` events come. */
function runningDetail(node) {
  const text = streamedText(selectedTask, node.path);
  return el(
    "div",
    { class: "node-detail", "data-path": node.path, "data-state": "running" },
    el("h3", {}, node.name),
    el("p", { class: "hint" }, `running since ${node.startedAt.slice(11, 23)}; its record is read once it ends`),
    el("h4", {}, "answer so far"),
    el("pre", { class: "streaming" }, text ?? ""),
    ...(text === undefined
      ? [el("p", { class: "hint" }, "nothing streamed (the task streams when submitted with stream: true or with DIRIGENT_STREAM=on)")]
      : []),
  );
}

async function selectNode(node) {
  const taskId = selectedTask;
  selectedNode = nodeKey(node);
  for (const r of $("nodes").querySelectorAll(".node-row"))
    r.classList.toggle("selected", `${r.dataset.path}#${r.dataset.occurrence}` === selectedNode);
  const detail = $("node-detail");
  // A node seen running but not recorded: its answer streams in; its record replaces this once it is read.
  if (node.state === "running" && !node.kind) return detail.replaceChildren(runningDetail(node));
  detail.replaceChildren(el("p", { class: "hint" }, `loading ${node.name}…`));
  const res = await fetch(
    `/api/tasks/${encodeURIComponent(taskId)}/node?path=${encodeURIComponent(node.path)}&occurrence=${node.occurrence}`,
  );
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (taskId !== selectedTask || selectedNode !== nodeKey(node)) return;
  detail.replaceChildren(res.ok ? nodeDetail(body) : el("p", { class: "error" }, body.error ?? `HTTP ${res.status}`));
  if (res.ok && canRerun(tasks.get(taskId)?.state))
    detail.querySelector(".node-name")?.after(rerunBox(taskId, node.path, { inputs: () => rootInputs(taskId), open: openTask }));
}

/** The task's inputs, as its root node's record holds them (masked values included). */
async function rootInputs(taskId) {
  const res = await fetch(`/api/tasks/${encodeURIComponent(taskId)}/nodes`);
  const root = res.ok ? (await res.json()).nodes.find((n) => !/[./]/.test(n.path)) : undefined;
  if (!root) return {};
  const detail = await fetch(`/api/tasks/${encodeURIComponent(taskId)}/node?path=${encodeURIComponent(root.path)}`);
  return detail.ok ? ((await detail.json()).node.inputs ?? {}) : {};
}

/** Shows another task: the page with `?task=<id>`. */
function openTask(taskId) {
  const url = new URL(location.href);
  url.searchParams.set("task", taskId);
  location.assign(url.toString());
}

/**
 * Whether an entry is listed in the timeline: states only redraw the charts, and a run of `model.delta` events of
 * one node is listed once (its first piece), as `dirigent run` prints it; the node's detail shows the whole text.
 */
function listed(entry, previous) {
  if (entry.kind === "state") return false;
  return !(entry.type === "model.delta" && previous?.type === "model.delta" && previous.nodePath === entry.nodePath);
}

/** A streamed piece of the running node on show goes at the end of its answer so far. */
function appendStreamed(entry) {
  const open = $("node-detail").querySelector('.node-detail[data-state="running"]');
  if (!open || open.dataset.path !== entry.nodePath) return;
  open.querySelector("pre.streaming")?.append(entry.message ?? "");
}

function timelineItem(entry) {
  const time = new Date(entry.at).toISOString().slice(11, 23);
  return el(
    "li",
    {
      class: `kind-${entry.kind}${scrubAt !== undefined && entry.at > scrubAt ? " after-scrub" : ""}`,
      "data-type": entry.type,
      "data-at": String(entry.at),
    },
    el("span", { class: "time" }, time),
    el("span", { class: "type" }, entry.type),
    entry.nodePath ? ` @${entry.nodePath}` : "",
    entry.message ? ` — ${entry.message}` : "",
  );
}

function upsertActor(actor) {
  actors.set(actor.actorId, actor);
  renderActor(actor);
  if (selectedTask && actor.taskId === selectedTask) galleryDirty = true;
  if (actor.actorId === selectedActor) renderFocus();
  if (
    selectedTask &&
    actor.taskId === selectedTask &&
    actor.machine === "task" &&
    taskActorOf(selectedTask) === actor &&
    selectedActor !== actor.actorId &&
    !actors.get(selectedActor)
  )
    selectActor(actor.actorId);
}

function applyDelta(delta) {
  for (const actor of delta.actors) upsertActor(actor);
  for (const id of delta.removed) {
    actors.delete(id);
    actorRows.get(id)?.remove();
    actorRows.delete(id);
  }
  for (const task of delta.tasks) {
    tasks.set(task.taskId, task);
    renderTask(task);
  }
  for (const { taskId, entry } of delta.timeline) {
    let list = timelines.get(taskId);
    if (!list && taskId === selectedTask) timelines.set(taskId, (list = []));
    list?.push(entry);
    if (taskId === selectedTask) {
      if (
        listed(
          entry,
          list?.findLast((e, i) => i < list.length - 1 && e.kind !== "state"),
        )
      )
        $("timeline").append(timelineItem(entry));
      if (entry.type === "model.delta") appendStreamed(entry);
      // A node that starts is listed as running at once.
      if (entry.type === "node.started" && scrubAt === undefined) renderNodes();
    }
    if (taskId === selectedTask && (entry.type === "node.finished" || entry.kind === "result")) reloadNodesSoon(taskId);
  }
  if (galleryDirty) renderGallery();
  $("actor-count").textContent = `(${[...actors.values()].filter((a) => a.snapshot.status === "active").length} active)`;
  stats.deltas++;
  const now = Date.now();
  for (const actor of delta.actors) stats.lags.push(now - actor.updatedAt);
  if (stats.lags.length > 100000) stats.lags.splice(0, stats.lags.length - 100000);
}

async function start() {
  const machines = await (await fetch("/api/machines")).json();
  for (const m of machines) {
    charts.set(m.id, m);
    const figure = el("figure", { "data-machine-name": m.name });
    figure.append(el("figcaption", {}, `${m.name} (machine id ${m.id})`));
    figure.append(el("div", {}, svgElement(m.svg)));
    $("machines").append(figure);
  }
  const stream = new EventSource("/api/stream");
  const queued = [];
  let loaded = false;
  stream.onmessage = (e) => {
    const delta = JSON.parse(e.data);
    if (loaded) applyDelta(delta);
    else queued.push(delta);
  };
  stream.onopen = () => {
    $("status").textContent = "live";
    $("status").classList.add("live");
  };
  stream.onerror = () => {
    $("status").textContent = "reconnecting…";
    $("status").classList.remove("live");
  };
  const state = await (await fetch("/api/state")).json();
  for (const task of state.tasks) {
    tasks.set(task.taskId, task);
    renderTask(task);
  }
  for (const actor of state.actors) upsertActor(actor);
  if (state.replayError) {
    $("notice").textContent = state.replayError;
    $("notice").hidden = false;
  }
  loaded = true;
  for (const delta of queued.splice(0)) applyDelta(delta);
  for (const id of ["filter-task", "filter-role", "filter-process", "filter-finished"]) $(id).addEventListener("input", applyFilters);
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("scrub").addEventListener("input", () => scrubTo(Number($("scrub").value)));
  $("scrub-live").addEventListener("click", () => scrubTo(Infinity));
  $("show-xstate").addEventListener("input", () => $("timeline").classList.toggle("hide-xstate", !$("show-xstate").checked));
  const wanted = new URLSearchParams(location.search).get("task");
  if (wanted) {
    $("filter-task").value = wanted;
    applyFilters();
    await selectTask(wanted);
  }
  document.body.dataset.ready = "true";
}

start().catch((err) => {
  $("status").textContent = `error: ${err.message}`;
});
