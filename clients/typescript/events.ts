// Generated from protocol/loop-event.schema.json by scripts/ts_events.py: do not edit by hand.
// Regenerate: python scripts/ts_events.py > clients/typescript/events.ts

/** The gate's verdict on one tool call, in the order the model emitted the calls. */
export interface ActauthDecision {
  decision: "allow" | "ask" | "deny";
  reason: string;
  tool: string;
  type: "actauth:decision";
}

/** The session goes on with `to` after `from_`'s transfer `call_id` (docs/handoffs.md). */
export interface AgentHandoff {
  callId: string;
  from: string;
  history?: "full" | "last_user" | "summary";
  summary?: string;
  to: string;
  type: "agent:handoff";
}

/** A call needs a human decision; resolve it by its unguessable `id`. */
export interface ApprovalPending {
  args: Record<string, unknown>;
  id: string;
  label?: string;
  reason: string;
  requestedAt: string;
  scope: Scope;
  tool: string;
  type: "approval:pending";
}

/** A human decided a pending approval. */
export interface ApprovalResolved {
  args?: Record<string, unknown>;
  by: string;
  decision: "approve" | "deny";
  id: string;
  reason?: string;
  resolvedAt: string;
  tool: string;
  type: "approval:resolved";
}

/** One complete model reply. */
export interface AssistantMessage {
  model?: string;
  parts?: Array<Text | Thinking | ToolCall>;
  role: "assistant";
  stopReason?: "end_turn" | "tool_use" | "max_tokens" | "error" | "aborted";
  usage?: Usage;
}

/** The model's text alongside a tool-using reply (its preamble). */
export interface AssistantText {
  text: string;
  type: "assistant:text";
}

/** An image or a document of a message, by reference (`sha256` and `size`, or `url`). Equal attachments are the same content; the bytes are `data` (None when only a URL is known, or when the value was read back and not yet resolved). */
export interface Attachment {
  mediaType: string;
  name?: string;
  sha256?: string;
  size?: number;
  type: "image" | "document";
  url?: string;
}

/** Context-budget check, once before every model request. */
export interface BudgetCheck {
  action: "ok" | "nudge" | "over_hard_limit";
  budgetTokens: number;
  nudge?: Nudge;
  ratio: number;
  type: "budget:check";
  usedTokens: number;
}

/** The history's first `dropped` messages became `summary` (or went), but those at `pinned` (kept after it, in order); `from_`/`to` count messages. Replaying it rebuilds the same view. */
export interface CompactionFinished {
  dropped: number;
  from: number;
  mode: "summarize" | "discard";
  pinned?: Array<number>;
  summary?: string;
  to: number;
  type: "compaction:finished";
}

export interface CompactionStarted {
  reason: "context" | "steps" | "turns" | "manual" | "prompt_too_long";
  type: "compaction:started";
}

/** Context the `after_batch` hooks added after a batch ran, for the next request. */
export interface ContextInjected {
  message: UserMessage;
  type: "context:injected";
}

/** An app's own entry in the history (a UI note, a marker): doors show it, the model never sees it unless the agent's `convert` hook turns it into a model message. */
export interface CustomMessage {
  content?: string;
  data?: Record<string, unknown>;
  kind: string;
  role: "custom";
}

/** Always the last event of a run. */
export interface Done {
  stopReason: "completed" | "max_tokens" | "max_turns" | "denied" | "paused" | "aborted" | "error" | "terminated";
  text: string;
  type: "done";
}

/** v1 clients' view of a failed run (the profile=v1 projection of `loop:error`). */
export interface Error {
  error: string;
  type: "error";
}

/** The session a fork was copied from, and the seq it was copied up to. */
export interface ForkSource {
  seq: number;
  sessionId: string;
}

/** An observe hook (`on_run_start`, `after_reply`, `on_run_end`) raised: the run goes on (the `loopwright.hooks` logger has the traceback). */
export interface HookFailed {
  error: string;
  hook: string;
  type: "hook:failed";
}

/** The run's input, durable before the first step. */
export interface InputReceived {
  message: UserMessage;
  type: "input:received";
}

/** Terminal: the run was cancelled. */
export interface LoopAborted {
  carryOver?: string;
  reason: string;
  type: "loop:aborted";
}

