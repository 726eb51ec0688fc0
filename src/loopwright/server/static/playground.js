// The loopwright playground: chat with an agent, watch every event of its runs, decide pending
// items, browse sessions and the agent's resolved configuration. Plain DOM, no framework, no
// build step. Server data only ever reaches the page as text (textContent, text nodes,
// attribute values), never as markup — except the assistant's replies, rendered as Markdown
// sanitised by DOMPurify (markdown.js).

import { markdown } from "./markdown.js";

const TOKEN_KEY = "loopwright.token";
const POLL_MS = 3000;
const FOLLOW_MS = 1000;
const DELTAS = new Set(["text:delta", "thinking:delta", "tool:delta"]);
const FAMILIES = new Set([
  "session", "input", "steering", "step", "budget", "text", "thinking", "message", "assistant",
  "actauth", "approval", "question", "pending", "tool", "toollane", "skill", "model",
  "compaction", "prompt", "loop", "done", "error", "run", "subagent",
]);
const STOP_TEXT = {
  completed: "completed",
  max_tokens: "stopped: the answer was cut by the output limit",
  paused: "paused — waiting for a decision",
  denied: "stopped: a tool call was denied",
  max_turns: "stopped: step limit reached",
  aborted: "cancelled",
  error: "failed",
  terminated: "terminated",
};

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------------------------------------
// Small helpers

/** Build an element. Children are nodes or strings (strings become text nodes, never HTML). */
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "testid") el.dataset.testid = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const str = (value) => (value === undefined || value === null ? "" : String(value));
const short = (id) => (str(id).length > 14 ? `${str(id).slice(0, 12)}…` : str(id));
const enc = encodeURIComponent;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function json(value, indent) {
  try {
    return JSON.stringify(value, null, indent) ?? "";
  } catch {
    return str(value);
  }
}

function clip(text, n = 160) {
  const flat = str(text).replace(/\s+/g, " ").trim();
  return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat;
}

function ago(iso) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return str(iso);
  const s = Math.max(0, Math.round((Date.now() - then) / 1000));
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(then).toLocaleDateString();
}

/** The text of a message (user content may be a string or a list of parts). */
function messageText(message) {
  if (!message) return "";
  const content = message.content ?? message.parts;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.filter((p) => p && p.type === "text").map((p) => str(p.text)).join("");
  }
  return "";
}

function storage(action, value) {
  try {
    if (action === "get") return localStorage.getItem(TOKEN_KEY) || "";
    if (action === "set") localStorage.setItem(TOKEN_KEY, value);
    if (action === "clear") localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage disabled: the token lives only as long as the page */
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// HTTP and server-sent events

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function api(path, { method = "GET", body, accept = "application/json", signal } = {}) {
  const headers = { Accept: accept };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const token = storage("get");
  if (token) headers.Authorization = `Bearer ${token}`;
  return fetch(path, {
    method,
    headers,
    signal,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function readBody(res) {
  const text = await res.text();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    return { error: clip(text, 300) };
  }
}

async function getJson(path) {
  const res = await api(path);
  const data = await readBody(res);
  if (!res.ok) throw new ApiError(res.status, data.error || `HTTP ${res.status}`);
  return data;
}

// Every page of a listing (`nextCursor`, up to `pages` of them): the items under `key`.
async function getAll(path, key, pages = 20) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < pages; page += 1) {
    const sep = path.includes("?") ? "&" : "?";
    const data = await getJson(cursor ? `${path}${sep}cursor=${enc(cursor)}` : path);
    if (Array.isArray(data[key])) items.push(...data[key]);
    cursor = data.nextCursor;
    if (!cursor) break;
  }
  return { [key]: items };
}

const isEventStream = (res) =>
  res.ok && str(res.headers.get("content-type")).startsWith("text/event-stream");

function parseFrame(raw) {
  let type = "message";
  let id = null;
  const data = [];
  for (const line of raw.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") type = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (!data.length) return null;
  let event;
  try {
    event = JSON.parse(data.join("\n"));
  } catch {
    event = { type, unparsed: data.join("\n") };
  }
  if (!event || typeof event !== "object" || Array.isArray(event)) event = { type, data: event };
  if (!event.type) event.type = type;
  const seq = id === null || id === "" ? null : Number(id);
  return { event, seq: Number.isFinite(seq) ? seq : null };
}

/** Frames of an SSE body read with fetch (EventSource cannot POST). */
async function* sseFrames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      // normalise CRLF / CR line ends; a CR at the very end may be half of a CRLF: keep it
      buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n|\r(?!$)/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = parseFrame(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (frame) yield frame;
      }
    }
    const last = parseFrame((buffer + decoder.decode()).replace(/\r\n?/g, "\n"));
    if (last) yield last;
  } finally {
    reader.releaseLock();
  }
}

// ---------------------------------------------------------------------------------------------
// One-line summaries of events, for the timeline

function brief(ev) {
  const args = (a) => (a && Object.keys(a).length ? ` ${json(a)}` : "");
  switch (ev.type) {
    case "session": return str(ev.sessionId);
    case "input:received": return messageText(ev.message);
    case "steering:injected": return `${str(ev.mode)}: ${messageText(ev.message)}`;
    case "message:custom": return `[${str(ev.message?.kind)}] ${str(ev.message?.content)}`;
    case "agent:handoff": return `${str(ev.from)} → ${str(ev.to)} (history: ${str(ev.history)})`;
    case "step:started": return `step ${str(ev.step)}`;
    case "step:finished": return `step ${str(ev.step)}${usageText(ev.usage, " · ")}`;
    case "budget:check":
      return `${str(ev.action)} · ${str(ev.usedTokens)} of ${str(ev.budgetTokens)} tokens`;
    case "text:delta":
    case "thinking:delta": return str(ev.delta);
    case "tool:delta": return `${str(ev.tool)} ${str(ev.delta)}`;
    case "message:completed": {
      const parts = (ev.message && ev.message.parts) || [];
      const calls = parts.filter((p) => p && p.type === "tool_call").map((p) => str(p.name));
      const text = messageText(ev.message);
      return [text, calls.length ? `→ ${calls.join(", ")}` : ""].filter(Boolean).join(" ");
    }
    case "assistant:text":
    case "loop:done": return str(ev.text);
    case "actauth:decision": return `${str(ev.tool)}: ${str(ev.decision)} — ${str(ev.reason)}`;
    case "approval:pending": return `${str(ev.tool)}${args(ev.args)} — ${str(ev.reason)}`;
    case "question:pending": return str(ev.question);
    case "pending:requested": return `${str(ev.kind)} ${str(ev.id)} for ${str(ev.callId)}`;
    case "approval:resolved":
      return `${str(ev.tool)}: ${str(ev.decision)} by ${str(ev.by)}${ev.reason ? ` — ${ev.reason}` : ""}`;
    case "question:resolved": return `“${str(ev.answer)}” by ${str(ev.by)}`;
    case "pending:decided": return `${str(ev.status)} by ${str(ev.by)} · ${str(ev.id)}`;
    case "tool:started": return `${str(ev.tool)}${args(ev.args)}`;
    case "tool:update":
      return `${str(ev.tool)}: ${str(ev.message)}${ev.progress != null ? ` (${Math.round(ev.progress * 100)}%)` : ""}`;
    case "tool:output": return `${str(ev.tool)}${ev.isError ? " (error)" : ""}: ${str(ev.content)}`;
    case "toollane:result": return `${str(ev.name)}: ${str(ev.summary)}`;
    case "tool:result": return `${str(ev.tool)}: ${str(ev.statusText)}`;
    case "tool:interrupted": return str(ev.tool);
    case "tool:suspended": return `${str(ev.tool)} waits on ${(ev.pendingIds || []).join(", ")}`;
    case "model:retry":
      return `attempt ${str(ev.attempt)}: ${str(ev.error)} (again in ${str(ev.delay)} s)`;
    case "model:fallback": return `${str(ev.from)} → ${str(ev.to)}: ${str(ev.error)}`;
    case "compaction:started": return str(ev.reason);
    case "compaction:finished":
      return `${str(ev.from)} → ${str(ev.to)} messages (${str(ev.mode)})`;
    case "prompt:compaction": return `${str(ev.from)} → ${str(ev.to)} messages`;
    case "skill:loaded": return str(ev.skill);
    case "loop:skipped": return `${str(ev.name)} (denied: ${(ev.deniedTools || []).join(", ")})`;
    case "loop:denied": return (ev.deniedTools || []).join(", ");
    case "loop:max_turns": return `after ${str(ev.maxTurns)} steps`;
    case "loop:paused": return `waiting on ${(ev.pendingIds || []).join(", ")}`;
    case "loop:aborted":
    case "loop:terminated": return str(ev.reason);
    case "loop:error":
    case "error": return str(ev.error);
    case "run:interrupted": return `interrupted: ${(ev.interruptedCalls || []).join(", ")}`;
    case "done": return `${str(ev.stopReason)}${ev.text ? ` — ${ev.text}` : ""}`;
    case "subagent:event": {
      const inner = ev.event || {};
      return `${str(inner.type)} ${brief(inner)}`;
    }
    default:
      return Object.entries(ev)
        .filter(([k, v]) => k !== "type" && v !== null && typeof v !== "object")
        .map(([k, v]) => `${k}: ${v}`)
        .join(" · ");
  }
}

function usageText(usage, prefix = "") {
  if (!usage) return "";
  const tokens = [];
  if (usage.inputTokens != null) tokens.push(`${usage.inputTokens} in`);
  if (usage.outputTokens != null) tokens.push(`${usage.outputTokens} out`);
  return tokens.length ? `${prefix}${tokens.join(" / ")} tokens` : "";
}

function familyOf(type) {
  const family = str(type).split(":")[0];
  return FAMILIES.has(family) ? family : "other";
}

// ---------------------------------------------------------------------------------------------
// The transcript: chat bubbles, tool cards and notices, plus the event timeline. It takes events
// one at a time, live from a stream or replayed from the session log, and never throws.

class Transcript {
  constructor(chat, timeline, hooks) {
    this.chat = chat;
    this.timeline = timeline;
    this.hooks = hooks;
    this.stuck = true; // follow the conversation's end until the person scrolls up
    chat.addEventListener("scroll", () => {
      this.stuck = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 40;
    });
    this.reset();
  }

