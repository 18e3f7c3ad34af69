'use strict';
// The plantstore page: a token kept for this tab, then the API with fetch.
// Plant ids are int64: they are kept as decimal text, never as a Number
// (which is exact only to 2^53), both when read and when sent. The change
// feed keeps the listing current: any change, from this tab or elsewhere,
// refreshes it (one refresh for a burst; none while a plant is edited).
// The listing is one query (tag, search, sort; with the total), which Link
// and the refresh keep. A feed ticket's scope says whether the token may
// change plants: a read token's page has no edit controls at all.
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY = 'plantstore.token';
  const LIMIT = 20;
  let token = sessionStorage.getItem(KEY) || '';
  let page = '';    // the listing shown
  let back = [];    // the listings before it
  let next = null;  // the listing after it (from Link)
  let drawn = '';   // what the listing shown was drawn from
  let want = '';    // the listing last asked for
  const query = { tag: '', q: '', sort: 'id' };
  let feed = null;  // the change feed's EventSource
  let lastId = '';  // the feed's last event id, to resume from
  let scope = '';   // the token's, from its ticket: 'read' or 'write'
  let signins = 0;  // which sign-in a ticket is for
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

  // Shows the first page of the query with `change` made to it.
  function ask(change) {
    Object.assign(query, change);
    const p = new URLSearchParams({ limit: LIMIT, sort: query.sort, count: true });
    if (query.tag) p.set('tag', query.tag);
    if (query.q) p.set('q', query.q);
    back = [];
    return show('/plants?' + p);
  }

  // Shows the listing at url; false if it could not. A quiet one (a
  // refresh after changes) draws only a listing that differs, so one that
  // finds nothing new leaves the rows, and what the user does in them, alone.
  async function show(url, quiet) {
    if (!quiet) want = url;
    try {
      const res = await api('GET', url);
      const link = /<([^>]*)>\s*;\s*rel="?next"?/.exec(res.headers.get('Link') || '');
      const total = res.headers.get('X-Total-Count');
      const text = await res.text();
      // The user moved on meanwhile: that listing is no longer asked for.
      if (url !== want) return true;
      const plants = records(text);
      page = url;
      next = link ? link[1] : null;
      const from = [url, next, back.length, total, text].join('\n');
      if (!quiet || from !== drawn) render(plants, +total);
      drawn = from;
      return true;
    } catch (e) {
      if (url === want) want = page;
      say(e.message, true);
      return false;
    }
  }

  function render(plants, total) {
    $('list').replaceChildren(...plants.map(row));
    let what = query.tag ? ' tagged \u201c' + query.tag + '\u201d' : '';
    if (query.q) what += ' matching \u201c' + query.q + '\u201d';
    $('shown').textContent = total ? total + (total > 1 ? ' plants' : ' plant') + what : 'No plants' + what + '.';
    for (const b of document.querySelectorAll('th button')) {
      const by = query.sort.endsWith(b.value) && (query.sort[0] === '-' ? 'descending' : 'ascending');
      if (by) b.parentNode.setAttribute('aria-sort', by);
      else b.parentNode.removeAttribute('aria-sort');
    }
    $('prev').disabled = back.length === 0;
    $('next').disabled = !next;
    $('pageno').textContent = 'Page ' + (back.length + 1);
  }

  function row(plant) {
    const tr = el('tr');
    tr.dataset.id = plant.id;
    const name = el('td', 'name', plant.name);
    if (plant.tag !== undefined) {
      name.append(button(plant.tag, 'tag', () => ask({ tag: plant.tag })));
    }
    const del = button('Delete', 'danger', () => remove(plant, del));
    const acts = el('td', 'acts');
    if (scope === 'write') acts.append(button('Edit', 'quiet', () => edit(tr, plant)), del);
    tr.append(el('td', 'id', '#' + plant.id), name, acts);
    return tr;
  }

  function edit(tr, plant) {
    const name = el('input');
    name.value = plant.name;
    name.setAttribute('aria-label', 'Name');
    const tag = el('input');
    tag.value = plant.tag || '';
    tag.placeholder = 'no tag';
    tag.setAttribute('aria-label', 'Tag');
    const acts = el('span');
    acts.append(el('button', '', 'Save'), button('Cancel', 'quiet', () => {
      tr.replaceWith(row(plant));
      if (stale) changed();
    }));
    const form = el('form');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      save(plant.id, name.value, tag.value);
    });
    form.append(el('span', 'id', '#' + plant.id), name, tag, acts);
    const td = el('td');
    td.colSpan = 3;
    td.append(form);
    tr.className = 'edit';
    tr.replaceChildren(td);
    name.focus();
  }

  // Makes a change, says `done` (or the server's refusal) and shows the
  // listing again; whether it was made.
  async function change(method, url, body, done) {
    try {
      await api(method, url, body);
      say(done);
      await show(page);
      return true;
    } catch (e) {
      say(e.message, true);
      return false;
    }
  }

  function save(id, name, tag) {
    change('PUT', '/plants/' + id, plantBody(null, name, tag.trim()), 'Saved plant ' + id + '.');
  }

  // Two clicks: the first arms the button, the second deletes.
  function remove(plant, del) {
    if (!del.classList.contains('armed')) {
      del.classList.add('armed');
      del.textContent = 'Really delete?';
      setTimeout(() => { del.classList.remove('armed'); del.textContent = 'Delete'; }, 4000);
      return;
    }
    change('DELETE', '/plants/' + plant.id, undefined, 'Deleted plant ' + plant.id + ' (' + plant.name + ').');
  }

  async function add(event) {
    event.preventDefault();
    const form = event.target.elements;
    const id = form.id.value.trim();
    if (!/^-?\d+$/.test(id)) {
      say('The id must be a whole number.', true);
      return;
    }
    const body = plantBody(id, form.name.value, form.tag.value.trim());
    if (await change('POST', '/plants', body, 'Added plant ' + id + '.')) event.target.reset();
  }

  // Follows the change feed with a ticket, as EventSource sends no
  // header. EventSource reconnects by itself (resuming with Last-Event-ID)
  // while its ticket is valid; once it gives up (a 401 after the ticket
  // expired or the server restarted) a new ticket and a new EventSource
  // resume from the last event seen. With no event seen yet there is
  // nothing to resume from, so an opened stream refreshes the listing.
  async function follow(n) {
    if (n !== signins) return;
    let ticket;
    try {
      ticket = await (await api('POST', '/plants/changes/tickets')).json();
    } catch (e) {
      // Tried again, unless this signed out (a 401) or another sign-in came.
      if (n === signins) setTimeout(() => follow(n), 3000);
      else if (token) return;
      return say(e.message, true);
    }
    if (n !== signins) return;
    if (ticket.scope !== scope) {
      const first = !scope;
      scope = ticket.scope;
      $('add').hidden = scope !== 'write';
      signedIn(true);
      drawn = '';
      if (first) ask({});
      else show(page, true);
    }
    let url = '/plants/changes?ticket=' + encodeURIComponent(ticket.ticket);
    if (lastId) url += '&lastEventId=' + encodeURIComponent(lastId);
    const source = new EventSource(url);
    feed = source;
    source.onopen = () => lastId || changed();
    for (const type of ['created', 'replaced', 'deleted', 'reset']) {
      source.addEventListener(type, (event) => {
        lastId = event.lastEventId;
        changed();
      });
    }
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED && feed === source) setTimeout(() => follow(n), 500);
    };
  }

  function changed() {
    if (refresh) return;
    refresh = setTimeout(() => {
      refresh = null;
      stale = document.querySelector('#list .edit') !== null;
      if (!stale && page) show(page, true);
    }, 100);
  }

  // The token form, or the plants.
  function signedIn(yes) {
    for (const id of ['login', 'hint']) $(id).hidden = yes;
    for (const id of ['session', 'app']) $(id).hidden = !yes;
  }

  function signIn() {
    follow(++signins);
  }

  function signOut() {
    if (feed) feed.close();
    feed = null;
    signins++;
    scope = '';
    lastId = '';
    token = '';
    sessionStorage.removeItem(KEY);
    signedIn(false);
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
  // A search starts once typing pauses, or at once with Enter.
  let typing = null;
  const search = () => { clearTimeout(typing); ask({ q: $('q').value }); };
  $('q').addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(search, 250); });
  $('find').addEventListener('submit', (event) => { event.preventDefault(); search(); });
  $('all').addEventListener('click', () => { $('q').value = ''; ask({ tag: '', q: '' }); });
  // A header sorts by its column; again, the other way.
  for (const b of document.querySelectorAll('th button')) {
    b.addEventListener('click', () => ask({ sort: query.sort === b.value ? '-' + b.value : b.value }));
  }
  $('prev').addEventListener('click', async () => {
    const url = back.pop();
    if (!(await show(url))) back.push(url);
  });
  $('next').addEventListener('click', async () => {
    back.push(page);
    if (!(await show(next))) back.pop();
  });
  // With --tls-auto: the local CA's fingerprint, to compare with the log.
  fetch('/healthz', { method: 'HEAD' }).then((r) => {
    const print = r.headers.get('X-CA-Fingerprint');
    if (print) { $('cafp').textContent = print; $('ca').hidden = false; }
  }, () => {});
  if (token) signIn();
})();