/** Terminal: a call was denied and the agent stops on denial. */
export interface LoopDenied {
  deniedTools: Array<string>;
  type: "loop:denied";
}

/** Terminal: a genuine finish, a reply with no tool calls. */
export interface LoopDone {
  text: string;
  type: "loop:done";
}

/** Terminal: the run failed (model failure past the retry bound, a raising hook...). */
export interface LoopError {
  error: string;
  type: "loop:error";
}

/** Terminal: the step limit was reached without a final answer. */
export interface LoopMaxTurns {
  maxTurns: number;
  type: "loop:max_turns";
}

/** Terminal: waiting on pending items that no live human can answer now. */
export interface LoopPaused {
  pendingIds: Array<string>;
  type: "loop:paused";
}

/** An approved call did not run because a sibling was denied. */
export interface LoopSkipped {
  deniedTools: Array<string>;
  name: string;
  type: "loop:skipped";
}

/** Terminal: a tool's `terminate` hint or a continuation policy stopped the run. */
export interface LoopTerminated {
  reason: string;
  type: "loop:terminated";
}

/** The complete assistant reply with its usage; the history is rebuilt from these. */
export interface MessageCompleted {
  message: AssistantMessage;
  type: "message:completed";
}

/** An app's custom message joined the history between runs (`Session.add`, HTTP); doors show it, the model sees only what the agent's `convert` hook makes of it. */
export interface MessageCustom {
  message: CustomMessage;
  type: "message:custom";
}

/** Stored only (never streamed): what a reply still streaming added to its text since the last partial (`text`, from character `offset` on; 0 in old logs: the whole text so far), committed now and then so a crash mid-reply leaves carry-over for the next run. */
export interface MessagePartial {
  offset?: number;
  text: string;
  type: "message:partial";
}

/** A reply without tools was cut by the output limit (`detail`); `message` asks it to go on. */
export interface MessageTruncated {
  detail: string;
  message?: UserMessage;
  type: "message:truncated";
}

/** The model `from_` failed past its retries (`error`): the rest of the run asks `to`, the agent's next fallback model (docs/models.md). */
export interface ModelFallback {
  error: string;
  from: string;
  to: string;
  type: "model:fallback";
}

/** A model request failed retryably and is sent again after `delay` seconds. */
export interface ModelRetry {
  attempt: number;
  delay: number;
  error: string;
  type: "model:retry";
}

/** A note asking the model to wrap up, added to one request's context. */
export interface Nudge {
  content: string;
  role: string;
}

/** Where a forwarded subagent event came from. */
export interface Origin {
  agent: string;
  callId: string;
  sessionId: string;
}

/** The final answer failed the agent's output schema (`errors`); `message` asks again. */
export interface OutputInvalid {
  errors: Array<string>;
  message: UserMessage;
  type: "output:invalid";
}

/** The single authority's record of a decision on a pending item (the first one wins; `skipped`: closed by a denial in its batch or a dead run's recovery), logged before any run acts on it; `args` are edited arguments. */
export interface PendingDecided {
  answer?: string;
  args?: Record<string, unknown>;
  by: string;
  decidedAt: string;
  id: string;
  reason?: string;
  status: "approved" | "denied" | "answered" | "skipped";
  type: "pending:decided";
}

/** The call the item announced just before (approval:pending, question:pending) is about. */
export interface PendingRequested {
  callId: string;
  id: string;
  kind?: "approval" | "question";
  type: "pending:requested";
}

/** The prompt was compacted after the provider rejected it as too long (message counts). */
export interface PromptCompaction {
  from: number;
  to: number;
  type: "prompt:compaction";
}

/** The agent asked the person a question; answer it by `id`. */
export interface QuestionPending {
  agent: string;
  id: string;
  options?: Array<string>;
  question: string;
  requestedAt: string;
  sessionId?: string;
  type: "question:pending";
}

export interface QuestionResolved {
  answer: string;
  by: string;
  id: string;
  resolvedAt: string;
  type: "question:resolved";
}

/** A `transform_reply` hook changed the reply: the model's `original`, kept for audit; the `message:completed` right after it is the reply the run logs and acts on. */
export interface ReplyTransformed {
  original: AssistantMessage;
  type: "reply:transformed";
}