  reset() {
    this.chat.replaceChildren();
    this.timeline.replaceChildren();
    this.cards = new Map(); // scope prefix + call id → card
    this.pendingCards = new Map(); // pending id → card
    this.announced = new Map(); // pending id → its approval:/question:pending, until requested
    this.scopes = new Map();
    this.root = this.scope("", { container: this.chat, agent: "", depth: 0 });
    this.lastDelta = null;
    this.indicator = null;
    this.echo = null;
    this.run = { steps: 0, input: 0, output: 0 };
    this.stuck = true;
    showActiveAgent("");
  }

  scope(prefix, init) {
    if (!this.scopes.has(prefix)) {
      this.scopes.set(prefix, { prefix, bubble: null, calls: [], lastText: "", ...init });
    }
    return this.scopes.get(prefix);
  }

  apply(event, { seq = null, live = false } = {}) {
    if (!event || typeof event !== "object") return;
    try {
      this.addTimeline(event, seq);
    } catch (err) {
      console.error("timeline", err, event);
    }
    try {
      this.render(event, this.root, live);
    } catch (err) {
      console.error("render", err, event);
    }
    if (live) this.scroll();
  }

  /** The person's own message, shown at once (with its files' thumbnails); the echoed
   * `input:received` is then skipped. */
  userMessage(text, files = []) {
    const el = this.add(this.chat, bubble("user", "You", text));
    for (const file of files) el.append(attachmentView(file));
    this.echo = text;
    this.scroll(true);
  }

  notice(text, kind = "info", container = this.chat) {
    this.add(container, h("li", { class: `notice notice-${kind}`, testid: "notice" }, text));
  }

  add(container, el) {
    container.append(el);
    return el;
  }

  scroll(force = false) {
    if (force || this.stuck) this.chat.scrollTop = this.chat.scrollHeight;
    if ($("timeline-follow").checked) this.timeline.scrollTop = this.timeline.scrollHeight;
  }

  showThinking(on) {
    if (on && !this.indicator) {
      this.indicator = h(
        "li",
        { class: "thinking-indicator", testid: "thinking-indicator", "aria-label": "thinking" },
        h("span", { class: "dots", "aria-hidden": "true" }, h("i"), h("i"), h("i")),
        " thinking…",
      );
      this.chat.append(this.indicator);
    } else if (!on && this.indicator) {
      this.indicator.remove();
      this.indicator = null;
    }
  }

  // --- the chat side -------------------------------------------------------------------------

  render(ev, s, live) {
    const top = s.depth === 0;
    if (top && ev.type !== "step:started" && ev.type !== "budget:check") this.showThinking(false);
    switch (ev.type) {
      case "session":
        if (top) {
          this.run = { steps: 0, input: 0, output: 0 };
          s.sessionId = ev.sessionId;
          this.hooks.session(ev.sessionId);
        }
        break;
      case "input:received": {
        const text = messageText(ev.message);
        if (top && this.echo !== null && this.echo === text) {
          this.echo = null;
          break;
        }
        const el = this.add(s.container, bubble(top ? "user" : "user nested", top ? "You" : "Request", text));
        for (const ref of ev.message?.attachments || []) el.append(attachmentView(ref));
        break;
      }
      case "message:custom":  // an app's note in the history: shown, never sent to the model
        this.add(s.container, customNote(ev.message || {}));
        break;
      case "agent:handoff":  // the session goes on with another agent (docs/handoffs.md)
        this.add(s.container, handoffNote(ev));
        if (top) showActiveAgent(ev.to);
        break;
      case "steering:injected":
        this.add(
          s.container,
          bubble("user steer", ev.mode === "follow_up" ? "You (follow-up)" : "You (steering)",
            messageText(ev.message)),
        );
        break;
      case "step:started":
        s.bubble = null;
        s.calls = [];
        if (top) this.run.steps += 1;
        if (top && live) this.showThinking(true);
        break;
      case "text:delta":
        this.bubbleOf(s).appendText(str(ev.delta));
        break;
      case "thinking:delta":
        this.bubbleOf(s).appendThinking(str(ev.delta));
        break;
      case "tool:delta": {
        const card = this.card(s, ev.id, ev.tool);
        if (ev.partialArgs) card.setArgs(ev.partialArgs);
        break;
      }
      case "message:completed":
        this.completed(s, ev.message || {});
        break;
      case "assistant:text":
        if (!s.bubble || !s.bubble.text()) this.bubbleOf(s).setText(str(ev.text));
        break;
      case "approval:pending":
      case "question:pending":
        // replayed from the log, an item may long be resolved: GET /pending says what is open
        if (live) this.announced.set(str(ev.id), ev);
        break;
      case "pending:requested": {
        // offered once it is in the log (pending:requested is committed): not a moment sooner
        const announced = this.announced.get(str(ev.id));
        this.announced.delete(str(ev.id));
        if (live && announced) {
          this.hooks.pending({
            ...announced,
            type: announced.type === "approval:pending" ? "approval" : "question",
            // as GET /pending lists them: a subagent's items under the parent's session
            sessionId: this.root.sessionId || announced.sessionId,
            subagentSessionId: s.depth ? s.sessionId : undefined,
            agent: s.agent || announced.agent || this.hooks.agent(),
            rootAgent: this.hooks.agent(), // the agent whose session it is (listings: `agent`)
            live: true,
          });
        }
        const card = this.cards.get(s.prefix + str(ev.callId));
        if (card) {
          if (announced && announced.label) card.setLabel(str(announced.label));
          card.setStatus("waiting", ev.kind === "question" ? "waiting for an answer" : "waiting for approval");
          this.pendingCards.set(str(ev.id), card);
        }
        break;
      }
      case "approval:resolved":
      case "question:resolved": {
        this.hooks.resolved(str(ev.id));
        const card = this.pendingCards.get(str(ev.id));
        if (card) {
          const what = ev.type === "question:resolved"
            ? `answered “${str(ev.answer)}”`
            : `${ev.decision === "approve" ? "approved" : "denied"}${ev.reason ? `: ${ev.reason}` : ""}`;
          card.setNote(`${what} by ${str(ev.by) || "someone"}`);
          if (ev.args) card.setArgs(ev.args, true);
        }
        break;
      }
      case "actauth:decision":
        this.decided(s, ev);
        break;
      case "tool:started": {
        const card = this.card(s, ev.id, ev.tool);
        if (ev.label) card.setLabel(str(ev.label));
        card.setArgs(ev.args);
        card.setStatus("running", "running");
        if (ev.detailText) card.setDetail(ev.detailText);
        break;
      }
      case "tool:update":
        this.card(s, ev.id, ev.tool).setProgress(str(ev.message), ev.progress);
        if (ev.details != null) this.card(s, ev.id, ev.tool).setDetails(ev.details);
        break;
      case "tool:output": {
        const card = this.card(s, ev.id, ev.tool);
        card.setOutput(str(ev.content), Boolean(ev.isError));
        if (ev.details != null) card.setDetails(ev.details); // UI-only data: JSON, collapsed
        for (const ref of ev.attachments || []) card.append(attachmentView(ref)); // a tool's images
        if (ev.stored) card.append(storedResultLink(s.agent || this.hooks.agent(), s.sessionId || state.sessionId, ev.stored));
        break;
      }
      case "tool:result":
        this.card(s, ev.id, ev.tool).setResult(str(ev.statusText));
        break;
      case "tool:interrupted":
        this.card(s, ev.id, ev.tool).setStatus("error", "interrupted");
        break;
      case "tool:suspended":
        this.card(s, ev.id, ev.tool).setStatus(  // (its own question, or a subagent's items)
          "waiting", ev.sessionId === s.sessionId ? "waiting for an answer" : "waiting on its subagent");
        break;
      case "model:retry":
        this.notice(`Model request failed (${str(ev.error)}); retry ${str(ev.attempt)} in ${str(ev.delay)} s`, "retry", s.container);
        break;
      case "model:fallback":
        this.notice(`Model ${str(ev.from)} failed (${str(ev.error)}); switched to ${str(ev.to)}`, "retry", s.container);
        break;
      case "compaction:started":
        this.notice(`Compacting the context (${str(ev.reason)})…`, "compaction", s.container);
        break;
      case "compaction:finished":
      case "prompt:compaction":
        this.notice(`Context compacted: ${str(ev.from)} → ${str(ev.to)} messages`, "compaction", s.container);
        break;
      case "budget:check":
        if (ev.action && ev.action !== "ok") {
          this.notice(`Context budget: ${str(ev.action)} (${Math.round(Number(ev.ratio) * 100)}% used)`, "compaction", s.container);
        }
        break;
      case "skill:loaded":
        this.notice(`Skill loaded: ${str(ev.skill)}`, "info", s.container);
        break;
      case "run:interrupted":
        this.notice("The previous run was interrupted before it finished.", "retry", s.container);
        break;
      case "loop:error":
      case "error":
        this.notice(`Error: ${str(ev.error)}`, "error", s.container);
        break;
      case "step:finished":
        if (top && ev.usage) {
          this.run.input += Number(ev.usage.inputTokens) || 0;
          this.run.output += Number(ev.usage.outputTokens) || 0;
        }
        break;
      case "done":
        this.finished(s, ev);
        break;
      case "subagent:event":
        this.nested(s, ev, live);
        break;
      default:
        break; // every other event lives in the timeline only
    }
  }

  bubbleOf(s) {
    if (!s.bubble) {
      const name = s.agent || this.hooks.agent() || "assistant";
      s.bubble = bubble(s.depth ? "assistant nested" : "assistant", name, "");
      this.add(s.container, s.bubble);
    }
    return s.bubble;
  }

  completed(s, message) {
    const parts = Array.isArray(message.parts) ? message.parts : [];
    const text = parts.filter((p) => p && p.type === "text").map((p) => str(p.text)).join("");
    const thinking = parts.filter((p) => p && p.type === "thinking").map((p) => str(p.text)).join("");
    if (text || thinking || s.bubble) {
      const b = this.bubbleOf(s);
      if (text) b.setText(text);
      if (thinking) b.setThinking(thinking);
    }
    if (text) s.lastText = text;
    if (message.stopReason === "error" && message.error) this.notice(str(message.error), "error", s.container);
    for (const part of parts) {
      if (!part || part.type !== "tool_call") continue;
      const card = this.card(s, part.id, part.name);
      card.setArgs(part.args || {});
      if (!s.calls.includes(card)) s.calls.push(card);
    }
  }

