// A TypeScript client of a loopwright server: plain TypeScript on `fetch` (Node 18+, Deno, Bun,
// browsers), no dependencies and no build step needed to read it. Its event types are
// generated from the committed event schema (events.ts, by scripts/ts_events.py).
//
//   const lw = new LoopwrightClient('http://127.0.0.1:8787', { token });
//   const answer = await lw.send('shop', 'refund A-1');         // the run's whole answer
//   const done = await lw.stream('shop', 'refund A-1').run({      // or its events as they come
//     onText: (delta) => process.stdout.write(delta),
//     onApproval: (e) => lw.approve(e.id),                       // decided while the run is held
//   });
//
// A stream resumes after a dropped connection: it reconnects to the session's stream with
// `Last-Event-ID` (the last seq it took) and gives no event twice and none missed (an event
// sent before the log held it comes without a seq, and again with one after a resume: the
// second time is dropped). See docs/clients.md.

import type { ApprovalPending, Done, LoopwrightEvent, QuestionPending } from './events.js';

export type * from './events.js';

export interface ClientOptions {
  /** A tenant's bearer token (none: a loopback server without tokens). */
  token?: string;
  /** How many times in a row a stream may fail to resume before it throws StreamDropped. */
  reconnects?: number;
  /** Milliseconds between failed reconnects (after the first, which is at once). */
  retryDelayMs?: number;
  fetch?: typeof fetch;
}

/** The server refused the request: its HTTP status and its own message. */
export class ClientError extends Error {
  constructor(
    readonly status: number,
    readonly serverMessage: string,
  ) {
    super(`${status}: ${serverMessage}`);
    this.name = 'ClientError';
  }
}

/** A stream's connection dropped and could not be resumed. */
export class StreamDropped extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StreamDropped';
  }
}

/** An open approval or question, placed under its top-level session. */
export interface WaitingItem {
  kind: 'approval' | 'question';
  id: string;
  sessionId: string;
  agent: string;
  tool?: string;
  label?: string; // an approval's tool's human name (when it has one)
  args?: Record<string, unknown>;
  reason?: string;
  question?: string;
  options?: string[];
  raw: Record<string, unknown>;
}

/** A run's answer (or a decision's): `stopReason` "paused" with `waiting` when it waits. */
export interface RunAnswer {
  sessionId: string;
  stopReason?: string;
  text: string;
  events: LoopwrightEvent[];
  output?: unknown;
  waiting?: WaitingItem;
  pendingIds: string[];
  alreadyResolved: boolean;
  raw: Record<string, unknown>;
}

export interface Listing<T> {
  items: T[];
  nextCursor: string | null;
}

export interface SessionInfo {
  id: string;
  agent: string;
  status: string;
  lastSeq: number;
  title?: string | null;
  forkedFrom?: Record<string, unknown> | null;
}

/** A session: its history (all of it, or a page), what it waits on, its usage. */
export interface HistoryChunk {
  sessionId: string;
  status: string;
  lastSeq: number;
  messages: Array<Record<string, unknown>>;
  waiting: WaitingItem[];
  usage: Record<string, unknown>;
  title?: string | null; // the model-written title, else the first message (null before one)
  nextCursor?: string | null;
  historyStart?: number;
  historyLength?: number;
}

export interface StreamCallbacks {
  // (each may return a promise: the stream waits for it before it takes the next event)
  onEvent?: (event: LoopwrightEvent, seq: number | null) => unknown;
  onText?: (delta: string) => unknown;
  onApproval?: (event: ApprovalPending) => unknown;
  onQuestion?: (event: QuestionPending) => unknown;
  onDone?: (event: Done) => unknown;
}

export interface SendOptions {
  sessionId?: string;
  settings?: Record<string, unknown>;
}

