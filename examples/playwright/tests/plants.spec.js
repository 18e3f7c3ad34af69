// The built-in page at / against a server whose API answers are held for
// DELAY (plantstore.js), with the plants reset to seed.json before each
// test, as a suite for a front end of one's own would do it:
//
// - after a reset, the page lists exactly the seed's plants, whatever the
//   store held before;
// - a reset made while the page is open reaches it through the change feed;
// - while its listing is held, the built-in page shows its frame with no
//   rows and no count (it has no spinner: the check is that state, seen
//   while the request is still unanswered, and the request's own timing);
// - a page of the example's own (PAGE, served at the server's origin by
//   page.route, so its fetch needs no CORS) shows "Loading…" with its
//   button disabled until the held answer comes, then the seed's plants.
'use strict';
const { test, expect, seed, DELAY } = require('../plantstore');

// The seed as the page shows it: by id, a tag where there is one.
const seeded = seed.map(({ id, name, tag }) => ({ id: String(id), name, tag }))
  .sort((a, b) => Number(a.id) - Number(b.id));

test.beforeEach(async ({ request, plantstore }) => {
  const res = await request.post('/plants/reset', { headers: plantstore.auth });
  expect(res.status(), await res.text()).toBe(200);
  expect(await res.json()).toEqual({ plants: seed.length });
});

async function signIn(page, token) {
  await page.goto('/');
  await page.getByLabel('Bearer token').fill(token);
  await page.getByRole('button', { name: 'Use token' }).click();
}

// The listing's rows as { id, name, tag }.
function rows(page) {
  return page.locator('#list tr').evaluateAll((trs) => trs.map((tr) => ({
    id: tr.dataset.id,
    name: tr.querySelector('.name').firstChild.textContent,
    tag: tr.querySelector('.name .tag')?.textContent,
  })));
}

async function expectSeed(page) {
  await expect(page.locator('#list tr')).toHaveCount(seeded.length);
  expect(await rows(page)).toEqual(seeded);
  await expect(page.locator('#shown')).toHaveText(`${seeded.length} plants`);
}

test('after a reset the page lists exactly the seed\'s plants', async ({ page, request, plantstore }) => {
  const headers = plantstore.auth;
  const added = await request.post('/plants', { headers, data: { id: 4, name: 'Basil', tag: 'herb' } });
  expect(added.status()).toBe(200);
  expect((await request.delete(`/plants/${seeded[0].id}`, { headers })).status()).toBe(204);
  const renamed = await request.put(`/plants/${seeded[1].id}`, { headers, data: { name: 'Dead fern' } });
  expect(renamed.status()).toBe(200);

  const reset = await request.post('/plants/reset', { headers });
  expect(reset.status()).toBe(200);
  expect(await reset.json()).toEqual({ plants: seed.length });

  await signIn(page, plantstore.token);
  await expectSeed(page);
});

test('a reset made while the page is open reaches it', async ({ page, request, plantstore }) => {
  const headers = plantstore.auth;
  await signIn(page, plantstore.token);
  await expectSeed(page);
  // Changes from elsewhere come through the change feed...
  expect((await request.post('/plants', { headers, data: { id: 4, name: 'Basil' } })).status()).toBe(200);
  await expect(page.locator('#list tr')).toHaveCount(seeded.length + 1);
  // ...and so does a reset, with no reload.
  expect((await request.post('/plants/reset', { headers })).status()).toBe(200);
  await expectSeed(page);
});

test('while its listing is held the page shows no rows and no count', async ({ page, plantstore }) => {
  const listing = page.waitForRequest((r) => r.method() === 'GET' && new URL(r.url()).pathname === '/plants');
  await signIn(page, plantstore.token);
  const asked = await listing;
  let answered = false;
  const answer = asked.response().then((res) => { answered = true; return res; });

  // What the page shows at this moment, read in one go: the request is out
  // and its answer held, so this is the page's state while it waits.
  const waiting = await page.evaluate(() => ({
    app: !document.getElementById('app').hidden,
    rows: document.querySelectorAll('#list tr').length,
    shown: document.getElementById('shown').textContent,
  }));
  expect(answered, 'the listing was answered before the page was read').toBe(false);
  expect(waiting).toEqual({ app: true, rows: 0, shown: '' });

  const res = await answer;
  expect(res.status()).toBe(200);
  const timing = asked.timing();
  // The browser's own measure, from sending the request to the answer's
  // first byte: at least the server's hold (less a millisecond of rounding).
  expect(timing.responseStart - timing.requestStart).toBeGreaterThanOrEqual(DELAY.min - 1);
  await expectSeed(page);
});

// A page of one's own: its loading state while the answer is held.
const PAGE = (token) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Plants</title></head>
<body>
<button id="load">Load plants</button>
<p id="state" role="status"></p>
<ul id="plants"></ul>
<script>
document.getElementById('load').addEventListener('click', async (event) => {
  const button = event.target;
  const state = document.getElementById('state');
  button.disabled = true;
  state.textContent = 'Loading\\u2026';
  try {
    const res = await fetch('/plants?sort=id', { headers: { Authorization: 'Bearer ' + ${JSON.stringify(token)} } });
    if (!res.ok) throw new Error('Error ' + res.status);
    const items = (await res.json()).map((plant) => {
      const li = document.createElement('li');
      li.textContent = plant.name;
      return li;
    });
    document.getElementById('plants').replaceChildren(...items);
    state.textContent = '';
  } catch (e) {
    state.textContent = e.message;
  }
  button.disabled = false;
});
</script>
</body></html>`;

test('a page of one\'s own shows "Loading…" until the held answer comes', async ({ page, plantstore }) => {
  await page.route('/own-page', (route) => route.fulfill({ contentType: 'text/html', body: PAGE(plantstore.token) }));
  await page.goto('/own-page');
  const button = page.getByRole('button', { name: 'Load plants' });
  const state = page.getByRole('status');

  const started = Date.now();
  await button.click();
  await expect(state).toHaveText('Loading…');
  await expect(button).toBeDisabled();
  await expect(page.getByRole('listitem')).toHaveCount(0);

  await expect(page.getByRole('listitem')).toHaveText(seeded.map((plant) => plant.name));
  expect(Date.now() - started).toBeGreaterThanOrEqual(DELAY.min);
  await expect(state).toBeEmpty();
  await expect(button).toBeEnabled();
});