  decided(s, ev) {
    // decisions name the tool only; they come one per call, in the order the model made them;
    // a call that was asked gets a second decision when a human answers (maybe in a later run)
    const tool = str(ev.tool);
    const inScope = [...this.cards.values()].filter((c) => c.scope === s.prefix && c.tool === tool);
    const card = s.calls.find((c) => c.tool === tool && !c.decision)
      || inScope.find((c) => c.dataset.status === "waiting")
      || inScope.find((c) => !c.decision);
    if (card) card.setDecision(str(ev.decision), str(ev.reason));
  }

  finished(s, ev) {
    if (s.depth > 0) return; // a subagent's end is its tool card's result
    const reason = str(ev.stopReason) || "completed";
    const answered = reason === "completed" || reason === "max_tokens";
    if (answered && ev.text && !s.lastText) {
      this.bubbleOf(s).setText(str(ev.text));
      s.lastText = str(ev.text);
    }
    const facts = [STOP_TEXT[reason] || reason];
    if (this.run.steps) facts.push(`${this.run.steps} step${this.run.steps === 1 ? "" : "s"}`);
    if (this.run.input || this.run.output) facts.push(`${this.run.input} in / ${this.run.output} out tokens`);
    const note = h("li", { class: `stop stop-${reason}`, testid: "run-stop", "data-stop-reason": reason },
      h("span", { class: "stop-facts" }, facts.join(" · ")));
    if (!answered && ev.text) note.append(h("span", { class: "stop-text" }, str(ev.text)));
    this.add(this.chat, note);
    s.bubble = null;
    s.lastText = "";
    this.hooks.done(reason);
  }

  nested(s, ev, live) {
    const origin = ev.origin || {};
    const inner = ev.event;
    if (!inner || typeof inner !== "object") return;
    const parent = this.cards.get(s.prefix + str(origin.callId));
    const prefix = `${s.prefix}${str(origin.sessionId || origin.callId)}|`;
    const child = this.scope(prefix, {
      container: parent ? parent.nestedList() : s.container,
      agent: str(origin.agent) || "subagent",
      sessionId: str(origin.sessionId),
      depth: s.depth + 1,
    });
    this.render(inner, child, live);
  }

  card(s, id, tool) {
    const key = s.prefix + str(id);
    let card = this.cards.get(key);
    if (!card) {
      card = toolCard(str(id), str(tool), s.depth ? s.agent : "");
      card.scope = s.prefix;
      this.cards.set(key, card);
      this.add(s.container, card);
    }
    return card;
  }

  // --- the timeline side ---------------------------------------------------------------------

  addTimeline(ev, seq) {
    const path = [];
    let inner = ev;
    while (inner && inner.type === "subagent:event" && inner.event) {
      path.push(str(inner.origin && inner.origin.agent) || "subagent");
      inner = inner.event;
    }
    const key = `${inner.type}|${path.join("/")}`;
    if (DELTAS.has(inner.type) && this.lastDelta && this.lastDelta.key === key) {
      const merged = this.lastDelta;
      merged.count += 1;
      merged.text += str(inner.delta);
      merged.count_el.textContent = `×${merged.count}`;
      merged.brief_el.textContent = clip(merged.text, 200);
      return;
    }
    const family = familyOf(inner.type);
    const failed = inner.type === "loop:error" || inner.type === "error" || inner.isError === true
      || (inner.type === "done" && inner.stopReason === "error");
    const countEl = h("span", { class: "tl-count" });
    const briefEl = h("span", { class: "tl-brief" }, clip(safeBrief(ev.type === "subagent:event" ? inner : ev), 200));
    const body = h("pre", { class: "tl-json" });
    const details = h(
      "details",
      {
        ontoggle: () => {
          if (!details.open || body.textContent) return;
          const shown = this.lastDelta && this.lastDelta.details === details
            ? { type: inner.type, deltas: this.lastDelta.count, text: this.lastDelta.text }
            : ev;
          body.textContent = json(shown, 2);
        },
      },
      h(
        "summary",
        null,
        h("span", { class: "tl-seq" }, seq === null ? "·" : `#${seq}`),
        path.map((agent) => h("span", { class: "agent-tag" }, agent)),
        h("span", { class: "tl-type" }, str(inner.type) || "(no type)"),
        countEl,
        briefEl,
        seq === null ? null : h("button", {
          type: "button", class: "tl-fork", testid: "fork-button",
          title: `Fork from here: a new session with this session's events up to #${seq}`,
          onclick: (e) => { e.preventDefault(); e.stopPropagation(); this.hooks.fork(Number(seq)); },
        }, "fork from here"),
      ),
      body,
    );
    const li = h(
      "li",
      {
        class: `tl fam-${family}${failed ? " is-error" : ""}${path.length ? " is-nested" : ""}`,
        testid: "timeline-item",
        "data-type": str(ev.type),
        "data-inner-type": path.length ? str(inner.type) : null,
        "data-seq": seq,
      },
      details,
    );
    this.timeline.append(li);
    this.lastDelta = DELTAS.has(inner.type)
      ? { key, count: 1, text: str(inner.delta), count_el: countEl, brief_el: briefEl, details }
      : null;
  }
}

function safeBrief(ev) {
  try {
    return brief(ev);
  } catch {
    return "";
  }
}

function bubble(kind, who, text) {
  const role = kind.split(" ")[0];
  const rich = role === "assistant"; // the model's words are Markdown; a person's are shown as typed
  const body = h("div", { class: `msg-text${rich ? " md" : ""}`, testid: "msg-text" }, rich ? null : text);
  const thought = h("pre", { class: "thinking-text" });
  const thinking = h("details", { class: "thinking", hidden: true }, h("summary", null, "Thinking"), thought);
  const el = h("li", { class: `msg ${kind}`, testid: `msg-${role}` }, h("div", { class: "who" }, who), thinking, body);
  let raw = rich ? str(text) : "";
  let queued = false;
  const render = () => {
    queued = false;
    body.replaceChildren(markdown(raw));
  };
  if (rich && raw) render();
  el.appendText = (delta) => {
    if (!rich) return body.append(delta);
    raw += delta;
    if (!queued) { // streamed deltas render once a frame, not once each
      queued = true;
      requestAnimationFrame(render);
    }
  };
  el.setText = (value) => {
    if (!rich) {
      body.textContent = value;
      return;
    }
    raw = str(value);
    render();
  };
  el.text = () => (rich ? raw : body.textContent);
  el.appendThinking = (delta) => {
    thinking.hidden = false;
    thought.append(delta);
  };
  el.setThinking = (value) => {
    thinking.hidden = false;
    thought.textContent = value;
  };
  return el;
}

/** A message's attachment: a thumbnail of an image picked on this page (`url`: its object URL),
 * else a chip naming it (the history holds references, not the bytes). */
function attachmentView(item) {
  const name = item.name || (item.sha256 ? item.sha256.slice(0, 12) : "attachment");
  const mediaType = item.mediaType || item.type || "";
  if (item.url && mediaType.startsWith("image/")) {
    return h("img", { class: "msg-thumb", testid: "msg-thumb", src: item.url, alt: name, title: name });
  }
  return h("span", { class: "msg-attachment", testid: "msg-attachment", title: mediaType }, `📎 ${name}`);
}

/** A large result stored whole (docs/large-results.md): "open full result" fetches it (with the
 * token, as every request) into the card; the link itself is the route, for a new tab. */
function storedResultLink(agent, sessionId, stored) {
  const path = `/agents/${enc(agent)}/sessions/${enc(sessionId)}/results/${enc(str(stored.name))}`;
  const full = h("pre", { class: "code", testid: "full-result", hidden: true });
  const open = async (event) => {
    event.preventDefault();
    const res = await api(path, { accept: "text/plain" });
    full.textContent = res.ok ? await res.text() : `Could not open it: ${str((await readBody(res)).error)}`;
    full.hidden = false;
  };
  const size = Number(stored.size || 0).toLocaleString("en");
  const link = h("a", { href: path, testid: "open-full-result", target: "_blank", onclick: open }, "open full result");
  return h("div", { class: "stored-result" }, link, h("span", { class: "muted small" }, ` (${size} bytes)`), full);
}

/** A tool result's UI-only `details` (never sent to the model): its JSON, collapsed. */
function toolDetailsView() {
  const pre = h("pre", { class: "code", testid: "tool-details-json" });
  const box = h("details", { class: "tool-details", testid: "tool-details", hidden: true },
    h("summary", null, "Details"), pre);
  box.show = (value) => {
    box.hidden = false;
    pre.textContent = json(value, 2);
  };
  return box;
}