/** The previous run of this session died (crash, kill, power loss) before it finished: calls it had started get `[interrupted: …]` results, except idempotent ones, which run again. */
export interface RunInterrupted {
  carryOver?: string;
  interruptedCalls: Array<string>;
  rerunCalls: Array<string>;
  type: "run:interrupted";
}

/** The scope a permission decision is made in (SPEC §5.2). */
export interface Scope {
  agent: string;
  environment: string;
  tenant: string;
}

/** First event of every run: the session it belongs to. */
export interface Session {
  sessionId: string;
  type: "session";
}

/** A session came into being: its first run's input is in the log, or it was forked. */
export interface SessionCreated {
  agent: string;
  forkedFrom?: ForkSource;
  sessionId: string;
  tenant: string;
  type: "session:created";
}

/** The runtime let go of the session's in-memory state (the durable session stays): `evicted` from its cache of sessions, `handed_over` to another process that took its run, `failed` (its run ended on an error), or `closed` with the runtime. */
export interface SessionDisposed {
  agent: string;
  reason: "evicted" | "handed_over" | "failed" | "closed";
  sessionId: string;
  tenant: string;
  type: "session:disposed";
}

/** A session's status changed: `running` as a run starts or resumes, `waiting` while that run waits on a decision (an approval or a question), `paused` when it stopped durably on open items, `idle` when it ended otherwise, `interrupted` when it ended without its end recorded. `previous` is None when this runtime knew no status for it before. */
export interface SessionStatusChanged {
  agent: string;
  previous?: "idle" | "running" | "waiting" | "paused" | "interrupted";
  sessionId: string;
  status: "idle" | "running" | "waiting" | "paused" | "interrupted";
  tenant: string;
  type: "session:status";
}

export interface SkillLoaded {
  skill: string;
  type: "skill:loaded";
}

/** The steering (`steer`), the follow-ups (`follow_up`) or both (None) queued for a durable session's running run were dropped (`Session.clear_queue`, a cancel); logged at once. */
export interface SteeringCleared {
  mode?: "steer" | "follow_up";
  type: "steering:cleared";
}

/** A steering or follow-up message entered the conversation at a step boundary. */
export interface SteeringInjected {
  message: UserMessage;
  mode: "steer" | "follow_up";
  type: "steering:injected";
}

/** A steering or follow-up message was sent to a durable session's running run; it enters the conversation later (`steering:injected`). Logged at once, so a crash does not lose it. */
export interface SteeringQueued {
  mode: "steer" | "follow_up";
  text: string;
  type: "steering:queued";
}

export interface StepFinished {
  step: number;
  type: "step:finished";
  usage?: Usage;
}

/** A step (one model request and its tool calls) begins; `step` counts from 1 per run. */
export interface StepStarted {
  step: number;
  type: "step:started";
}

/** An event of a subagent's run, forwarded to its parent's stream. */
export interface SubagentEvent {
  event: BudgetCheck | PromptCompaction | AssistantText | ActauthDecision | ToolStarted | ToolResult | ToollaneResult | SkillLoaded | LoopSkipped | LoopMaxTurns | LoopDenied | LoopDone | Session | ApprovalPending | QuestionPending | Done | Error | InputReceived | SteeringInjected | SteeringQueued | SteeringCleared | StepStarted | StepFinished | TextDelta | ThinkingDelta | ToolDelta | MessageCompleted | MessagePartial | MessageTruncated | OutputInvalid | ModelRetry | ModelFallback | CompactionStarted | CompactionFinished | ToolUpdate | ToolOutput | ToolInterrupted | ToolLateResult | ToolSuspended | PendingRequested | ApprovalResolved | QuestionResolved | PendingDecided | LoopPaused | LoopAborted | LoopError | LoopTerminated | RunInterrupted | HookFailed | ReplyTransformed | ContextInjected | SubagentEvent | MessageCustom | AgentHandoff;
  origin: Origin;
  type: "subagent:event";
}

/** Plain text the model (or the user) wrote. */
export interface Text {
  text: string;
  type: "text";
}

export interface TextDelta {
  delta: string;
  type: "text:delta";
}

/** Reasoning the model exposed; `signature` round-trips provider verification data. */
export interface Thinking {
  signature?: string;
  text: string;
  type: "thinking";
}

export interface ThinkingDelta {
  delta: string;
  type: "thinking:delta";
}

