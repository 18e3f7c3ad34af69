'use strict';
// Served from another origin than the API's by scripts/browser/browser.sh: calls
// the API the way a web application would, and writes what happened into
// #result as JSON, one entry per step, for the test to read.
// The API's address and token come in the query: ?api=...&token=...
(async () => {
  const query = new URLSearchParams(location.search);
  const api = query.get('api');
  const auth = { Authorization: 'Bearer ' + query.get('token') };
  const json = { ...auth, 'Content-Type': 'application/json' };
  const steps = [];

  async function step(name, run) {
    try {
      steps.push({ name, ok: true, detail: await run() });
    } catch (e) {
      steps.push({ name, ok: false, detail: String(e) });
    }
  }

  async function expect(response, status) {
    if (response.status !== status) {
      throw new Error(response.status + ' ' + (await response.text()));
    }
    return response;
  }

  await step('GET /healthz', async () => {
    const response = await expect(await fetch(api + '/healthz'), 200);
    return (await response.json()).status;
  });
  await step('POST /plants', async () => {
    for (const id of [41, 42]) {
      const body = JSON.stringify({ id, name: 'plant ' + id, tag: 'cors' });
      await expect(await fetch(api + '/plants', { method: 'POST', headers: json, body }), 200);
    }
    return 'created 41 and 42';
  });
  await step('GET /plants (Link)', async () => {
    const response = await expect(await fetch(api + '/plants?limit=1&tag=cors', { headers: auth }), 200);
    const link = response.headers.get('Link');
    const plants = await response.json();
    if (plants.length !== 1 || plants[0].id !== 41) throw new Error(JSON.stringify(plants));
    // Absolute: a page from another origin follows it as it is.
    if (!link || !link.startsWith('<' + api + '/plants?after=41&limit=1')) throw new Error('Link: ' + link);
    return link;
  });
  await step('PUT /plants/42', async () => {
    const body = JSON.stringify({ name: 'renamed' });
    const response = await expect(await fetch(api + '/plants/42', { method: 'PUT', headers: json, body }), 200);
    return (await response.json()).name;
  });
  await step('DELETE /plants/{id}', async () => {
    for (const id of [41, 42]) {
      await expect(await fetch(api + '/plants/' + id, { method: 'DELETE', headers: auth }), 204);
    }
    return 'deleted 41 and 42';
  });
  await step('401 is readable', async () => {
    const response = await expect(await fetch(api + '/plants'), 401);
    return response.headers.get('WWW-Authenticate');
  });

  document.getElementById('result').textContent = JSON.stringify(steps);
  document.body.dataset.done = 'yes';
})();
