// A small loopengine v1 client, written from the documented v1 protocol (README "Over HTTP",
// PROTOCOL.md): a base URL, `${base}/agents/...` and nothing else. Plain modern JS with JSDoc
// types (checked by no compiler here: Node runs it as it is).
//
//   node v1_client.mjs BASE_URL    runs the conformance scenario against BASE_URL (e.g.
//                                  http://127.0.0.1:8787/v1) and prints one JSON line per
//                                  result and per event received: {"step", "result"|"error"|
//                                  "event"}; the test suite validates every event against the
//                                  v1 schema and checks the results.

/** @typedef {{type: string, [field: string]: unknown}} LoopEvent */
/** @typedef {{text: string, sessionId: string, events: LoopEvent[], stopReason?: 'max_turns' | 'denied'}} SendMessageResult */
/** @typedef {{pending: true, type: 'approval', id: string, sessionId: string, tool: string, args: object, scope: object, reason: string, approveUrl: string, denyUrl: string, statusUrl: string, events: LoopEvent[]}} PendingApprovalResult */
/** @typedef {{pending: true, type: 'question', id: string, sessionId: string, question: string, options?: string[], answerUrl: string, statusUrl: string, events: LoopEvent[]}} PendingQuestionResult */
/** @typedef {SendMessageResult | PendingApprovalResult | PendingQuestionResult} MessageResult */
/** @typedef {{role: 'user' | 'assistant', content: string | object[]}} HistoryMessage */
/** @typedef {{sessionId?: string, headers?: Record<string, string>, body?: object, signal?: AbortSignal}} SendOptions */

/**
 * @param {Response} response
 * @returns {Promise<any>}
 */
async function parsed(response) {
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error ?? `HTTP ${response.status}`);
  return data;
}

/**
 * @param {string} agent
 * @param {string} message
 * @param {SendOptions} options
 */
function messageRequest(agent, message, options) {
  const body = { message, ...(options.body ?? {}) };
  if (options.sessionId !== undefined) body.sessionId = options.sessionId;
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(options.headers ?? {}) },
    body: JSON.stringify(body),
    signal: options.signal,
  };
}

/**
 * POST /agents/:agent/messages.
 * @param {string} baseUrl @param {string} agent @param {string} message
 * @param {SendOptions} [options]
 * @returns {Promise<MessageResult>}
 */
export async function sendMessage(baseUrl, agent, message, options = {}) {
  const url = `${baseUrl}/agents/${encodeURIComponent(agent)}/messages`;
  return parsed(await fetch(url, messageRequest(agent, message, options)));
}

/** @param {string} baseUrl @param {string} id @returns {Promise<MessageResult>} */
export async function approveCall(baseUrl, id) {
  return parsed(await fetch(`${baseUrl}/approvals/${encodeURIComponent(id)}/approve`, { method: 'POST' }));
}

/** @param {string} baseUrl @param {string} id @returns {Promise<MessageResult>} */
export async function denyCall(baseUrl, id) {
  return parsed(await fetch(`${baseUrl}/approvals/${encodeURIComponent(id)}/deny`, { method: 'POST' }));
}

