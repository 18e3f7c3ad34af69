// The change feed read by the `eventsource` package (the WHATWG
// EventSource for Node, written by others) through a TCP proxy this program
// controls, as a browser opens it: with a ticket in the URL (minted with the
// token, straight from the server) and no Authorization header. Changes are
// made while connected, the proxy then cuts the connection and refuses new
// ones while more changes are made (and until the client has tried once),
// then lets it back in; the client must reconnect by itself, with the same
// ticket and Last-Event-ID, and receive every change exactly once, in
// order, with no `reset`. The changes are made straight to the server, not
// through the proxy.
//
// Usage: node scripts/peer/peer-eventsource.mjs MODULE_DIR BASE_URL TOKEN
//   (MODULE_DIR: where `eventsource` is installed). Run by
//   scripts/peer/peer-eventsource.sh. Exits 1 on any finding, and past
//   DEADLINE_MS.
//
// PEER_EVENTSOURCE_BREAK, only to show the check fails, makes the proxy
// corrupt the feed: `drop` drops the second event of each connection, `skip`
// rewrites the Last-Event-ID of a reconnection to the next id (a server
// that resumes one event late).

import net from 'node:net';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const DEADLINE_MS = 45_000;
const [moduleDir, base, token] = process.argv.slice(2);
const breakMode = process.env.PEER_EVENTSOURCE_BREAK || '';
if (!token || !['', 'drop', 'skip'].includes(breakMode)) {
  console.error('usage: peer-eventsource.mjs MODULE_DIR BASE_URL TOKEN');
  process.exit(2);
}
const { EventSource } = createRequire(resolve(moduleDir, 'package.json'))('eventsource');
const server = new URL(base);
const started = Date.now();
setTimeout(() => fail(`not done within ${DEADLINE_MS / 1000} s`), DEADLINE_MS).unref();

const received = []; // { type, id, data } in the order dispatched
const connects = []; // the Last-Event-ID of each connection attempt (null: none)
const state = { opens: 0, errors: 0, refused: 0, cut: false, es: null, proxy: null };

function fail(why) {
  console.error(`peer-eventsource: FAIL: ${why}`);
  console.error(`  received (${received.length}):`);
  for (const event of received) console.error(`    ${event.id} ${event.type} ${event.data}`);
  process.exit(1);
}

// The proxy: every connection piped to the server while up; `cut` ends the
// open ones and refuses (closes at once) new ones until `restore`.
function startProxy() {
  const open = new Set();
  const proxy = net.createServer((client) => {
    if (state.cut) {
      state.refused += 1;
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(server.port), server.hostname);
    const pair = [client, upstream];
    open.add(pair);
    const fromServer = breakMode === 'drop' ? dropSecondEvent() : (data) => data;
    let first = true;
    client.on('data', (data) => {
      upstream.write(first && breakMode === 'skip' ? skipResume(data) : data);
      first = false;
    });
    upstream.on('data', (data) => client.write(fromServer(data)));
    for (const socket of pair) {
      socket.on('error', () => {});
      socket.on('close', () => {
        open.delete(pair);
        pair.forEach((s) => s.destroy());
      });
    }
  });
  proxy.cut = () => {
    state.cut = true;
    for (const pair of open) pair.forEach((s) => s.destroy());
  };
  proxy.restore = () => {
    state.cut = false;
  };
  return new Promise((resolve) => proxy.listen(0, '127.0.0.1', () => resolve(proxy)));
}

// `skip`: a reconnection's Last-Event-ID moved one event on.
function skipResume(data) {
  return Buffer.from(
    data.toString('latin1').replace(/^(Last-Event-ID: \d+-)(\d+)\r$/im, (_, head, n) => `${head}${Number(n) + 1}\r`),
    'latin1',
  );
}

// `drop`: the chunked stream decoded, its second event left out, the rest
// sent on as chunks (the head passes as it is).
function dropSecondEvent() {
  let raw = Buffer.alloc(0);
  let inHead = true;
  let text = '';
  let events = 0;
  return (data) => {
    raw = Buffer.concat([raw, data]);
    const out = [];
    if (inHead) {
      const end = raw.indexOf('\r\n\r\n');
      if (end < 0) return Buffer.alloc(0);
      out.push(raw.subarray(0, end + 4));
      raw = raw.subarray(end + 4);
      inHead = false;
    }
    for (let eol = raw.indexOf('\r\n'); eol >= 0; eol = raw.indexOf('\r\n')) {
      const size = parseInt(raw.subarray(0, eol).toString('latin1'), 16);
      if (raw.length < eol + 2 + size + 2) break;
      text += raw.subarray(eol + 2, eol + 2 + size).toString('latin1');
      raw = raw.subarray(eol + 4 + size);
    }
    for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
      const block = text.slice(0, end + 2);
      text = text.slice(end + 2);
      if (/^event: /m.test(block) && ++events === 2) continue;
      out.push(Buffer.from(`${Buffer.byteLength(block, 'latin1').toString(16)}\r\n${block}\r\n`, 'latin1'));
    }
    return Buffer.concat(out);
  };
}

// A ticket for the feed (POST /plants/changes/tickets with the token).
async function mint() {
  const response = await fetch(new URL('/plants/changes/tickets', server), {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}` },
  });
  const body = await response.text();
  if (response.status !== 200) fail(`minting a ticket: ${response.status} ${body}`);
  const { ticket, scope, expiresIn } = JSON.parse(body);
  if (typeof ticket !== 'string' || scope !== 'write' || !(expiresIn > DEADLINE_MS / 1000)) {
    fail(`the ticket's answer: ${body}`);
  }
  return ticket;
}

