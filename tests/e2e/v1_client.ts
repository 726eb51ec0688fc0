// A small loopengine v1 client, written from the documented v1 protocol (README "Over HTTP",
// PROTOCOL.md): a base URL, `${base}/agents/...` and nothing else. TypeScript, strict: the test
// suite compiles it with the pinned `tsc` (tsconfig.json beside it) and runs the output on Node.
//
//   node v1_client.js BASE_URL     runs the conformance scenario against BASE_URL (e.g.
//                                  http://127.0.0.1:8787/v1) and prints one JSON line per
//                                  result and per event received: {"step", "result"|"error"|
//                                  "event"}; the test suite validates every event against the
//                                  v1 schema and checks the results.

// ---- the v1 wire shapes (protocol/loopengine-v1.schema.json) -----------------------------

export type Args = Record<string, unknown>;
export interface Scope { tenant: string; environment: string; agent: string }
export interface Nudge { role: string; content: string }

export interface SessionEvent { type: 'session'; sessionId: string }
export interface BudgetCheckEvent {
  type: 'budget:check';
  action: 'ok' | 'nudge' | 'over_hard_limit';
  usedTokens: number;
  budgetTokens: number;
  ratio: number;
  nudge?: Nudge;
}
export interface AssistantTextEvent { type: 'assistant:text'; text: string }
export interface ApprovalPendingEvent {
  type: 'approval:pending';
  id: string;
  tool: string;
  args: Args;
  scope: Scope;
  reason: string;
  requestedAt: string;
}
export interface QuestionPendingEvent {
  type: 'question:pending';
  id: string;
  question: string;
  agent: string;
  requestedAt: string;
  options?: string[];
  sessionId?: string;
}
export interface ActauthDecisionEvent {
  type: 'actauth:decision';
  tool: string;
  decision: 'allow' | 'ask' | 'deny';
  reason: string;
}
export interface ToolStartedEvent { type: 'tool:started'; id: string; tool: string; args: Args; detailText: string }
export interface ToollaneResultEvent { type: 'toollane:result'; name: string; summary: string }
export interface ToolResultEvent {
  type: 'tool:result';
  id: string;
  tool: string;
  statusText: string;
  args?: Args;
  detailText?: string;
}
export interface SkillLoadedEvent { type: 'skill:loaded'; skill: string }
export interface PromptCompactionEvent { type: 'prompt:compaction'; from: number; to: number }
export interface LoopDoneEvent { type: 'loop:done'; text: string }
export interface LoopDeniedEvent { type: 'loop:denied'; deniedTools: string[] }
export interface LoopSkippedEvent { type: 'loop:skipped'; name: string; deniedTools: string[] }
export interface LoopMaxTurnsEvent { type: 'loop:max_turns'; maxTurns: number }
export type StopReason = 'max_turns' | 'denied';
export interface DoneEvent { type: 'done'; text: string; stopReason?: StopReason }
export interface ErrorEvent { type: 'error'; error: string }

/** One v1 event, discriminated on `type`. */
export type LoopEvent =
  | SessionEvent
  | BudgetCheckEvent
  | AssistantTextEvent
  | ApprovalPendingEvent
  | QuestionPendingEvent
  | ActauthDecisionEvent
  | ToolStartedEvent
  | ToollaneResultEvent
  | ToolResultEvent
  | SkillLoadedEvent
  | PromptCompactionEvent
  | LoopDoneEvent
  | LoopDeniedEvent
  | LoopSkippedEvent
  | LoopMaxTurnsEvent
  | DoneEvent
  | ErrorEvent;

export interface SendMessageResult { text: string; sessionId: string; events: LoopEvent[]; stopReason?: StopReason }
export interface PendingApprovalResult {
  pending: true;
  type: 'approval';
  id: string;
  sessionId: string;
  tool: string;
  args: Args;
  scope: Scope;
  reason: string;
  approveUrl: string;
  denyUrl: string;
  statusUrl: string;
  events: LoopEvent[];
}
export interface PendingQuestionResult {
  pending: true;
  type: 'question';
  id: string;
  sessionId: string;
  question: string;
  options?: string[];
  answerUrl: string;
  statusUrl: string;
  events: LoopEvent[];
}
export type PendingResult = PendingApprovalResult | PendingQuestionResult;
export type MessageResult = SendMessageResult | PendingResult;

