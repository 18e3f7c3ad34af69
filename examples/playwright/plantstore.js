// The plantstore a test talks to, as Playwright fixtures: each worker
// starts its own server on a free loopback port, with every API answer
// held for DELAY (so that a test can see what a page shows while it
// waits), POST /plants/reset enabled and seed.json as the plants a reset
// brings back; it is stopped when the worker ends, pass or fail.
//
//   PLANTSTORE_BIN   the server to run (default: plantstore on the PATH)
//
// Tests import { test, expect, seed, DELAY } from here instead of from
// @playwright/test: `plantstore` is { url, token, auth } (auth: the
// Authorization header of a token with every scope), and baseURL is the
// server's, so page.goto('/') opens its built-in page.
'use strict';
const { spawn } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const path = require('node:path');
const base = require('@playwright/test');

const SEED = path.join(__dirname, 'seed.json');
const seed = require(SEED);
// Milliseconds each API answer is held: --delay MIN..MAX.
const DELAY = { min: 300, max: 500 };
const START_MS = 10_000;
const STOP_MS = 5_000;
const LOG_BYTES = 16_384;

// Starts the server and resolves once it logs its address ("listening on
// http://127.0.0.1:PORT, ..."); rejects, with what it logged, if it exits
// or says nothing of the kind within START_MS.
function start() {
  const bin = process.env.PLANTSTORE_BIN || 'plantstore';
  const token = randomBytes(18).toString('base64url');
  const args = ['--addr', '127.0.0.1:0', '--delay', `${DELAY.min}..${DELAY.max}`,
    '--allow-reset', '--seed', SEED];
  const child = spawn(bin, args, {
    env: { ...process.env, PLANTSTORE_TOKEN: token },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // A worker that ends without its fixtures' teardown still stops it.
  const orphan = () => child.kill('SIGKILL');
  process.on('exit', orphan);
  let log = '';
  let started = false;
  let exited = false;
  const gone = new Promise((resolve) => child.on('exit', resolve)).then(() => {
    exited = true;
    process.off('exit', orphan);
  });
  return new Promise((resolve, reject) => {
    const fail = (why) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`plantstore (${bin}): ${why}\n${log}`));
    };
    const timer = setTimeout(() => fail(`no address logged within ${START_MS} ms`), START_MS);
    child.on('error', (e) => fail(e.message));
    child.on('exit', (code, signal) => fail(`exited (${code ?? signal})`));
    // Read to the end, so that a chatty server never blocks on a full pipe;
    // the last LOG_BYTES are kept for the messages above.
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      log = (log + chunk).slice(-LOG_BYTES);
      const found = !started && /listening on (http:\/\/[^,\s]+)/.exec(log);
      if (!found) return;
      started = true;
      clearTimeout(timer);
      const auth = { Authorization: `Bearer ${token}` };
      resolve({ url: found[1], token, auth, stop });
    });
  });

  // Stops the server; throws, with its last words, if it had stopped by
  // itself, so that a crash mid-test is not taken for a failing page.
  async function stop() {
    if (exited) throw new Error(`plantstore (${bin}) exited during the tests:\n${log}`);
    child.kill('SIGTERM');
    const late = setTimeout(() => child.kill('SIGKILL'), STOP_MS);
    await gone;
    clearTimeout(late);
  }
}

const test = base.test.extend({
  plantstore: [async ({}, use) => {
    const server = await start();
    try {
      await use(server);
    } finally {
      await server.stop();
    }
  }, { scope: 'worker' }],
  baseURL: async ({ plantstore }, use) => use(plantstore.url),
});

module.exports = { test, expect: base.expect, seed, DELAY };