const DELTAS = new Set(['text:delta', 'thinking:delta', 'tool:delta']);
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function waitingItem(data: Json, kind?: string): WaitingItem {
  const which = kind ?? data.type ?? ('question' in data ? 'question' : 'approval');
  return {
    kind: which === 'question' ? 'question' : 'approval',
    id: data.id,
    sessionId: data.sessionId,
    agent: data.agent ?? '',
    tool: data.tool,
    label: data.label,
    args: data.args,
    reason: data.reason,
    question: data.question,
    options: data.options ?? undefined,
    raw: data,
  };
}

function runAnswer(data: Json): RunAnswer {
  return {
    sessionId: data.sessionId,
    stopReason: data.stopReason,
    text: data.text ?? '',
    events: data.events ?? [],
    output: data.output,
    waiting: data.pending === true ? waitingItem(data, data.type) : undefined,
    pendingIds: data.pendingIds ?? [],
    alreadyResolved: data.alreadyResolved === true,
    raw: data,
  };
}

const q = encodeURIComponent;

export class LoopwrightClient {
  readonly base: string;
  readonly reconnects: number;
  readonly retryDelayMs: number;
  private readonly headers: Record<string, string>;
  private readonly fetcher: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.base = baseUrl.replace(/\/+$/, '');
    this.headers = options.token ? { Authorization: `Bearer ${options.token}` } : {};
    this.reconnects = options.reconnects ?? 5;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    this.fetcher = options.fetch ?? fetch;
  }

  /** One request: its JSON, or a ClientError with the server's message. */
  async call(method: string, path: string, body?: unknown, query?: Record<string, unknown>): Promise<Json> {
    const response = await this.fetcher(this.url(path, query), {
      method,
      headers: { ...this.headers, Accept: 'application/json', 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return checked(response);
  }

  url(path: string, query?: Record<string, unknown>): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) params.set(k, String(v));
    const tail = params.toString();
    return `${this.base}${path}${tail ? `?${tail}` : ''}`;
  }

  /** Send a message; the run's answer once it ends or pauses on a decision. */
  async send(agent: string, message: string, options: SendOptions = {}): Promise<RunAnswer> {
    return runAnswer(await this.call('POST', `/agents/${q(agent)}/messages`, sendBody(message, options)));
  }

  /** Send a message and take the run's events as they come, through pauses, up to its final
   * `done` (iterate it, or `run(callbacks)`); a dropped connection is resumed. */
  stream(agent: string, message: string, options: SendOptions = {}): EventStream {
    return new EventStream(this, agent, options.sessionId ?? null, {
      path: `/agents/${q(agent)}/messages/stream`,
      body: sendBody(message, options),
    });
  }

  /** A session's events after seq `after`, then its runs as they go, up to a final `done`. */
  events(agent: string, sessionId: string, after = 0): EventStream {
    return new EventStream(this, agent, sessionId, null, after);
  }

  approve(id: string, args?: Record<string, unknown>): Promise<RunAnswer> {
    return this.call('POST', `/approvals/${q(id)}/approve`, args ? { args } : {}).then(runAnswer);
  }

  /** Approve with edited arguments (merged into the call's). */
  edit(id: string, args: Record<string, unknown>): Promise<RunAnswer> {
    return this.approve(id, args);
  }

  deny(id: string, reason?: string): Promise<RunAnswer> {
    return this.call('POST', `/approvals/${q(id)}/deny`, reason ? { reason } : {}).then(runAnswer);
  }

  answer(id: string, text: string): Promise<RunAnswer> {
    return this.call('POST', `/questions/${q(id)}/answer`, { answer: text }).then(runAnswer);
  }

  /** A session: all its history, or the newest `limit` messages before `cursor`. */
  async session(agent: string, sessionId: string, page: { limit?: number; cursor?: string } = {}): Promise<HistoryChunk> {
    const data = await this.call('GET', `/agents/${q(agent)}/sessions/${q(sessionId)}`, undefined, page);
    return {
      sessionId: data.sessionId,
      status: data.status,
      lastSeq: data.lastSeq,
      messages: data.history,
      waiting: (data.pending ?? []).map((i: Json) => waitingItem(i)),
      usage: data.usage ?? {},
      title: data.title,
      nextCursor: data.nextCursor,
      historyStart: data.historyStart,
      historyLength: data.historyLength,
    };
  }

  /** Every message of a session, oldest first, read `pageSize` at a time. */
  async history(agent: string, sessionId: string, pageSize = 100): Promise<Array<Record<string, unknown>>> {
    const pages: Array<Array<Record<string, unknown>>> = [];
    let cursor: string | undefined;
    for (;;) {
      const chunk = await this.session(agent, sessionId, { limit: pageSize, cursor });
      pages.unshift(chunk.messages);
      if (!chunk.nextCursor) return pages.flat();
      cursor = chunk.nextCursor;
    }
  }

  async sessions(agent: string, page: { limit?: number; cursor?: string } = {}): Promise<Listing<SessionInfo>> {
    const data = await this.call('GET', `/agents/${q(agent)}/sessions`, undefined, page);
    return { items: data.sessions, nextCursor: data.nextCursor ?? null };
  }

  /** One page of every open approval and question of the tenant. */
  async pending(page: { limit?: number; cursor?: string } = {}): Promise<Listing<WaitingItem>> {
    const data = await this.call('GET', '/pending', undefined, page);
    return { items: data.items.map((i: Json) => waitingItem(i)), nextCursor: data.nextCursor ?? null };
  }

  usage(query: { by?: string; agent?: string; session?: string } = {}): Promise<Json> {
    return this.call('GET', '/usage', undefined, query);
  }

  async fork(agent: string, sessionId: string, options: { at?: number; newId?: string } = {}): Promise<SessionInfo> {
    const body = { at: options.at, sessionId: options.newId };
    const data = await this.call('POST', `/agents/${q(agent)}/sessions/${q(sessionId)}/fork`, body);
    return { id: data.sessionId, agent: data.agent, status: data.status, lastSeq: data.lastSeq, forkedFrom: data.forkedFrom };
  }

  /** (EventStream) the last seq of a session, 0 for one not made yet. */
  async lastSeq(agent: string, sessionId: string): Promise<number> {
    try {
      return (await this.session(agent, sessionId, { limit: 1 })).lastSeq;
    } catch (error) {
      if (error instanceof ClientError && error.status === 404) return 0;
      throw error;
    }
  }

  /** (EventStream) open an SSE response. */
  async open(path: string, body: unknown, lastSeq: number, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers, Accept: 'text/event-stream' };
    if (body === undefined && lastSeq > 0) headers['Last-Event-ID'] = String(lastSeq);
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await this.fetcher(this.base + path, {
      method: body === undefined ? 'GET' : 'POST',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    if (!response.ok) await checked(response);
    return response;
  }
}

function sendBody(message: string, options: SendOptions): Json {
  return { message, sessionId: options.sessionId, settings: options.settings };
}

async function checked(response: Response): Promise<Json> {
  const text = await response.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const said = data && typeof data === 'object' ? (data as Json).error : undefined;
    throw new ClientError(response.status, typeof said === 'string' ? said : text.slice(0, 500));
  }
  return data as Json;
}