function toolCard(id, tool, agent) {
  const status = h("span", { class: "badge", testid: "tool-status" }, "preparing");
  const decision = h("span", { class: "decision", testid: "tool-decision", hidden: true });
  const detail = h("p", { class: "tool-detail muted", hidden: true });
  const note = h("p", { class: "tool-note", testid: "tool-note", hidden: true });
  const args = h("pre", { class: "code", testid: "tool-args" });
  const progress = h("p", { class: "tool-progress muted", testid: "tool-progress", hidden: true });
  const output = h("pre", { class: "code", testid: "tool-output" });
  const outputBox = h("details", { class: "tool-output", open: true, hidden: true }, h("summary", null, "Result"), output);
  const nested = h("ol", { class: "nested", hidden: true, "aria-label": `${tool} events` });
  const name = h("span", { class: "tool-name", testid: "tool-name" }, tool || "(tool)");
  const details = toolDetailsView();
  const card = h(
    "li",
    { class: "tool-card", testid: "tool-card", "data-call-id": id, "data-tool": tool, "data-status": "preparing" },
    h("div", { class: "tool-head" },
      h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
      name,
      agent ? h("span", { class: "agent-tag" }, agent) : null,
      status,
      decision),
    detail,
    note,
    h("details", { class: "tool-args", open: true }, h("summary", null, "Arguments"), args),
    progress,
    nested,
    outputBox,
    details,
  );
  card.tool = tool;
  card.decision = "";
  card.setStatus = (state, label) => {
    card.dataset.status = state;
    status.textContent = label;
  };
  card.setArgs = (value, edited = false) => {
    args.textContent = json(value, 2);
    if (edited) args.classList.add("edited");
  };
  card.setDetail = (text) => {
    detail.hidden = false;
    detail.textContent = text;
  };
  card.setNote = (text) => {
    note.hidden = false;
    note.textContent = text;
  };
  card.setDecision = (value, reason) => {
    const before = card.decision;
    card.decision = value;
    decision.hidden = false;
    decision.dataset.decision = value;
    decision.textContent = before && before !== value ? `${before} → ${value}` : value;
    decision.title = reason;
    if (reason) card.setDetail(reason);
    if (value === "deny") card.setStatus("denied", "denied");
  };
  card.setProgress = (message, fraction) => {
    progress.hidden = false;
    progress.textContent = fraction != null ? `${message} (${Math.round(fraction * 100)}%)` : message;
  };
  card.setOutput = (content, isError) => {
    outputBox.hidden = false;
    output.textContent = content;
    card.classList.toggle("is-error", isError);
  };
  card.setResult = (statusText) => {
    const state = { "Approved.": "done", "Error.": "error", "Denied.": "denied", "Skipped.": "skipped" }[statusText];
    const failed = card.classList.contains("is-error");
    card.setStatus(failed && state === "done" ? "error" : state || "done", statusText || "done");
  };
  card.setLabel = (label) => { // a tool's human name; its name stays the tooltip
    name.textContent = label;
    name.title = tool;
  };
  card.setDetails = details.show;
  card.nestedList = () => {
    nested.hidden = false;
    return nested;
  };
  return card;
}

// ---------------------------------------------------------------------------------------------
// Page state

const state = {
  agents: [],
  agent: "",
  sessionId: null,
  running: false,
  stream: null, // AbortController of the stream being read
  runToken: 0, // bumps when a stream is abandoned (another session or agent shown)
  viewToken: 0, // bumps whenever another session or agent is shown
  lastSeq: 0,
  lastStop: "", // the stop reason of the last run shown
  pending: new Map(), // id → {item, el, busy, addedAt}
  polling: false,
  config: null,
  attachments: [], // files picked for the next message: {file, name, url}
  titles: new Map(), // session id → its title (the sessions listing's)
};

const transcript = new Transcript($("chat-log"), $("timeline"), {
  agent: () => state.agent,
  session: (id) => {
    if (id && id !== state.sessionId) {
      state.sessionId = id;
      showSession();
    }
  },
  pending: (item) => {
    addPending(item);
    if (state.running) setStatus("waiting", "waiting for a decision");
  },
  resolved: (id) => {
    dropPending(id);
    if (state.running) setStatus("running", "running…");
  },
  done: (reason) => {
    state.lastStop = reason;
    setStatus(reason, STOP_TEXT[reason] || reason);
  },
  fork: (seq) => forkFrom(seq),
});

/** "Fork from here": a new session with the current one's events up to `seq` (the original is
 * untouched), opened at once (docs/fork.md). */
async function forkFrom(seq) {
  if (state.running) {
    showError("fork: wait for the run to end (or fork once it paused)");
    return;
  }
  const data = await sessionCommand("fork", { at: seq });
  if (!data) return;
  await openSession(str(data.sessionId));
  refreshSessions();
}

/** Where a fork came from (`forkedFrom` of its body), as a link to the source session. */
function showLineage(forkedFrom) {
  const line = $("session-lineage");
  line.replaceChildren();
  line.hidden = !forkedFrom;
  line.dataset.forkedFrom = forkedFrom ? str(forkedFrom.session) : "";
  line.dataset.forkedAt = forkedFrom ? str(forkedFrom.seq) : "";
  if (!forkedFrom) return;
  line.append("forked from ", h("button", {
    type: "button", class: "link", testid: "lineage-source", title: str(forkedFrom.session),
    onclick: () => openSession(str(forkedFrom.session)),
  }, short(forkedFrom.session)), ` at #${str(forkedFrom.seq)}`);
}

/** The session's usage line (requests, tokens, cost with its subagents), from its body. */
function showCost(usage) {
  const line = $("session-cost");
  if (!usage || !state.sessionId) {
    line.hidden = true;
    line.textContent = "";
    return;
  }
  const n = Number(usage.requests) || 0;
  let cost = "$0";
  if (n && usage.cost == null) cost = "no price known";
  else if (n) {
    cost = `$${Number(usage.cost).toFixed(4)}`;
    const unpriced = Number(usage.unpricedRequests) || 0;
    if (unpriced) cost += ` (${unpriced} without a price)`;
  }
  line.textContent = `${n} request${n === 1 ? "" : "s"} · ${usage.inputTokens} in · ${usage.outputTokens} out · ${cost}`;
  line.hidden = false;
}

async function refreshCost(view) {
  if (!state.sessionId) return;
  try {
    const info = await getJson(`/agents/${enc(state.agent)}/sessions/${enc(state.sessionId)}`);
    if (view === state.viewToken) showCost(info.usage);
  } catch {
    // the line keeps what it showed: the next run or opening the session refreshes it
  }
}

function showError(message) {
  $("error-text").textContent = message;
  $("error-banner").hidden = false;
}

function clearError() {
  $("error-banner").hidden = true;
}

function setStatus(name, text) {
  const el = $("run-status");
  el.dataset.state = name;
  el.textContent = text;
}

function setRunning(running) {
  state.running = running;
  $("cancel-button").hidden = !running;
  $("steer-button").hidden = !running || !state.sessionId;
  $("send-button").disabled = running || !state.agent;
  $("compact-button").hidden = running || !state.sessionId;
  if (running) setStatus("running", "running…");
  else transcript.showThinking(false);
}

/** The chat pane's heading: the session's title (its first message), else "Chat". */
function showTitle() {
  const title = (state.sessionId && state.titles.get(state.sessionId)) || "";
  $("chat-title").textContent = title || "Chat";
  $("chat-title").title = title;
}

function showSession() {
  showTitle();
  const label = $("session-id");
  label.textContent = state.sessionId ? `session ${short(state.sessionId)}` : "new conversation";
  label.title = state.sessionId ? `${state.sessionId} (click to copy)` : "";
  label.dataset.sessionId = state.sessionId || "";
  if (!state.sessionId) {
    showCost(null);
    showLineage(null);
  }
  $("compact-button").hidden = state.running || !state.sessionId;
  $("steer-button").hidden = !state.running || !state.sessionId;
  const params = new URLSearchParams();
  if (state.agent) params.set("agent", state.agent);
  if (state.sessionId) params.set("session", state.sessionId);
  history.replaceState(null, "", `${location.pathname}?${params}`);
  for (const button of $("sessions-list").querySelectorAll("button[data-session-id]")) {
    button.setAttribute("aria-current", String(button.dataset.sessionId === state.sessionId));
  }
}

/** Stop reading the current stream (the run itself goes on on the server). */
function abandonStream() {
  state.runToken += 1;
  if (state.stream) state.stream.abort();
  state.stream = null;
  setRunning(false);
}

// ---------------------------------------------------------------------------------------------
// Runs

async function sendMessage(text) {
  if (!state.agent || state.running || !text.trim()) return;
  clearError();
  const body = { message: text };
  if (state.sessionId) body.sessionId = state.sessionId;
  const files = state.attachments.slice();
  if (files.length) {
    body.attachments = await Promise.all(
      files.map(async (f) => ({ data: await base64Of(f.file), name: f.name })),
    );
  }
  const controller = new AbortController();
  state.stream = controller;
  setRunning(true);
  let res;
  try {
    res = await api(`/agents/${enc(state.agent)}/messages/stream`, {
      method: "POST", body, accept: "text/event-stream", signal: controller.signal,
    });
  } catch (err) {
    setRunning(false);
    if (err.name !== "AbortError") showError(`Could not reach the server: ${err.message}`);
    return;
  }
  if (!isEventStream(res)) {
    const data = await readBody(res);
    setRunning(false);
    setStatus("idle", "idle");
    showError(data.error || `HTTP ${res.status}`);
    return;
  }
  $("message-input").value = "";
  setAttachments([]);
  transcript.userMessage(text, files.map((f) => ({ name: f.name, mediaType: f.file.type, url: f.url })));
  await consumeStream(res, controller);
}

/** The files picked to go with the next message, shown as chips above the buttons. */
function setAttachments(files) {
  state.attachments = files;
  const list = $("attachments-list");
  list.replaceChildren(
    ...files.map((f, i) =>
      h(
        "li",
        { class: "attachment-chip", testid: "attachment-chip" },
        `📎 ${f.name}`,
        h("button", {
          type: "button",
          class: "icon",
          "aria-label": `Remove ${f.name}`,
          onclick: () => setAttachments(files.filter((_, j) => j !== i)),
        }, "×"),
      ),
    ),
  );
  list.hidden = files.length === 0;
}

function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** Render a streamed run until it ends, then refresh what it may have changed. */
async function consumeStream(res, controller = new AbortController()) {
  const token = ++state.runToken;
  state.stream = controller;
  setRunning(true);
  let sawDone = false;
  try {
    for await (const frame of sseFrames(res.body)) {
      if (token !== state.runToken) break;
      if (frame.seq !== null) state.lastSeq = Math.max(state.lastSeq, frame.seq);
      transcript.apply(frame.event, { seq: frame.seq, live: true });
      if (frame.event.type === "done") sawDone = true;
    }
  } catch (err) {
    if (token === state.runToken && err.name !== "AbortError") {
      transcript.notice(`The stream broke off: ${err.message}`, "error");
    }
  }
  if (token !== state.runToken) return;
  state.stream = null;
  setRunning(false);
  if (!sawDone && state.sessionId) {
    // the connection ended early: fetch what the log holds and keep following the run
    await catchUp(state.viewToken);
    followIfRunning(state.viewToken);
  }
  refreshSessions();
  refreshCost(state.viewToken); // (once the stream ended: the run's usage is in the log)
  if (!$("trace-view").hidden) loadTrace();
  pollPending();
}