export type ContentBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; [field: string]: unknown }
  | { type: 'tool_use'; id: string; name: string; input: Args }
  | { type: 'tool_result'; tool_use_id: string; content: string; is_error: boolean };
export interface HistoryMessage { role: 'user' | 'assistant'; content: string | ContentBlock[] }
export interface SessionHistory { sessionId: string; history: HistoryMessage[] }

/** The body of POST /agents/:agent/messages (and of its /stream). */
export interface MessageBody { message: string; sessionId?: string; [field: string]: unknown }
export interface AnswerBody { answer: string }
export interface ErrorBody { error?: string }

export interface SendOptions {
  sessionId?: string;
  headers?: Record<string, string>;
  body?: Record<string, unknown>;
  signal?: AbortSignal;
}

export interface StreamCallbacks {
  onEvent?: (event: LoopEvent) => void | Promise<void>;
  onDone?: (event: DoneEvent) => void;
  onError?: (event: ErrorEvent) => void;
}

// ---- the client --------------------------------------------------------------------------

async function parsed<T>(response: Response): Promise<T> {
  const data = (await response.json().catch(() => ({}))) as T & ErrorBody;
  if (!response.ok) throw new Error(data.error ?? `HTTP ${response.status}`);
  return data;
}

function messageRequest(message: string, options: SendOptions): RequestInit {
  const body: MessageBody = { message, ...(options.body ?? {}) };
  if (options.sessionId !== undefined) body.sessionId = options.sessionId;
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(options.headers ?? {}) },
    body: JSON.stringify(body),
    signal: options.signal,
  };
}

/** POST /agents/:agent/messages. */
export async function sendMessage(
  baseUrl: string,
  agent: string,
  message: string,
  options: SendOptions = {},
): Promise<MessageResult> {
  const url = `${baseUrl}/agents/${encodeURIComponent(agent)}/messages`;
  return parsed<MessageResult>(await fetch(url, messageRequest(message, options)));
}

export async function approveCall(baseUrl: string, id: string): Promise<MessageResult> {
  const url = `${baseUrl}/approvals/${encodeURIComponent(id)}/approve`;
  return parsed<MessageResult>(await fetch(url, { method: 'POST' }));
}

export async function denyCall(baseUrl: string, id: string): Promise<MessageResult> {
  const url = `${baseUrl}/approvals/${encodeURIComponent(id)}/deny`;
  return parsed<MessageResult>(await fetch(url, { method: 'POST' }));
}