/** @param {string} baseUrl @param {string} id @param {string} answer @returns {Promise<MessageResult>} */
export async function answerQuestion(baseUrl, id, answer) {
  return parsed(
    await fetch(`${baseUrl}/questions/${encodeURIComponent(id)}/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ answer }),
    }),
  );
}

/**
 * GET /agents/:agent/sessions/:id.
 * @param {string} baseUrl @param {string} agent @param {string} sessionId
 * @returns {Promise<{sessionId: string, history: HistoryMessage[]}>}
 */
export async function getSessionHistory(baseUrl, agent, sessionId) {
  const url = `${baseUrl}/agents/${encodeURIComponent(agent)}/sessions/${encodeURIComponent(sessionId)}`;
  return parsed(await fetch(url));
}

/**
 * POST /agents/:agent/messages/stream: each SSE frame's `data:` parsed as an event (frames
 * that do not parse are skipped); a reply that is not a stream gives one `error` event.
 * @param {string} baseUrl @param {string} agent @param {string} message
 * @param {SendOptions} [options]
 * @returns {AsyncGenerator<LoopEvent>}
 */
export async function* streamMessage(baseUrl, agent, message, options = {}) {
  const url = `${baseUrl}/agents/${encodeURIComponent(agent)}/messages/stream`;
  const response = await fetch(url, messageRequest(agent, message, options));
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const data = await response.json().catch(() => ({}));
    yield { type: 'error', error: data.error ?? `HTTP ${response.status}` };
    return;
  }
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (!data) continue;
      try {
        yield JSON.parse(data);
      } catch {
        // not JSON: skipped, as v1 clients do
      }
    }
  }
}

/**
 * The stream, through callbacks.
 * @param {string} baseUrl @param {string} agent @param {string} message
 * @param {{onEvent?: (e: LoopEvent) => void | Promise<void>, onDone?: (e: LoopEvent) => void, onError?: (e: LoopEvent) => void}} callbacks
 * @param {SendOptions} [options]
 */
export async function streamMessageWithCallbacks(baseUrl, agent, message, callbacks, options = {}) {
  for await (const event of streamMessage(baseUrl, agent, message, options)) {
    await callbacks.onEvent?.(event);
    if (event.type === 'done') callbacks.onDone?.(event);
    if (event.type === 'error') callbacks.onError?.(event);
  }
}

// ---- the conformance scenario ------------------------------------------------------------

/** @param {string} step @param {object} line */
function print(step, line) {
  process.stdout.write(JSON.stringify({ step, ...line }) + '\n');
}

/** @param {string} step @param {MessageResult | {sessionId: string, history: HistoryMessage[]}} result */
function report(step, result) {
  for (const event of result.events ?? []) print(step, { event });
  print(step, { result });
}

/** @param {string} step @param {() => Promise<unknown>} call */
async function failing(step, call) {
  try {
    await call();
    print(step, { error: null });
  } catch (error) {
    print(step, { error: String(error.message) });
  }
}

async function main(base) {
  const customer = 'ana.lopez+orders@example.com';
  report('send', await sendMessage(base, 'shop', 'hello', { sessionId: customer }));

  const asked = await sendMessage(base, 'shop', 'refund A-1', { sessionId: `${customer}/approve` });
  report('approve:paused', asked);
  report('approve', await approveCall(base, asked.id));
  await failing('double', () => denyCall(base, asked.id));

  const denied = await sendMessage(base, 'shop', 'refund A-1');
  report('deny:paused', denied);
  report('deny', await denyCall(base, denied.id));

  const question = await sendMessage(base, 'shop', 'ask me', { sessionId: 'q 1' });
  report('answer:paused', question);
  report('answer', await answerQuestion(base, question.id, 'blue'));

  report('history', await getSessionHistory(base, 'shop', `${customer}/approve`));
  report('unknown', await getSessionHistory(base, 'shop', 'nobody/ever %41'));

  for await (const event of streamMessage(base, 'shop', 'hello', { sessionId: customer })) {
    print('stream', { event });
  }

  const seen = { done: 0, error: 0 };
  let approval = Promise.resolve(null);
  await streamMessageWithCallbacks(
    base,
    'shop',
    'refund A-1',
    {
      onEvent: (event) => {
        print('callbacks', { event });
        if (event.type === 'approval:pending') approval = approveCall(base, String(event.id));
      },
      onDone: () => (seen.done += 1),
      onError: () => (seen.error += 1),
    },
    { sessionId: 'streamed' },
  );
  report('callbacks:approve', await approval);
  print('callbacks', { result: seen });

  for (const text of ['one', 'two']) await sendMessage(base, 'greeter', text, { sessionId: 'g' });
  await failing('failure', () => sendMessage(base, 'greeter', 'three', { sessionId: 'g' }));
  for await (const event of streamMessage(base, 'greeter', 'four', { sessionId: 'g' })) {
    print('failure:stream', { event });
  }
  print('end', {});
}

if (process.argv[2]) {
  main(process.argv[2]).catch((error) => {
    process.stderr.write(`${error.stack ?? error}\n`);
    process.exit(1);
  });
}