async function fetchEvents(sessionId, after) {
  const events = [];
  for (let page = 0; page < 1000; page += 1) {
    const data = await getJson(
      `/agents/${enc(state.agent)}/sessions/${enc(sessionId)}/events?after=${after}`,
    );
    const batch = Array.isArray(data.events) ? data.events : [];
    if (!batch.length) break;
    events.push(...batch);
    const last = Number(batch[batch.length - 1].seq);
    if (!Number.isFinite(last) || last <= after) break;
    after = last;
  }
  return events;
}

async function catchUp(view) {
  try {
    const events = await fetchEvents(state.sessionId, state.lastSeq);
    if (view !== state.viewToken) return false;
    for (const record of events) {
      state.lastSeq = Math.max(state.lastSeq, Number(record.seq) || 0);
      transcript.apply(record.event, { seq: record.seq, live: false });
    }
    transcript.scroll();
    return events.length > 0;
  } catch (err) {
    transcript.notice(`Could not load the session's events: ${err.message}`, "error");
    return false;
  }
}

/** A run going on elsewhere (another tab, the CLI, an approval): follow its log. */
async function followIfRunning(view) {
  for (;;) {
    if (view !== state.viewToken || state.running || !state.sessionId) return;
    let info;
    try {
      info = await getJson(`/agents/${enc(state.agent)}/sessions/${enc(state.sessionId)}`);
    } catch {
      return;
    }
    if (view !== state.viewToken || state.running) return;
    await catchUp(view);
    if (!/^(running|busy|active)$/.test(str(info.status))) return;
    setStatus("running", "running (elsewhere)…");
    await sleep(FOLLOW_MS);
  }
}

async function openSession(sessionId) {
  abandonStream();
  const view = ++state.viewToken;
  clearError();
  transcript.reset();
  state.sessionId = sessionId;
  state.lastSeq = 0;
  state.lastStop = "";
  showSession();
  setStatus("idle", "loading…");
  let info;
  try {
    info = await getJson(`/agents/${enc(state.agent)}/sessions/${enc(sessionId)}`);
  } catch (err) {
    if (view === state.viewToken) showError(`Could not open session ${sessionId}: ${err.message}`);
    setStatus("idle", "idle");
    return;
  }
  if (view !== state.viewToken) return;
  showCost(info.usage);
  showLineage(info.forkedFrom);
  const loaded = await catchUp(view);
  if (view !== state.viewToken) return;
  if (!loaded) renderHistory(info.history);
  for (const item of info.pending || []) addPending({ ...item, sessionId: item.sessionId || sessionId, agent: item.agent || state.agent });
  const status = str(info.status);
  if (/^(running|busy|active)$/.test(status)) followIfRunning(view);
  else if (status === "paused") setStatus("paused", STOP_TEXT.paused);
  else if (state.lastStop) setStatus(state.lastStop, STOP_TEXT[state.lastStop] || state.lastStop);
  else setStatus(status || "idle", status || "idle");
  transcript.scroll(true);
  if (!$("trace-view").hidden) loadTrace();
}

/** An app's custom message (`message:custom`): a note in the conversation, with its kind. */
function customNote(message) {
  return h("li", { class: "custom-note", testid: "custom-note", "data-kind": str(message.kind) },
    h("span", { class: "custom-kind", text: str(message.kind) }), " ", str(message.content));
}

/** A handoff (`agent:handoff`): a note in the conversation naming both agents. */
function handoffNote(ev) {
  return h("li", { class: "handoff-note", testid: "handoff-note", "data-to": str(ev.to) },
    `→ handed off from ${str(ev.from)} to ${str(ev.to)}`);
}

/** The header's "with <agent>": the session's active agent after a handoff (none before). */
function showActiveAgent(name) {
  const el = document.getElementById("active-agent");
  if (!el) return;
  el.textContent = name ? `with ${name}` : "";
  el.hidden = !name;
}

/** Without an event log (should not happen), show the stored messages. */
function renderHistory(history) {
  for (const message of Array.isArray(history) ? history : []) {
    if (message.role === "user") transcript.apply({ type: "input:received", message });
    else if (message.role === "assistant") transcript.apply({ type: "message:completed", message });
    else if (message.role === "custom") transcript.apply({ type: "message:custom", message });
    else if (message.role === "tool") {
      transcript.apply({
        type: "tool:output", id: message.callId, tool: message.tool, content: message.content,
        isError: message.isError, attachments: message.attachments, details: message.details,
      });
    }
  }
}

async function sessionCommand(action, body) {
  if (!state.sessionId) return null;
  clearError();
  const res = await api(`/agents/${enc(state.agent)}/sessions/${enc(state.sessionId)}/${action}`, {
    method: "POST", body: body || {},
  });
  const data = await readBody(res);
  if (!res.ok) {
    showError(`${action}: ${data.error || `HTTP ${res.status}`}`);
    return null;
  }
  return data;
}

// ---------------------------------------------------------------------------------------------
// Pending items: from the stream, from GET /pending (also items raised while no page was open)

// session ids belong to an agent: the same id under another agent is another session
function belongsToCurrent(item) {
  const agent = item.rootAgent || item.agent;
  return Boolean(state.sessionId && item.sessionId)
    && (!agent || agent === state.agent)
    && (item.sessionId === state.sessionId || str(item.sessionId).startsWith(`${state.sessionId}/`));
}

function addPending(item) {
  if (!item || !item.id) return;
  const known = state.pending.get(item.id);
  if (known) {
    known.item = { ...known.item, ...item, live: known.item.live || item.live };
    return;
  }
  const entry = { item, busy: false, addedAt: performance.now() };
  entry.el = pendingCard(entry);
  state.pending.set(item.id, entry);
  $("pending-list").append(entry.el);
  updatePendingPanel();
}

function dropPending(id) {
  const entry = state.pending.get(id);
  if (!entry) return;
  entry.el.remove();
  state.pending.delete(id);
  updatePendingPanel();
}

function updatePendingPanel() {
  const n = state.pending.size;
  $("pending-panel").hidden = n === 0;
  $("pending-count").textContent = n ? `(${n})` : "";
}

async function pollPending() {
  if (state.polling) return;
  state.polling = true;
  const started = performance.now();
  try {
    const data = await getAll("/pending?limit=200", "items");
    $("pending-poll-error").hidden = true;
    const items = Array.isArray(data.items) ? data.items : [];
    const seen = new Set();
    for (const item of items) {
      if (!item || !item.id) continue;
      seen.add(item.id);
      addPending(item);
    }
    for (const [id, entry] of state.pending) {
      const streaming = entry.item.live && state.running && belongsToCurrent(entry.item);
      if (!seen.has(id) && !entry.busy && !streaming && entry.addedAt < started) dropPending(id);
    }
  } catch (err) {
    const line = $("pending-poll-error");
    line.hidden = false;
    line.textContent = `Could not list pending items: ${err.message}`;
  } finally {
    state.polling = false;
  }
}

function pendingUrl(item, action) {
  const given = { approve: item.approveUrl, deny: item.denyUrl, answer: item.answerUrl }[action];
  if (typeof given === "string" && given.startsWith("/") && !given.startsWith("//")) return given;
  return action === "answer" ? `/questions/${enc(item.id)}/answer` : `/approvals/${enc(item.id)}/${action}`;
}

function pendingCard(entry) {
  const item = entry.item;
  const error = h("p", { class: "inline-error", testid: "pending-error", role: "alert", hidden: true });
  const buttons = [];
  const button = (label, props, onclick) => {
    const b = h("button", { type: "button", ...props, onclick }, label);
    buttons.push(b);
    return b;
  };
  const ui = {
    error(message) {
      error.hidden = !message;
      error.textContent = message || "";
    },
    busy(on) {
      entry.busy = on;
      for (const b of buttons) b.disabled = on;
      card.setAttribute("aria-busy", String(on));
    },
  };
  const head = h("div", { class: "pending-head" },
    h("span", { class: "badge kind" }, item.type === "question" ? "question" : "approval"),
    item.tool ? h("strong", { class: "tool-name", title: str(item.tool) }, str(item.label || item.tool)) : null,
    item.agent ? h("span", { class: "agent-tag" }, str(item.agent)) : null,
    h("span", { class: "muted small", title: str(item.sessionId) },
      `session ${short(item.sessionId)}${item.requestedAt ? ` · ${ago(item.requestedAt)}` : ""}`));
  const card = h("li", {
    class: `pending-card ${item.type === "question" ? "question" : "approval"}`,
    testid: "pending-card",
    "data-pending-id": str(item.id),
    "data-type": str(item.type),
    "data-session-id": str(item.sessionId),
  }, head);

  if (item.type === "question") {
    card.append(h("p", { class: "question-text", testid: "pending-question" }, str(item.question)));
    const options = Array.isArray(item.options) ? item.options : [];
    if (options.length) {
      card.append(h("div", { class: "row options" }, options.map((option) =>
        button(str(option), { testid: "answer-option" }, () => resolvePending(entry, "answer", { answer: str(option) }, ui)))));
    }
    const input = h("input", { type: "text", testid: "answer-input", "aria-label": "Your answer", placeholder: "Your answer" });
    const send = () => {
      if (!input.value.trim()) return ui.error("Type an answer or pick an option.");
      resolvePending(entry, "answer", { answer: input.value }, ui);
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") send();
    });
    card.append(h("div", { class: "row" }, input, button("Answer", { class: "primary", testid: "answer-button" }, send)));
  } else {
    if (item.reason) card.append(h("p", { class: "muted", testid: "pending-reason" }, str(item.reason)));
    if (item.scope && typeof item.scope === "object") {
      const scope = Object.entries(item.scope).map(([k, v]) => `${k}: ${str(v)}`).join(" · ");
      card.append(h("p", { class: "muted small" }, scope));
    }
    card.append(h("pre", { class: "code", testid: "pending-args" }, json(item.args || {}, 2)));
    const reason = h("input", { type: "text", testid: "deny-reason", "aria-label": "Reason for denying (optional)", placeholder: "reason (optional)" });
    const editor = h("textarea", { class: "code", testid: "edit-args", rows: 6, spellcheck: "false", "aria-label": "Edited arguments (JSON)" });
    const editBox = h("div", { class: "edit-box", hidden: true },
      h("label", null, "Arguments (JSON)"), editor,
      h("div", { class: "row" },
        button("Approve with these arguments", { class: "primary", testid: "edit-submit" }, () => {
          let args;
          try {
            args = JSON.parse(editor.value);
          } catch (err) {
            return ui.error(`Invalid JSON: ${err.message}`);
          }
          if (!args || typeof args !== "object" || Array.isArray(args)) return ui.error("The arguments must be a JSON object.");
          resolvePending(entry, "approve", { args }, ui);
        }),
        button("Cancel", { testid: "edit-cancel" }, () => {
          editBox.hidden = true;
          ui.error("");
        })));
    card.append(
      h("div", { class: "row actions" },
        button("Approve", { class: "primary", testid: "approve-button" }, () => resolvePending(entry, "approve", {}, ui)),
        button("Deny", { class: "danger", testid: "deny-button" }, () =>
          resolvePending(entry, "deny", reason.value.trim() ? { reason: reason.value.trim() } : {}, ui)),
        reason,
        button("Edit arguments", { testid: "edit-button" }, () => {
          editBox.hidden = !editBox.hidden;
          if (!editBox.hidden) {
            editor.value = json(entry.item.args || {}, 2);
            editor.focus();
          }
        })),
      editBox,
    );
  }
  card.append(error);
  return card;
}