export async function answerQuestion(baseUrl: string, id: string, answer: string): Promise<MessageResult> {
  const body: AnswerBody = { answer };
  return parsed<MessageResult>(
    await fetch(`${baseUrl}/questions/${encodeURIComponent(id)}/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
}

/** GET /agents/:agent/sessions/:id. */
export async function getSessionHistory(baseUrl: string, agent: string, sessionId: string): Promise<SessionHistory> {
  const url = `${baseUrl}/agents/${encodeURIComponent(agent)}/sessions/${encodeURIComponent(sessionId)}`;
  return parsed<SessionHistory>(await fetch(url));
}

/**
 * POST /agents/:agent/messages/stream: each SSE frame's `data:` parsed as an event (frames
 * that do not parse are skipped); a reply that is not a stream gives one `error` event.
 */
export async function* streamMessage(
  baseUrl: string,
  agent: string,
  message: string,
  options: SendOptions = {},
): AsyncGenerator<LoopEvent> {
  const url = `${baseUrl}/agents/${encodeURIComponent(agent)}/messages/stream`;
  const response = await fetch(url, messageRequest(message, options));
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream') || !response.body) {
    const data = (await response.json().catch(() => ({}))) as ErrorBody;
    yield { type: 'error', error: data.error ?? `HTTP ${response.status}` };
    return;
  }
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (!data) continue;
      let event: LoopEvent;
      try {
        event = JSON.parse(data) as LoopEvent;
      } catch {
        continue; // not JSON: skipped, as v1 clients do
      }
      yield event;
    }
  }
}

/** The stream, through callbacks. */
export async function streamMessageWithCallbacks(
  baseUrl: string,
  agent: string,
  message: string,
  callbacks: StreamCallbacks,
  options: SendOptions = {},
): Promise<void> {
  for await (const event of streamMessage(baseUrl, agent, message, options)) {
    await callbacks.onEvent?.(event);
    if (event.type === 'done') callbacks.onDone?.(event);
    if (event.type === 'error') callbacks.onError?.(event);
  }
}

// ---- the conformance scenario ------------------------------------------------------------

type Line = { event: LoopEvent } | { result: unknown } | { error: string | null } | Record<string, never>;

function print(step: string, line: Line): void {
  process.stdout.write(JSON.stringify({ step, ...line }) + '\n');
}

function report(step: string, result: MessageResult | SessionHistory): void {
  for (const event of 'events' in result ? result.events : []) print(step, { event });
  print(step, { result });
}

async function failing(step: string, call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
    print(step, { error: null });
  } catch (error) {
    print(step, { error: error instanceof Error ? error.message : String(error) });
  }
}

/** The id of a paused turn (a reply that did not pause is the scenario's failure). */
function pendingId(result: MessageResult): string {
  if (!('pending' in result)) throw new Error(`expected a pending reply, got ${JSON.stringify(result)}`);
  return result.id;
}

async function main(base: string): Promise<void> {
  const customer = 'ana.lopez+orders@example.com';
  report('send', await sendMessage(base, 'shop', 'hello', { sessionId: customer }));

  const asked = await sendMessage(base, 'shop', 'refund A-1', { sessionId: `${customer}/approve` });
  report('approve:paused', asked);
  report('approve', await approveCall(base, pendingId(asked)));
  await failing('double', () => denyCall(base, pendingId(asked)));

  const denied = await sendMessage(base, 'shop', 'refund A-1');
  report('deny:paused', denied);
  report('deny', await denyCall(base, pendingId(denied)));

  const question = await sendMessage(base, 'shop', 'ask me', { sessionId: 'q 1' });
  report('answer:paused', question);
  report('answer', await answerQuestion(base, pendingId(question), 'blue'));

  // a message to a session paused on an approval and a question: v1 takes it (no 409)
  const left = await sendMessage(base, 'shop', 'two refunds', { sessionId: 'left' });
  report('moved-on:paused', left);
  report('moved-on', await sendMessage(base, 'shop', 'hello', { sessionId: 'left' }));
  const unasked = await sendMessage(base, 'shop', 'ask me', { sessionId: 'unasked' });
  report('moved-on:asked', unasked);
  report('moved-on:question', await sendMessage(base, 'shop', 'hello', { sessionId: 'unasked' }));
  await failing('moved-on:stale', () => approveCall(base, pendingId(left)));

  report('history', await getSessionHistory(base, 'shop', `${customer}/approve`));
  report('unknown', await getSessionHistory(base, 'shop', 'nobody/ever %41'));

  for await (const event of streamMessage(base, 'shop', 'hello', { sessionId: customer })) {
    print('stream', { event });
  }

  const seen = { done: 0, error: 0 };
  let approval: Promise<MessageResult | null> = Promise.resolve(null);
  await streamMessageWithCallbacks(
    base,
    'shop',
    'refund A-1',
    {
      onEvent: (event) => {
        print('callbacks', { event });
        if (event.type === 'approval:pending') approval = approveCall(base, event.id);
      },
      onDone: () => {
        seen.done += 1;
      },
      onError: () => {
        seen.error += 1;
      },
    },
    { sessionId: 'streamed' },
  );
  const approved = await approval;
  if (approved === null) throw new Error('the stream paused for no approval');
  report('callbacks:approve', approved);
  print('callbacks', { result: seen });

  for (const text of ['one', 'two']) await sendMessage(base, 'greeter', text, { sessionId: 'g' });
  await failing('failure', () => sendMessage(base, 'greeter', 'three', { sessionId: 'g' }));
  for await (const event of streamMessage(base, 'greeter', 'four', { sessionId: 'g' })) {
    print('failure:stream', { event });
  }
  print('end', {});
}

const base = process.argv[2];
if (base) {
  main(base).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
