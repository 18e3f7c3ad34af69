'use strict';
// The plantstore page: a token kept for this tab, then the API with fetch.
// Plant ids are int64: they are kept as decimal text, never as a Number
// (which is exact only to 2^53), both when read and when sent. The change
// feed keeps the listing current: any change, from this tab or elsewhere,
// refreshes it (one refresh for a burst; none while a plant is edited).
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY = 'plantstore.token';
  const LIMIT = 20;
  let token = sessionStorage.getItem(KEY) || '';
  let page = '';    // the listing shown
  let back = [];    // the listings before it
  let next = null;  // the listing after it (from Link)
  let drawn = '';   // what the listing shown was drawn from
  let feed = null;  // the change feed being followed (its AbortController)
  let lastId = '';  // the feed's last event id, to resume from
  let refresh = null; // a refresh due after changes
  let stale = false;  // changes came while a plant was edited

  function say(text, bad) {
    const msg = $('msg');
    msg.textContent = text;
    msg.className = bad ? 'bad' : '';
    msg.hidden = !text;
  }

  // A request to the API; rejects with the server's Error message.
  async function api(method, url, body) {
    const headers = { Authorization: 'Bearer ' + token };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(url, { method, headers, body, cache: 'no-store' });
    } catch (e) {
      throw new Error('Cannot reach the server.');
    }
    if (res.ok) return res;
    let text = 'Error ' + res.status + ' ' + res.statusText;
    try {
      const error = await res.json();
      if (typeof error.message === 'string') text = 'Error ' + res.status + ': ' + error.message;
    } catch (e) { /* not an Error body */ }
    if (res.status === 401) signOut();
    throw new Error(text);
  }

  // The server writes each record as {"id":N,...}: N becomes a string.
  const records = (text) => JSON.parse(text.replace(/\{"id":(-?\d+)/g, '{"id":"$1"'));

  function plantBody(id, name, tag) {
    let body = '{' + (id === null ? '' : '"id":' + id + ',') + '"name":' + JSON.stringify(name);
    if (tag) body += ',"tag":' + JSON.stringify(tag);
    return body + '}';
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function button(text, cls, action) {
    const b = el('button', cls, text);
    b.type = 'button';
    b.addEventListener('click', action);
    return b;
  }

  function listing(tag) {
    return '/plants?limit=' + LIMIT + (tag ? '&tag=' + encodeURIComponent(tag) : '');
  }

  // Shows the listing at url; false if it could not. A quiet one (a
  // refresh after changes) draws only a listing that differs, so one that
  // finds nothing new leaves the rows, and what the user does in them, alone.
  async function show(url, quiet) {
    try {
      const res = await api('GET', url);
      const link = /<([^>]*)>\s*;\s*rel="?next"?/.exec(res.headers.get('Link') || '');
      const text = await res.text();
      // The user moved on meanwhile: that listing is no longer shown.
      if (quiet && url !== page) return true;
      const plants = records(text);
      page = url;
      next = link ? link[1] : null;
      const from = url + '\n' + next + '\n' + back.length + '\n' + text;
      if (!quiet || from !== drawn) render(plants);
      drawn = from;
      return true;
    } catch (e) {
      say(e.message, true);
      return false;
    }
  }

  function render(plants) {
    const list = $('list');
    list.replaceChildren(...plants.map(row));
    const tag = new URLSearchParams(page.split('?')[1]).get('tag');
    const tagged = tag ? ' tagged \u201c' + tag + '\u201d' : '';
    $('shown').textContent = plants.length ? (tag ? 'Plants' + tagged : '') : 'No plants' + tagged + '.';
    $('prev').disabled = back.length === 0;
    $('next').disabled = !next;
    $('pageno').textContent = 'Page ' + (back.length + 1);
  }

  function row(plant) {
    const li = el('li');
    li.dataset.id = plant.id;
    const name = el('span', 'name', plant.name);
    if (plant.tag !== undefined) {
      name.append(button(plant.tag, 'tag', () => filter(plant.tag)));
    }
    const del = button('Delete', 'danger', () => remove(plant, del));
    const acts = el('span', 'acts');
    acts.append(button('Edit', 'quiet', () => edit(li, plant)), del);
    li.append(el('span', 'id', '#' + plant.id), name, acts);
    return li;
  }

  function edit(li, plant) {
    const name = el('input');
    name.value = plant.name;
    name.setAttribute('aria-label', 'Name');
    const tag = el('input');
    tag.value = plant.tag || '';
    tag.placeholder = 'no tag';
    tag.setAttribute('aria-label', 'Tag');
    const acts = el('span', 'acts');
    acts.append(el('button', '', 'Save'), button('Cancel', 'quiet', () => {
      li.replaceWith(row(plant));
      if (stale) changed();
    }));
    const form = el('form');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      save(plant.id, name.value, tag.value);
    });
    form.append(el('span', 'id', '#' + plant.id), name, tag, acts);
    li.className = 'edit';
    li.replaceChildren(form);
    name.focus();
  }

  async function save(id, name, tag) {
    try {
      await api('PUT', '/plants/' + id, plantBody(null, name, tag.trim()));
      say('Saved plant ' + id + '.');
      await show(page);
    } catch (e) {
      say(e.message, true);
    }
  }

  // Two clicks: the first arms the button, the second deletes.
  async function remove(plant, del) {
    if (!del.classList.contains('armed')) {
      del.classList.add('armed');
      del.textContent = 'Really delete?';
      setTimeout(() => { del.classList.remove('armed'); del.textContent = 'Delete'; }, 4000);
      return;
    }
    try {
      await api('DELETE', '/plants/' + plant.id);
      say('Deleted plant ' + plant.id + ' (' + plant.name + ').');
      await show(page);
    } catch (e) {
      say(e.message, true);
    }
  }

  function filter(tag) {
    $('filter').elements.tag.value = tag;
    back = [];
    show(listing(tag));
  }

  async function add(event) {
    event.preventDefault();
    const form = event.target.elements;
    const id = form.id.value.trim();
    if (!/^-?\d+$/.test(id)) {
      say('The id must be a whole number.', true);
      return;
    }
    try {
      await api('POST', '/plants', plantBody(id, form.name.value, form.tag.value.trim()));
      say('Added plant ' + id + '.');
      event.target.reset();
      await show(page);
    } catch (e) {
      say(e.message, true);
    }
  }

  // Follows the change feed until signed out: reconnects after a cut (the
  // server stopped or dropped a slow reader), resuming with Last-Event-ID.
  async function follow() {
    const control = new AbortController();
    feed = control;
    while (feed === control) {
      try {
        const headers = { Authorization: 'Bearer ' + token };
        if (lastId) headers['Last-Event-ID'] = lastId;
        const res = await fetch('/plants/changes', { headers, cache: 'no-store', signal: control.signal });
        if (res.status === 401) return signOut();
        if (res.ok) await events(res.body);
      } catch (e) { /* cut short, or aborted */ }
      if (feed === control) await new Promise((ok) => setTimeout(ok, 2000));
    }
  }

  // Reads Server-Sent Events: every event (a change, or a reset) refreshes.
  async function events(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let message = {};
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      buffer += r.value;
      let end;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line === '') {
          if (message.id !== undefined) lastId = message.id;
          if (message.event !== undefined) changed();
          message = {};
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          message[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
        }
      }
    }
  }

  function changed() {
    if (refresh) return;
    refresh = setTimeout(() => {
      refresh = null;
      stale = document.querySelector('#list li.edit') !== null;
      if (!stale) show(page, true);
    }, 100);
  }

  function signIn() {
    $('login').hidden = true;
    $('hint').hidden = true;
    $('session').hidden = false;
    $('app').hidden = false;
    back = [];
    show(listing(''));
    follow();
  }

  function signOut() {
    if (feed) feed.abort();
    feed = null;
    lastId = '';
    token = '';
    sessionStorage.removeItem(KEY);
    $('login').hidden = false;
    $('hint').hidden = false;
    $('session').hidden = true;
    $('app').hidden = true;
    $('list').replaceChildren();
  }

  $('login').addEventListener('submit', (event) => {
    event.preventDefault();
    token = $('token').value.trim();
    $('token').value = '';
    sessionStorage.setItem(KEY, token);
    say('');
    signIn();
  });
  $('forget').addEventListener('click', () => { signOut(); say('Token forgotten.'); });
  $('add').addEventListener('submit', add);
  $('filter').addEventListener('submit', (event) => {
    event.preventDefault();
    filter($('filter').elements.tag.value.trim());
  });
  $('all').addEventListener('click', () => filter(''));
  $('prev').addEventListener('click', async () => {
    const url = back.pop();
    if (!(await show(url))) back.push(url);
  });
  $('next').addEventListener('click', async () => {
    back.push(page);
    if (!(await show(next))) back.pop();
  });
  if (token) signIn();
})();