/** Decide a pending item. Its run's continuation is streamed into the chat. */
async function resolvePending(entry, action, body, ui) {
  if (entry.busy) return;
  const item = entry.item;
  ui.busy(true);
  ui.error("");
  try {
    // the run waiting on a live stream goes on in that stream; otherwise stream the resumed run
    const live = state.running && belongsToCurrent(item);
    if (!live && !belongsToCurrent(item)) await showItemSession(item);
    const res = await api(pendingUrl(item, action), {
      method: "POST", body, accept: live ? "application/json" : "text/event-stream",
    });
    if (isEventStream(res)) {
      dropPending(item.id);
      await consumeStream(res);
      return;
    }
    const data = await readBody(res);
    if (!res.ok) {
      ui.error(data.error || `HTTP ${res.status}`);
      return;
    }
    dropPending(item.id);
    if (data.alreadyResolved) transcript.notice("That item had already been resolved.", "info");
    else if (!live && state.sessionId) {
      await catchUp(state.viewToken);
      followIfRunning(state.viewToken);
    }
    if (data.pending && data.id) addPending({ ...data, agent: data.agent || item.agent });
  } catch (err) {
    ui.error(`Could not reach the server: ${err.message}`);
  } finally {
    ui.busy(false);
    refreshSessions();
  }
}

/** Show the session an item belongs to; a subagent's session (`parent/child/call`) is shown
 * through its parent's, on whichever agent owns it. */
async function showItemSession(item) {
  const sid = str(item.sessionId).split("/")[0];
  if (!sid) return;
  const known = (name) => state.agents.some((a) => a.name === name);
  const names = [item.agent, state.agent, ...state.agents.map((a) => a.name)]
    .filter((name, i, all) => name && known(name) && all.indexOf(name) === i);
  for (const name of names) {
    let res;
    try {
      res = await api(`/agents/${enc(name)}/sessions/${enc(sid)}`);
    } catch {
      return;
    }
    if (!res.ok) continue;
    if (name !== state.agent) await selectAgent(name, sid);
    else await openSession(sid);
    return;
  }
}

// ---------------------------------------------------------------------------------------------
// Agents, sessions, configuration

async function loadAgents(wanted, session) {
  const select = $("agent-select");
  let data;
  try {
    data = await getJson("/agents");
  } catch (err) {
    select.replaceChildren(h("option", { value: "" }, "(unavailable)"));
    showError(`Could not list agents: ${err.message}`);
    if (err.status === 401 || err.status === 403) $("token-box").open = true;
    return;
  }
  clearError();
  state.agents = Array.isArray(data.agents) ? data.agents : [];
  select.replaceChildren(
    ...(state.agents.length
      ? state.agents.map((a) => h("option", { value: str(a.name) }, str(a.name)))
      : [h("option", { value: "" }, "(no agents)")]),
  );
  const name = state.agents.some((a) => a.name === wanted) ? wanted : str(state.agents[0] && state.agents[0].name);
  await selectAgent(name, session);
}

async function selectAgent(name, session) {
  abandonStream();
  state.viewToken += 1;
  state.agent = name;
  state.sessionId = null;
  state.config = null;
  $("agent-select").value = name;
  const info = state.agents.find((a) => a.name === name);
  $("agent-description").textContent = info ? [str(info.description), str(info.model)].filter(Boolean).join(" · ") : "";
  transcript.reset();
  setRunning(false);
  setStatus("idle", "idle");
  showSession();
  refreshSessions();
  if (!$("config-view").hidden) loadConfig();
  if (!$("trace-view").hidden) loadTrace();
  if (session) await openSession(session);
}

async function refreshSessions() {
  if (!state.agent) return;
  const agent = state.agent;
  const ticket = ++lifecycle.listings; // (a listing overtaken by a newer one is not shown)
  let data;
  try {
    data = await getAll(`/agents/${enc(agent)}/sessions?limit=200`, "sessions");
  } catch (err) {
    $("sessions-list").replaceChildren(h("li", { class: "muted" }, `Could not list sessions: ${err.message}`));
    return;
  }
  if (agent !== state.agent || ticket !== lifecycle.listings) return;
  const sessions = (Array.isArray(data.sessions) ? data.sessions : [])
    .slice()
    .sort((a, b) => str(b.updatedAt).localeCompare(str(a.updatedAt)));
  state.titles = new Map(sessions.map((s) => [str(s.id), str(s.title)]));
  showTitle();
  $("sessions-list").replaceChildren(
    ...(sessions.length
      ? sessions.map((s) => {
          const current = s.id === state.sessionId;
          return h("li", { "data-session-id": str(s.id) },
            h("button", {
              type: "button", class: "session-item", testid: "session-item",
              "data-session-id": str(s.id), "aria-current": String(current), title: str(s.id),
              onclick: () => openSession(str(s.id)),
            },
            h("span", { class: s.title ? "session-title" : "session-title untitled", testid: "session-title" },
              str(s.title) || "(no message yet)"),
            statusBadge(str(s.id), s.status),
            h("span", { class: "muted small" },
              h("span", { class: "session-name", testid: "session-short-id" }, short(s.id)),
              ` · ${ago(s.updatedAt || s.createdAt)} · ${str(s.lastSeq)} events`),
            s.forkedFrom ? h("span", { class: "muted small lineage", testid: "session-lineage-item" },
              `forked from ${short(s.forkedFrom.session)} at #${str(s.forkedFrom.seq)}`) : null));
        })
      : [h("li", { class: "muted empty" }, "No sessions yet.")]),
  );
}

// ---------------------------------------------------------------------------------------------
// Live status badges: the tenant's lifecycle notifications (GET /lifecycle, SSE read with fetch
// to send the token) repaint a listed session's badge and list a new session without a reload

const LIFECYCLE_RETRY_MS = 5000;
const STATUS_TITLE = {
  running: "running",
  waiting: "waiting for a decision",
  paused: "paused: waiting for a decision",
  idle: "idle",
  interrupted: "interrupted: its last run ended without its end recorded",
};
const lifecycle = {
  controller: null, // AbortController of the lifecycle stream
  retry: null,
  statuses: new Map(), // "agent\nsession id" → its last status heard live (over stored ones)
  listings: 0, // bumps with each sessions listing asked for
};

/** A session's badge: its live status when one was heard since the stream opened, else the
 *  stored one of the listing. */
function statusBadge(id, stored) {
  const badge = h("span", { testid: "session-status", "data-session-id": id });
  paintStatus(badge, lifecycle.statuses.get(`${state.agent}\n${id}`) || str(stored));
  return badge;
}

function paintStatus(badge, status) {
  badge.className = `badge status-${status || "unknown"}`;
  badge.dataset.status = status;
  badge.textContent = status || "?";
  badge.title = STATUS_TITLE[status] || "";
}

/** Follow GET /lifecycle (again: a new token, a dropped stream). `body[data-lifecycle]` says
 *  where it stands: connecting, live, reconnecting, or off (refused: no live badges). */
async function followLifecycle() {
  if (lifecycle.controller) lifecycle.controller.abort();
  clearTimeout(lifecycle.retry);
  const controller = new AbortController();
  lifecycle.controller = controller;
  lifecycle.statuses.clear();
  document.body.dataset.lifecycle = "connecting";
  try {
    const res = await api("/lifecycle", { accept: "text/event-stream", signal: controller.signal });
    if (!isEventStream(res)) {
      res.body?.cancel().catch(() => {});
      if (res.status < 500) {
        document.body.dataset.lifecycle = "off"; // no token, or a profile without lifecycle
        return;
      }
    } else {
      document.body.dataset.lifecycle = "live";
      refreshSessions(); // statuses from the log now, changes from here on
      for await (const { event } of sseFrames(res.body)) onLifecycle(event);
    }
  } catch {
    // dropped (or aborted: then a newer stream has taken over)
  }
  if (controller.signal.aborted || lifecycle.controller !== controller) return;
  document.body.dataset.lifecycle = "reconnecting";
  lifecycle.retry = setTimeout(followLifecycle, LIFECYCLE_RETRY_MS);
}

function onLifecycle(ev) {
  const id = str(ev.sessionId);
  const key = `${str(ev.agent)}\n${id}`;
  if (ev.type === "session:status") lifecycle.statuses.set(key, str(ev.status));
  else if (ev.type === "session:disposed") lifecycle.statuses.delete(key);
  if (str(ev.agent) !== state.agent) return;
  if (ev.type === "session:created") return void refreshSessions();
  if (ev.type === "session:disposed" && ev.reason !== "evicted" && ev.reason !== "closed") {
    return void refreshSessions(); // its run failed or moved: the stored status says
  }
  if (ev.type !== "session:status") return;
  for (const badge of $("sessions-list").querySelectorAll("[data-testid=session-status]")) {
    if (badge.dataset.sessionId === id) paintStatus(badge, str(ev.status));
  }
}