// The feed as a browser opens it; each attempt's URL and Last-Event-ID are
// recorded, and one with an Authorization header is a finding.
function openFeed(proxyPort, ticket) {
  const url = `http://127.0.0.1:${proxyPort}/plants/changes?ticket=${encodeURIComponent(ticket)}`;
  const es = new EventSource(url, {
    fetch: (to, init) => {
      if (String(to) !== url) fail(`a connection attempt to ${to}, not ${url}`);
      if (Object.keys(init.headers).some((name) => name.toLowerCase() === 'authorization')) {
        fail('the client sent an Authorization header');
      }
      connects.push(init.headers['Last-Event-ID'] ?? null);
      return fetch(to, init);
    },
  });
  es.addEventListener('open', () => (state.opens += 1));
  es.addEventListener('error', () => (state.errors += 1));
  for (const type of ['created', 'replaced', 'deleted', 'reset', 'message']) {
    es.addEventListener(type, (event) => received.push({ type, id: event.lastEventId, data: event.data }));
  }
  return es;
}

async function waitFor(what, test) {
  while (!test()) {
    if (Date.now() - started > DEADLINE_MS) fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const expected = []; // { type, data } in the order the server acknowledged

async function change(method, path, body) {
  const response = await fetch(new URL(path, server), {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  if (!response.ok) fail(`${method} ${path}: ${response.status} ${await response.text()}`);
  await response.arrayBuffer();
  const id = body ? body.id ?? Number(path.split('/').pop()) : Number(path.split('/').pop());
  const record = body && { id, name: body.name, ...(body.tag ? { tag: body.tag } : {}) };
  const type = { POST: 'created', PUT: 'replaced', DELETE: 'deleted' }[method];
  expected.push({ type, data: JSON.stringify(type === 'deleted' ? { id } : record) });
}

// Each phase's changes, made in order; every phase ends with one the
// client must receive before the next phase starts.
const phases = {
  before: [
    ['POST', '/plants', { id: 1, name: 'Monstera', tag: 'tropical' }],
    ['POST', '/plants', { id: 2, name: 'Fern' }],
    ['PUT', '/plants/1', { name: 'Monstera deliciosa', tag: 'tropical' }],
    ['DELETE', '/plants/2'],
  ],
  during: [
    ['POST', '/plants', { id: 3, name: 'Aloe', tag: 'succulent' }],
    ['PUT', '/plants/3', { name: 'Aloe vera' }],
    ['POST', '/plants', { id: 4, name: 'Ivy' }],
    ['DELETE', '/plants/1'],
  ],
  after: [
    ['POST', '/plants', { id: 5, name: 'Basil', tag: 'herb' }],
    ['PUT', '/plants/4', { name: 'English ivy', tag: 'climber' }],
    ['DELETE', '/plants/3'],
  ],
};

// Waits for the event of the last change made: a feed that lost one before
// it still gets there, and `verify` says what is missing.
function lastArrived() {
  const last = expected.at(-1);
  return received.some(({ type, data }) => type === last.type && data === last.data);
}

async function run(phase) {
  for (const [method, path, body] of phases[phase]) await change(method, path, body);
  if (phase !== 'during') await waitFor(`the changes made ${phase} the cut`, lastArrived);
}

function verify(lastBeforeCut) {
  const got = received.map(({ type, data }) => `${type} ${data}`);
  const want = expected.map(({ type, data }) => `${type} ${data}`);
  const at = want.findIndex((line, i) => line !== got[i]);
  if (at >= 0 || got.length !== want.length) {
    const where = at >= 0 ? at : want.length;
    fail(`${want.length} changes made, ${got.length} events received; event ${where + 1} should be`
      + ` "${want[where] ?? '(none)'}", is "${got[where] ?? '(none)'}"`);
  }
  const ids = received.map(({ id }) => id.split('-').map(Number));
  for (let i = 1; i < ids.length; i++) {
    if (ids[i][0] !== ids[0][0] || ids[i][1] !== ids[i - 1][1] + 1) fail(`ids not consecutive at ${received[i].id}`);
  }
  if (state.opens < 2) fail(`the client reconnected ${state.opens - 1} times, not once`);
  const resumed = connects.filter((id) => id !== null);
  if (resumed.length < 1 || resumed.some((id) => id !== lastBeforeCut)) {
    fail(`reconnections sent Last-Event-ID ${JSON.stringify(resumed)}, not ${lastBeforeCut}`);
  }
}

async function main() {
  state.proxy = await startProxy();
  state.es = openFeed(state.proxy.address().port, await mint());
  await waitFor('the stream to open', () => state.opens === 1);
  await run('before');
  const lastBeforeCut = received.at(-1).id;
  state.proxy.cut();
  await waitFor('the client to see the cut', () => state.errors >= 1);
  await run('during');
  // The server stays out of reach for one attempt at least: the client must
  // go on trying after a reconnection that fails.
  await waitFor('a reconnection attempt while cut', () => state.refused >= 1);
  state.proxy.restore();
  await waitFor('the client to reconnect', () => state.opens >= 2);
  await waitFor('the changes made during the cut', lastArrived);
  await run('after');
  // Anything extra (a repeat) would come right after the last event.
  await new Promise((resolve) => setTimeout(resolve, 300));
  state.es.close();
  state.proxy.close();
  verify(lastBeforeCut);
  console.log(`peer-eventsource: ${received.length} events received, each change once and in order,`
    + ' on a feed opened with a ticket and no Authorization header');
  console.log(`  connection attempts: ${connects.length}, opened ${state.opens} (reconnections: ${state.opens - 1}),`
    + ` refused while cut: ${state.refused}`);
  console.log(`  Last-Event-ID sent on reconnecting: ${connects.filter((id) => id !== null).join(', ')}`
    + ` (last event before the cut: ${lastBeforeCut})`);
  process.exit(0);
}

main().catch((error) => fail(error.stack || String(error)));