/** A stream's events: `for await` them (once), or `run(callbacks)`. `sessionId` and `lastSeq`
 * say where it stands; `close()` ends it. */
export class EventStream implements AsyncIterable<LoopwrightEvent> {
  sessionId: string | null;
  lastSeq: number;
  /** How many connections it opened (1, plus one per resumption). */
  connections = 0;
  private unconfirmed: string[] = [];
  private finished = false;
  private readonly abort = new AbortController();
  private startKnown: boolean;

  constructor(
    private readonly client: LoopwrightClient,
    private readonly agent: string,
    sessionId: string | null,
    private first: { path: string; body: unknown } | null,
    after = 0,
  ) {
    this.sessionId = sessionId;
    this.lastSeq = after;
    this.startKnown = first === null || sessionId === null;
  }

  close(): void {
    this.abort.abort();
  }

  /** Iterate to the end, calling `callbacks`; the final `done`. */
  async run(callbacks: StreamCallbacks = {}): Promise<Done | null> {
    let last: Done | null = null;
    for await (const event of this) {
      await callbacks.onEvent?.(event, this.lastSeq);
      if (event.type === 'text:delta') await callbacks.onText?.(event.delta);
      else if (event.type === 'approval:pending') await callbacks.onApproval?.(event);
      else if (event.type === 'question:pending') await callbacks.onQuestion?.(event);
      else if (event.type === 'done') {
        last = event;
        if (event.stopReason !== 'paused') await callbacks.onDone?.(event);
      }
    }
    return last;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<LoopwrightEvent> {
    if (!this.startKnown && this.sessionId !== null) {
      this.lastSeq = await this.client.lastSeq(this.agent, this.sessionId); // where the run starts
      this.startKnown = true;
    }
    let failures = 0;
    let resumed = this.first === null;
    for (;;) {
      let took = false;
      try {
        const first = this.first;
        this.first = null;
        if (first === null && this.sessionId === null) throw new StreamDropped('no session');
        const path = first?.path ?? `/agents/${q(this.agent)}/sessions/${q(this.sessionId!)}/stream?after=${this.lastSeq}`;
        const response = await this.client.open(path, first?.body, this.lastSeq, this.abort.signal);
        this.connections += 1;
        for await (const [seq, data] of frames(response)) {
          const event = this.take(seq, data);
          if (event !== null) {
            took = true;
            failures = 0;
            yield event;
          }
        }
        if (this.finished || (resumed && !took)) return;
      } catch (error) {
        if (error instanceof ClientError || this.abort.signal.aborted) throw error;
        failures += 1;
      }
      if (this.sessionId === null) throw new StreamDropped('the stream dropped before its session was known');
      if (failures > this.client.reconnects) throw new StreamDropped(`the stream could not be resumed (${failures} failures)`);
      if (failures > 1) await new Promise((done) => setTimeout(done, this.client.retryDelayMs)); // (a retry's back-off)
      resumed = true;
    }
  }

  /** The frame's event, or null when the stream already gave it (see the file's head). */
  private take(seq: number | null, data: string): LoopwrightEvent | null {
    const event = JSON.parse(data) as LoopwrightEvent;
    if (seq !== null) {
      if (seq <= this.lastSeq) return null;
      this.lastSeq = seq;
      if (this.unconfirmed.length > 0 && this.unconfirmed[0] === data) {
        this.unconfirmed.shift();
        return null;
      }
      this.unconfirmed = [];
    } else if (!DELTAS.has(event.type)) {
      this.unconfirmed.push(data);
    }
    if (event.type === 'session' && this.sessionId === null) this.sessionId = event.sessionId;
    if (event.type === 'done' && event.stopReason !== 'paused') this.finished = true;
    return event;
  }
}

/** The SSE frames of a response: [seq or null, data]; comments (keep-alives) skipped. A body
 * that ends mid-frame, or an error reading it, throws (the stream resumes). */
async function* frames(response: Response): AsyncGenerator<[number | null, string]> {
  if (response.body === null) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | null = null;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end).replace(/\r$/, '');
        buffer = buffer.slice(end + 1);
        if (line === '') {
          if (data.length > 0) yield [id !== null && /^\d+$/.test(id) ? Number(id) : null, data.join('\n')];
          id = null;
          data = [];
        } else if (!line.startsWith(':')) {
          const at = line.indexOf(':');
          const name = at < 0 ? line : line.slice(0, at);
          const value = at < 0 ? '' : line.slice(at + 1).replace(/^ /, '');
          if (name === 'data') data.push(value);
          else if (name === 'id') id = value;
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined); // (closes the connection when left early)
  }
  if (buffer !== '' || data.length > 0) throw new Error('the stream ended mid-frame');
}