async function loadConfig() {
  const agent = state.agent;
  const bodyEl = $("config-body");
  $("config-empty").hidden = Boolean(agent);
  if (!agent) return bodyEl.replaceChildren();
  if (state.config && state.config.name === agent) return;
  bodyEl.replaceChildren(h("p", { class: "muted" }, "loading…"));
  try {
    const config = await getJson(`/agents/${enc(agent)}/config`);
    if (agent !== state.agent) return;
    state.config = config;
    bodyEl.replaceChildren(...renderConfig(config));
  } catch (err) {
    bodyEl.replaceChildren(h("p", { class: "inline-error" }, `Could not load the configuration: ${err.message}`));
  }
}

function renderConfig(c) {
  const row = (label, value) => [h("dt", null, label), h("dd", null, value === undefined || value === null || value === "" ? "—" : str(value))];
  const section = (title, testid, ...content) =>
    h("section", { class: "config-section", testid }, h("h2", null, title), ...content);
  const tools = Array.isArray(c.tools) ? c.tools : [];
  const perms = c.permissions || {};
  const rules = Array.isArray(perms.rules) ? perms.rules : [];
  const skills = Array.isArray(c.skills) ? c.skills : [];
  const subagents = Array.isArray(c.subagents) ? c.subagents : [];
  const named = (x) => (x && typeof x === "object" ? str(x.name) : str(x));
  return [
    // the rules file's current version failed to load: the last good rules are in force
    c.configError ? h("p", { class: "inline-error", testid: "config-error", role: "alert" }, `Configuration error: ${str(c.configError)}`) : null,
    section(str(c.name) || "Agent", "config-overview",
      h("dl", { class: "facts" },
        row("Description", c.description), row("Model", typeof c.model === "object" ? json(c.model) : c.model),
        row("Max turns", c.maxTurns), row("On deny", c.onDeny),
        row("Context budget (tokens)", c.contextBudgetTokens))),
    section("System prompt", "config-prompt", h("pre", { class: "code prompt" }, str(c.systemPrompt) || "(none)")),
    section(`Tools (${tools.length})`, "config-tools",
      tools.length ? h("ul", { class: "config-list" }, tools.map((t) =>
        h("li", { testid: "config-tool", "data-tool-name": str(t.name) },
          h("details", null,
            h("summary", null, h("strong", null, str(t.name)),
              t.gated === false
                ? h("span", { class: "badge", title: "not an action: never asked or denied" }, "always allowed")
                : h("span", { class: "badge warn", title: "every call goes through the permission rules" }, "gated"),
              t.subagent ? h("span", { class: "badge", title: "a subagent called as a tool" }, `subagent${typeof t.subagent === "string" ? `: ${t.subagent}` : ""}`) : null,
              h("span", { class: "muted" }, ` ${clip(t.description, 140)}`)),
            h("p", null, str(t.description)),
            h("pre", { class: "code" }, json(t.input_schema ?? t.inputSchema ?? {}, 2)))))) : h("p", { class: "muted" }, "No tools.")),
    section("Permissions", "config-rules",
      h("dl", { class: "facts" }, row("Rules file", perms.source), row("Default decision", perms.defaultDecision)),
      rules.length
        ? h("table", { class: "rules" },
          h("thead", null, h("tr", null, ["Rule", "Tool", "Decision", "Condition / scope"].map((x) => h("th", { scope: "col" }, x)))),
          h("tbody", null, rules.map((r) => {
            const { name, tool, decision, ...more } = r && typeof r === "object" ? r : { name: str(r) };
            // leave out what says nothing: unset conditions and scopes matching everyone
            const rest = Object.fromEntries(Object.entries(more).filter(([, v]) => v !== null && v !== "*"));
            return h("tr", { testid: "config-rule" },
              h("td", null, str(name)), h("td", null, h("code", null, str(tool))),
              h("td", null, h("span", { class: `badge decision-${str(decision)}` }, str(decision))),
              h("td", null, Object.keys(rest).length ? h("code", null, json(rest)) : "—"));
          })))
        : h("p", { class: "muted" }, "No rules: every call gets the default decision.")),
    section(`Skills (${skills.length})`, "config-skills",
      skills.length ? h("ul", { class: "config-list" }, skills.map((s) =>
        h("li", null, h("strong", null, named(s)), s && s.description ? ` — ${str(s.description)}` : ""))) : h("p", { class: "muted" }, "No skills.")),
    section(`Subagents (${subagents.length})`, "config-subagents",
      subagents.length ? h("ul", { class: "config-list" }, subagents.map((s) =>
        h("li", { testid: "config-subagent" }, s && typeof s === "object"
          ? h("details", null,
            h("summary", null, h("strong", null, named(s)), h("span", { class: "muted" }, clip(s.description, 140))),
            h("pre", { class: "code" }, json(s, 2)))
          : h("strong", null, named(s))))) : h("p", { class: "muted" }, "No subagents.")),
    h("details", { class: "raw" }, h("summary", null, "Raw configuration (JSON)"), h("pre", { class: "code" }, json(c, 2))),
  ].filter(Boolean);
}

// ---------------------------------------------------------------------------------------------
// The trace: the session's steps, each timed, with its tokens, cost and tool calls (GET .../trace)

async function loadTrace() {
  const bodyEl = $("trace-body");
  const { agent, sessionId, viewToken } = state;
  $("trace-empty").hidden = Boolean(sessionId);
  if (!sessionId) return bodyEl.replaceChildren();
  try {
    const data = await getJson(`/agents/${enc(agent)}/sessions/${enc(sessionId)}/trace`);
    if (viewToken !== state.viewToken || sessionId !== state.sessionId) return;
    bodyEl.replaceChildren(...renderTrace(data));
  } catch (err) {
    bodyEl.replaceChildren(h("p", { class: "inline-error" }, `Could not load the trace: ${err.message}`));
  }
}