/** One request by the model to call one tool. */
export interface ToolCall {
  args: Record<string, unknown>;
  id: string;
  name: string;
  type: "tool_call";
}

/** A fragment of a call's JSON arguments as they stream (`partial_args`: parsed so far). */
export interface ToolDelta {
  delta: string;
  id: string;
  partialArgs?: Record<string, unknown>;
  tool: string;
  type: "tool:delta";
}

/** A call was cut off before its result (`[interrupted: …]`, `[cancelled: …]` output). */
export interface ToolInterrupted {
  id: string;
  tool: string;
  type: "tool:interrupted";
}

/** What a call really did, known after its result was given: its thread ran on after it was cancelled or timed out (the model's history keeps the result it was given). */
export interface ToolLateResult {
  content: string;
  id: string;
  isError?: boolean;
  tool: string;
  type: "tool:late_result";
}

/** The content the model reads for one call; every decided call gets exactly one. */
export interface ToolOutput {
  attachments?: Array<Attachment>;
  content: string;
  details?: unknown;
  id: string;
  isError?: boolean;
  stored?: Attachment;
  tool: string;
  type: "tool:output";
}

/** A call's resolution: `Approved.`, `Error.`, `Denied.` or `Skipped.`. */
export interface ToolResult {
  args?: Record<string, unknown>;
  detailText?: string;
  id: string;
  statusText: string;
  tool: string;
  type: "tool:result";
}

/** An allowed call is about to run; its intent is committed before it runs. */
export interface ToolStarted {
  args: Record<string, unknown>;
  detailText: string;
  id: string;
  idempotencyKey?: string;
  label?: string;
  tool: string;
  type: "tool:started";
}

/** A call that cannot finish until pending items are resolved: a subagent's (in its session) or its own question (`NeedsAnswer`, in this one). The run pauses; the call runs again when it resumes. It ends the call's part of this run in place of `tool:result`. */
export interface ToolSuspended {
  id: string;
  pendingIds: Array<string>;
  sessionId: string;
  tool: string;
  type: "tool:suspended";
}

/** Progress reported by a running tool. */
export interface ToolUpdate {
  details?: unknown;
  id: string;
  message: string;
  progress?: number;
  tool: string;
  type: "tool:update";
}

/** The raw outcome of a call that ran (`summary` is what the model reads). */
export interface ToollaneResult {
  name: string;
  summary: string;
  type: "toollane:result";
}

/** Token accounting for one model request. */
export interface Usage {
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  cost?: number;
  inputTokens?: number;
  outputTokens?: number;
}

/** Input from the person (or a steering/follow-up message, or a carry-over note). */
export interface UserMessage {
  attachments?: Array<Attachment>;
  content: string;
  role: "user";
}

/** Every event loopwright emits (the loopengine v1 vocabulary plus additive types, and a runtime's lifecycle notifications). Generated from loopwright.events by `python -m loopwright.wire`; see PROTOCOL.md. */
export type LoopwrightEvent =
  | BudgetCheck
  | PromptCompaction
  | AssistantText
  | ActauthDecision
  | ToolStarted
  | ToolResult
  | ToollaneResult
  | SkillLoaded
  | LoopSkipped
  | LoopMaxTurns
  | LoopDenied
  | LoopDone
  | Session
  | ApprovalPending
  | QuestionPending
  | Done
  | Error
  | InputReceived
  | SteeringInjected
  | SteeringQueued
  | SteeringCleared
  | StepStarted
  | StepFinished
  | TextDelta
  | ThinkingDelta
  | ToolDelta
  | MessageCompleted
  | MessagePartial
  | MessageTruncated
  | OutputInvalid
  | ModelRetry
  | ModelFallback
  | CompactionStarted
  | CompactionFinished
  | ToolUpdate
  | ToolOutput
  | ToolInterrupted
  | ToolLateResult
  | ToolSuspended
  | PendingRequested
  | ApprovalResolved
  | QuestionResolved
  | PendingDecided
  | LoopPaused
  | LoopAborted
  | LoopError
  | LoopTerminated
  | RunInterrupted
  | HookFailed
  | ReplyTransformed
  | ContextInjected
  | SubagentEvent
  | MessageCustom
  | AgentHandoff
  | SessionCreated
  | SessionStatusChanged
  | SessionDisposed;

export type EventType = LoopwrightEvent["type"];
