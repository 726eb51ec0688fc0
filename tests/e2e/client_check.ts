// The TypeScript client's scenario (clients/typescript/loopwright.ts), run on Node by
// tests/test_client_ts.py against a real server: `node client_check.js DIRECT_URL CUT_URL
// HELD_URL`, CUT_URL a proxy that cuts every connection once as the approval of a streamed run
// goes through it, HELD_URL one that cuts while the model's reply to "wait for me" is held. One JSON line per step: {"step", ...}.

import { ClientError, LoopwrightClient, type LoopwrightEvent } from '../../clients/typescript/loopwright.js';

const [direct, cut, heldCut] = process.argv.slice(2);
const lw = new LoopwrightClient(direct!);
const print = (step: string, data: Record<string, unknown>) => console.log(JSON.stringify({ step, ...data }));

async function main(): Promise<void> {
  const hello = await lw.send('shop', 'hello');
  print('send', { text: hello.text, stopReason: hello.stopReason, types: hello.events.map((e) => e.type) });
  const again = await lw.send('shop', 'again', { sessionId: hello.sessionId });
  const page = await lw.session('shop', hello.sessionId, { limit: 1 });
  const all = await lw.history('shop', hello.sessionId, 1);
  const whole = await lw.session('shop', hello.sessionId);
  print('history', {
    again: again.text,
    page: [page.historyStart, page.historyLength, page.messages],
    paged: all,
    whole: whole.messages,
    title: whole.title,
  });

  // a stream held at an approval, decided while it is held (callbacks)
  const held = lw.stream('shop', 'refund now');
  const types: string[] = [];
  let listed: unknown = null;
  const done = await held.run({
    onEvent: (e) => void types.push(e.type),
    onApproval: async (e) => {
      listed = (await lw.pending()).items.filter((i) => i.id === e.id).map((i) => [i.kind, i.tool, i.args, i.sessionId]);
      await lw.approve(e.id);
    },
  });
  print('held', { types, done, listed, sessionId: held.sessionId });

  // the same through a proxy that cuts the connection as the approval goes through
  const through = new LoopwrightClient(cut!);
  const resumed = through.stream('shop', 'refund now');
  const seen: LoopwrightEvent[] = [];
  for await (const event of resumed) {
    seen.push(event);
    if (event.type === 'approval:pending') await lw.approve(event.id); // (directly)
  }
  print('resumed', { events: seen, sessionId: resumed.sessionId, connections: resumed.connections, lastSeq: resumed.lastSeq });
  const replying = new LoopwrightClient(heldCut!).stream('shop', 'wait for me');
  const taken: LoopwrightEvent[] = [];
  for await (const event of replying) taken.push(event);
  print('replying', { events: taken, sessionId: replying.sessionId, connections: replying.connections });
  print('pending', { items: (await lw.pending()).items.filter((i) => i.sessionId === resumed.sessionId) });

  try {
    await lw.approve('apr_nothing');
    print('error', { thrown: false });
  } catch (error) {
    const e = error as ClientError;
    print('error', { name: e.name, status: e.status, message: e.serverMessage, typed: error instanceof ClientError });
  }
  print('end', {});
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