function duration(ms) {
  if (ms === null || ms === undefined) return "not finished";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

const money = (cost) => (cost === null || cost === undefined ? "no price" : `$${Number(cost).toFixed(4)}`);

function renderTrace(t) {
  const steps = Array.isArray(t.steps) ? t.steps : [];
  const totals = t.totals || {};
  const longest = Math.max(1, ...steps.map((s) => Number(s.durationMs) || 0));
  const bar = (ms, kind) => {
    const el = h("span", { class: `trace-bar ${kind}`, "aria-hidden": "true" });
    el.style.width = `${Math.max(1, Math.round(((Number(ms) || 0) / longest) * 100))}%`; // (CSSOM: CSP allows it)
    return el;
  };
  const n = Number(totals.steps) || 0;
  return [
    h("p", { class: "trace-totals", testid: "trace-totals" },
      `${n} step${n === 1 ? "" : "s"} · ${duration(totals.durationMs)} · `
      + `${str(totals.inputTokens)} in · ${str(totals.outputTokens)} out tokens · ${money(totals.cost)}`),
    t.omitted ? h("p", { class: "muted" }, `${t.omitted} earlier steps are not shown.`) : null,
    steps.length ? h("ol", { class: "trace-steps" }, steps.map((s) =>
      h("li", { class: "trace-step", testid: "trace-step", "data-turn": str(s.turn), "data-step": str(s.step) },
        h("div", { class: "trace-head" },
          h("strong", { class: "trace-name" }, `Turn ${str(s.turn)} · step ${str(s.step)}`),
          h("span", { class: "trace-duration", testid: "trace-duration" }, duration(s.durationMs)),
          h("span", { class: "trace-tokens", testid: "trace-tokens" }, `${str(s.inputTokens)} in · ${str(s.outputTokens)} out`),
          h("span", { class: "trace-cost", testid: "trace-cost" }, money(s.cost)),
          s.model ? h("span", { class: "muted small trace-model" }, str(s.model)) : null),
        h("div", { class: "trace-track" }, bar(s.durationMs, "step")),
        (s.tools || []).length ? h("ul", { class: "trace-tools" }, s.tools.map((c) =>
          h("li", { class: "trace-tool", testid: "trace-tool", "data-tool": str(c.tool), "data-call-id": str(c.id) },
            h("span", { class: "tool-name" }, str(c.tool)),
            h("span", { class: "trace-tool-duration", testid: "trace-tool-duration" }, duration(c.durationMs)),
            h("span", { class: `muted small${c.isError ? " trace-error" : ""}` }, str(c.status) || "running"),
            h("div", { class: "trace-track" }, bar(c.durationMs, "tool"))))) : null))) : h("p", { class: "muted" }, "No steps yet."),
  ].filter(Boolean);
}

const VIEWS = ["chat", "trace", "config", "admin"];

function showView(view) {
  for (const name of VIEWS) {
    const on = name === view;
    $(`${name}-view`).hidden = !on;
    $(`tab-${name}`).setAttribute("aria-selected", String(on));
    $(`tab-${name}`).tabIndex = on ? 0 : -1;
  }
  if (view === "config") loadConfig();
  if (view === "trace") loadTrace();
  if (view === "admin") loadAdmin();
}

// ---------------------------------------------------------------------------------------------
// The admin view (docs/admin.md), for a token with the admin role only: create an agent, and
// edit its agent.yaml, prompt.md, rules.yaml and skills. The server checks each version as the
// loader loads it: a mistake comes back as the loader's error with its file and line (422),
// a good version is live when the answer comes.

const ADMIN_FILES = ["agent.yaml", "prompt.md", "rules.yaml"];
const NEW_SKILL = "new-skill";
const SKILL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const admin = { agents: [], opened: 0 };

/** Show the Admin tab when GET /admin/agents answers 200. Not asked without a token: without
 *  one nobody is an admin, and the 403 would only be noise in the console. */
async function loadAdmin(keep = {}) {
  let data = null;
  if (storage("get")) {
    try {
      data = await getJson("/admin/agents");
    } catch {
      data = null; // 401, 403: not an admin
    }
  }
  $("tab-admin").hidden = !data;
  if (!data) {
    if (!$("admin-view").hidden) showView("chat");
    return;
  }
  admin.agents = Array.isArray(data.agents) ? data.agents : [];
  const select = $("admin-agent");
  const wanted = keep.agent || select.value;
  $("admin-agents").replaceChildren(...(admin.agents.length
    ? admin.agents.map((a) => h("li", { testid: "admin-agent-item", "data-agent": str(a.name) },
      h("button", { type: "button", class: "admin-agent-item", onclick: () => pickAdminAgent(str(a.name)) },
        h("strong", null, str(a.name)), h("span", { class: "muted small" }, ` ${(a.files || []).join(", ")}`))))
    : [h("li", { class: "muted" }, "No agents in agents/ yet.")]));
  select.replaceChildren(...admin.agents.map((a) => h("option", { value: str(a.name) }, str(a.name))));
  const name = admin.agents.some((a) => a.name === wanted) ? wanted : str(admin.agents[0] && admin.agents[0].name);
  select.value = name; // (new options: the first would be picked)
  if (name !== wanted || keep.agent || !$("admin-file").options.length) await pickAdminAgent(name, keep.file);
  else fillAdminFiles(name, $("admin-file").value);
}

/** The file choices of an agent: its three files (made on save when missing), its skills,
 *  and a new skill. */
function fillAdminFiles(name, wanted) {
  const info = admin.agents.find((a) => a.name === name) || { files: [] };
  const files = Array.isArray(info.files) ? info.files : [];
  const choices = ADMIN_FILES.concat(files.filter((f) => !ADMIN_FILES.includes(f)));
  $("admin-file").replaceChildren(
    ...choices.map((f) => h("option", { value: f }, files.includes(f) ? f : `${f} (new)`)),
    h("option", { value: NEW_SKILL }, "a new skill…"));
  $("admin-file").value = choices.includes(wanted) || wanted === NEW_SKILL ? wanted : choices[0];
}

async function pickAdminAgent(name, file) {
  $("admin-agent").value = name;
  fillAdminFiles(name, file || $("admin-file").value);
  await openAdminFile();
}

/** The file being edited: skills/NAME/SKILL.md for a new skill (null until it is named). */
function adminPath() {
  const file = $("admin-file").value;
  if (file !== NEW_SKILL) return file;
  const skill = $("admin-skill").value.trim();
  return SKILL_NAME.test(skill) ? `skills/${skill}/SKILL.md` : null;
}

const adminUrl = (name, file) => `/admin/agents/${enc(name)}/files/${file.split("/").map(enc).join("/")}`;

async function openAdminFile() {
  const name = $("admin-agent").value;
  const file = $("admin-file").value;
  const opened = ++admin.opened;
  showAdminError(null);
  $("admin-status").textContent = "";
  $("admin-skill-label").hidden = file !== NEW_SKILL;
  const text = $("admin-text");
  if (!name) return void (text.value = "");
  if (file === NEW_SKILL) {
    text.value = "---\nname: \ndescription: \n---\n\n";
    return;
  }
  text.value = "";
  const res = await api(adminUrl(name, file));
  const data = await readBody(res);
  if (opened !== admin.opened) return; // another file was picked meanwhile
  if (res.ok) text.value = str(data.text);
  else if (res.status === 404) $("admin-status").textContent = `${file} does not exist yet: saving makes it.`;
  else showAdminError({ error: data.error || `HTTP ${res.status}` });
}

/** The loader's error; when it names a line of the file shown, that line with its neighbours
 *  (numbered, the line marked) and selected in the editor. */
function showAdminError(body) {
  const box = $("admin-error");
  const text = $("admin-text");
  box.hidden = !body;
  text.removeAttribute("aria-invalid");
  if (!body) return;
  $("admin-error-text").textContent = str(body.error);
  box.dataset.file = str(body.file);
  box.dataset.line = str(body.line);
  const lines = text.value.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop(); // (the last line's newline)
  const line = Number(body.line);
  const here = body.file === adminPath() && line >= 1 && line <= lines.length;
  $("admin-error-lines").hidden = !here;
  if (!here) return $("admin-error-lines").replaceChildren();
  const first = Math.max(1, line - 2);
  const last = Math.min(lines.length, line + 2);
  const width = String(last).length;
  const rows = [];
  for (let n = first; n <= last; n += 1) {
    const row = `${String(n).padStart(width)} │ ${lines[n - 1]}\n`;
    rows.push(n === line ? h("mark", { testid: "admin-error-line", "data-line": String(n) }, row) : row);
  }
  $("admin-error-lines").replaceChildren(...rows);
  const start = lines.slice(0, line - 1).reduce((sum, l) => sum + l.length + 1, 0);
  text.setAttribute("aria-invalid", "true");
  text.focus();
  text.setSelectionRange(start, start + lines[line - 1].length);
}

async function saveAdminFile() {
  const name = $("admin-agent").value;
  const file = adminPath();
  const status = $("admin-status");
  status.textContent = "";
  if (!name) return;
  if (!file) return showAdminError({ error: "A skill's name is lowercase words joined by hyphens, like 'tidy-desk'." });
  const res = await api(adminUrl(name, file), { method: "PUT", body: { text: $("admin-text").value } });
  const data = await readBody(res);
  if (!res.ok) return showAdminError({ ...data, error: data.error || `HTTP ${res.status}` });
  showAdminError(null);
  await adminChanged(name, file); // (the file opened again: as saved)
  status.textContent = data.reloaded
    ? `Saved ${file}: ${name} is served with it now.`
    : `Saved ${file}, but the project did not reload: another agent fails to load (the server's log says why).`;
}

async function createAdminAgent() {
  const status = $("admin-create-status");
  const body = { name: $("admin-new-name").value.trim() };
  const model = $("admin-new-model").value.trim();
  const prompt = $("admin-new-prompt").value;
  if (model) body.model = model;
  if (prompt.trim()) body.prompt = prompt;
  const res = await api("/admin/agents", { method: "POST", body });
  const data = await readBody(res);
  status.classList.toggle("inline-error", !res.ok);
  if (!res.ok) {
    status.textContent = [data.error || `HTTP ${res.status}`, data.file ? `(${data.file}${data.line ? `, line ${data.line}` : ""})` : ""].filter(Boolean).join(" ");
    return;
  }
  status.textContent = `Created ${str(data.name)}: it is served now.`;
  $("admin-create").reset();
  await adminChanged(str(data.name), "agent.yaml");
}

/** After a change: the admin lists, the agent picker and the configuration read again. */
async function adminChanged(name, file) {
  state.config = null;
  await loadAdmin({ agent: name, file: $("admin-file").value === NEW_SKILL ? file : undefined });
  try {
    const data = await getJson("/agents");
    state.agents = Array.isArray(data.agents) ? data.agents : [];
    const select = $("agent-select");
    const current = select.value;
    select.replaceChildren(...state.agents.map((a) => h("option", { value: str(a.name) }, str(a.name))));
    select.value = current;
  } catch (err) {
    showError(`Could not list agents: ${err.message}`);
  }
}

function wireAdmin() {
  $("admin-create").addEventListener("submit", (e) => {
    e.preventDefault();
    createAdminAgent();
  });
  $("admin-edit").addEventListener("submit", (e) => {
    e.preventDefault();
    saveAdminFile();
  });
  $("admin-agent").addEventListener("change", (e) => pickAdminAgent(e.target.value));
  $("admin-file").addEventListener("change", () => openAdminFile());
  $("admin-open-config").addEventListener("click", async () => {
    const name = $("admin-agent").value;
    if (!name) return;
    await selectAgent(name, null);
    showView("config");
  });
}

// ---------------------------------------------------------------------------------------------
// Wiring

function wire() {
  const input = $("message-input");
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    sendMessage(input.value);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!state.running) sendMessage(input.value);
    }
  });
  $("attach-button").addEventListener("click", () => $("attach-input").click());
  $("attach-input").addEventListener("change", (e) => {
    const picked = Array.from(e.target.files || []).map((file) => ({
      file, name: file.name, url: file.type.startsWith("image/") ? URL.createObjectURL(file) : null,
    }));
    setAttachments(state.attachments.concat(picked));
    e.target.value = "";
  });
  $("cancel-button").addEventListener("click", async () => {
    if (state.sessionId) await sessionCommand("cancel");
    else abandonStream();
  });
  $("steer-button").addEventListener("click", async () => {
    const text = input.value.trim();
    if (!text) return;
    if (await sessionCommand("steer", { message: text })) {
      input.value = "";
      transcript.notice("Steering message queued for the next step.", "info");
    }
  });
  $("compact-button").addEventListener("click", async () => {
    if (state.running) return;
    const done = await sessionCommand("compact");
    if (done && done.compacted === false) transcript.notice(str(done.reason), "compaction");
    else if (done) {
      await catchUp(state.viewToken);
      refreshSessions();
    }
  });
  $("agent-select").addEventListener("change", (e) => selectAgent(e.target.value, null));
  $("new-session").addEventListener("click", () => selectAgent(state.agent, null));
  $("sessions-refresh").addEventListener("click", () => refreshSessions());
  $("session-id").addEventListener("click", () => {
    if (state.sessionId && navigator.clipboard) navigator.clipboard.writeText(state.sessionId).catch(() => {});
  });
  $("timeline-clear").addEventListener("click", () => $("timeline").replaceChildren());
  $("error-close").addEventListener("click", clearError);
  VIEWS.forEach((name) => {
    const tab = $(`tab-${name}`);
    tab.addEventListener("click", () => showView(name));
    tab.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      const shown = VIEWS.filter((n) => !$(`tab-${n}`).hidden); // (the admin tab may be hidden)
      const at = shown.indexOf(name);
      const next = shown[(at + (e.key === "ArrowRight" ? 1 : shown.length - 1)) % shown.length];
      showView(next);
      $(`tab-${next}`).focus();
    });
  });
  $("token-input").value = storage("get");
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    storage("set", $("token-input").value.trim());
    $("token-box").open = false;
    reload();
  });
  $("token-clear").addEventListener("click", () => {
    storage("clear");
    $("token-input").value = "";
    reload();
  });
  wireAdmin();
}

/** Load the agents again (a new token), keeping the agent and session shown or linked. */
function reload() {
  const params = new URLSearchParams(location.search);
  loadAgents(state.agent || params.get("agent"), state.sessionId || params.get("session"));
  loadAdmin();
  followLifecycle();
}

async function main() {
  wire();
  followLifecycle(); // (before the first listing: no change falls between the two)
  const params = new URLSearchParams(location.search);
  await loadAgents(params.get("agent"), params.get("session"));
  await loadAdmin();
  pollPending();
  setInterval(pollPending, POLL_MS);
  document.body.dataset.ready = "true";
}

main();
