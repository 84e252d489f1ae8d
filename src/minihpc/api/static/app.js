// minihpc status page: plain DOM, no framework. State, the API and SSE transport, the overview
// (queue, history, running, nodes, incidents, submit, actions), routing and start-up. Loaded last, after
// charts.js, format.js, dom.js and jobpage.js. Server text always goes in via textContent / Text
// nodes (el() appends strings as Text nodes), never innerHTML.
'use strict';

const TOKEN_KEY = 'minihpc.token';
const REFRESH_MS = 3000;
const DEBOUNCE_MS = 300;
const ACTIVE = new Set(['PD', 'R']);

// ---------- state ----------
// view: 'overview' | 'job'; seq: per-loader request counters so stale answers are dropped
const ui = { events: null, log: null, timer: null, view: null, jobId: null, job: null, dirty: new Set(),
  flushTimer: null, lastFlush: 0, seq: {}, errorFromLoad: false, logBuf: [], logLines: 0, logTimer: null };

const token = () => localStorage.getItem(TOKEN_KEY) || '';
const sleep = (ms, signal) => new Promise((res) => {
  const t = setTimeout(res, ms);
  signal?.addEventListener('abort', () => { clearTimeout(t); res(); }, { once: true });
});

function showError(msg, fromLoad = false) {
  $('error').textContent = msg || '';
  $('error').hidden = !msg;
  ui.errorFromLoad = fromLoad && !!msg;
}

async function errorText(res) {
  let body = {};
  try { body = await res.json(); } catch { /* not JSON */ }
  return body.error || (typeof body.detail === 'string' && body.detail) || `${res.status} ${res.statusText}`;
}

// ---------- API ----------
class ApiError extends Error { constructor(msg, status) { super(msg); this.status = status; } }

async function api(path, { method = 'GET', body } = {}) {
  const headers = { Authorization: `Bearer ${token()}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store' });
  } catch (e) { throw new ApiError(`cannot reach the API: ${e.message}`, 0); }
  if (res.status === 401) {
    const msg = await errorText(res);
    signOut(msg);
    throw new ApiError(msg, 401);
  }
  if (!res.ok) throw new ApiError(await errorText(res), res.status);
  return res.status === 204 ? null : res.json();
}

/** Read an SSE endpoint with fetch (so it can carry the token); reconnects with Last-Event-ID.
 *  onEvent returning true ends the stream for good. */
function sse(path, { onEvent, onOpen, onDown, onFatal }) {
  const ctl = new AbortController();
  const st = { lastId: null, done: false };
  (async () => {
    while (!ctl.signal.aborted && !st.done) {
      try {
        const headers = { Authorization: `Bearer ${token()}`, Accept: 'text/event-stream' };
        if (st.lastId != null) headers['Last-Event-ID'] = st.lastId;
        const res = await fetch(path, { headers, signal: ctl.signal, cache: 'no-store' });
        if (res.status === 401) { signOut(await errorText(res)); return; }
        if (!res.ok) {
          const msg = await errorText(res);
          if (res.status >= 400 && res.status < 500 && res.status !== 429) { onFatal?.(msg); return; }
          throw new Error(msg);
        }
        onOpen?.();
        const reader = res.body.getReader(), dec = new TextDecoder();
        const feed = sseParser(st, (ev) => { if (onEvent(ev) === true) st.done = true; });
        while (!st.done) {
          const { value, done } = await reader.read();
          if (done) break;
          feed(dec.decode(value, { stream: true }));
        }
        if (st.done) reader.cancel().catch(() => {});
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      if (st.done || ctl.signal.aborted) return;
      onDown?.();
      await sleep(1000 + Math.random() * 1000, ctl.signal);
    }
  })();
  return ctl;
}

// ---------- header ----------
async function loadHealth() {
  let h;
  try { h = await (await fetch('/health', { cache: 'no-store' })).json(); } catch { h = { error: 'API unreachable' }; }
  const set = (id, ok, text) => { const e = $(id); e.textContent = text; e.dataset.ok = ok ? 'true' : 'false'; };
  set('health-redis', h.redis, h.redis ? 'Redis ok' : `Redis down${h.error ? `: ${h.error}` : ''}`);
  set('health-master', h.master, h.master ? 'master up' : 'master down');
  const up = h.nodes_up ?? 0, all = h.nodes ?? 0;
  set('health-nodes', all > 0 && up === all, `nodes up ${up}/${all}`);
}

async function loadWhoami() {
  const me = await api('/whoami');
  $('user').textContent = me.admin ? `${me.user} (admin)` : me.user;
  $('user').dataset.admin = me.admin ? 'true' : 'false';
}

const setLive = (on) => { $('live').dataset.live = on ? 'on' : 'off'; };

// ---------- overview ----------
/** Run loader only if it is still the newest request of its kind when the answer comes. */
async function fresh(key, fetcher, render) {
  const n = (ui.seq[key] = (ui.seq[key] || 0) + 1);
  try {
    const data = await fetcher();
    if (n === ui.seq[key]) render(data);
    if (ui.errorFromLoad) showError('');
  } catch (e) {
    if (e.status !== 401) showError(e.message, true);
  }
}

const nodeCount = (j) => String((j.nodes && j.nodes.length ? j.nodes.length : j.node_range ?? j.nodes_requested) ?? '');
const whereOf = (j) => (j.nodes && j.nodes.length ? j.nodes.join(',') : `(${j.reason ?? 'None'})`);

/** A row of /queue or /history: one job, or an array's tasks as one (row_id 2017_[3-1000%4]). */
function rowCells(r) {
  return [el('td', {}, jobLink(r.id, r.row_id)), el('td', { class: 'name' }, r.name), el('td', {}, r.user),
    el('td', { class: 'state', 'data-state': r.state_code, title: r.state }, r.state_code)];
}
const rowAttrs = (r) => ({ 'data-job-id': r.id, 'data-row-id': r.row_id, 'data-count': r.count });

// squeue: pending and running only; an array's pending tasks that wait alike are one row
function renderQueue(data) {
  $('queue-total').textContent = panelTitle(data);
  const rows = data.rows.map((r) => {
    const action = ACTIVE.has(r.state_code) ? el('button', { type: 'button', class: 'small danger',
      onclick: () => (r.count > 1 ? cancelRow(r) : cancelJob(r)) }, 'Cancel') : '';
    return el('tr', rowAttrs(r), ...rowCells(r), el('td', { class: 'num' }, fmtElapsed(r.elapsed)),
      el('td', { class: 'num' }, nodeCount(r)), el('td', {}, whereOf(r)), el('td', {}, action));
  });
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No pending or running jobs.')));
  $('queue').tBodies[0].replaceChildren(...rows);
}

// ended jobs, newest first; an array's tasks that never ran and ended alike are one row
function renderHistory(data) {
  $('history-total').textContent = panelTitle(data);
  const rows = data.rows.map((r) => el('tr', rowAttrs(r), ...rowCells(r), el('td', {}, r.exit ?? ''),
    el('td', { class: 'num' }, fmtElapsed(r.elapsed)), el('td', {}, fmtDateTime(r.ended_at)),
    el('td', { class: 'num' }, nodeCount(r)), el('td', {}, whereOf(r))));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 9, class: 'muted' }, 'No ended jobs.')));
  $('history').tBodies[0].replaceChildren(...rows);
}

function renderNodes(data) {
  const rows = data.nodes.map((n) => {
    const draining = n.state === 'drain' || n.state === 'down';
    const btn = el('button', { type: 'button', class: 'small', onclick: () => (draining ? resumeNode(n) : drainNode(n)) },
      draining ? 'Resume' : 'Drain');
    const state = el('td', { class: 'node-state', 'data-node-state': n.state, title: n.drain_reason || '' }, n.state);
    if (n.drain_reason) state.append(el('span', { class: 'muted' }, ` (${n.drain_reason})`));
    return el('tr', { 'data-node': n.name },
      el('td', {}, n.name), state, el('td', { class: 'num' }, String(n.cpus ?? '-')),
      el('td', { class: 'num' }, fmtBytes(n.memory_bytes)), el('td', {}, n.job != null ? jobLink(n.job) : '-'),
      el('td', { class: 'age' }, fmtAge(n.heartbeat_age)), el('td', {}, btn));
  });
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 7, class: 'muted' }, 'No nodes registered.')));
  $('nodes').tBodies[0].replaceChildren(...rows);
}

function renderRunning(data) {
  const cards = data.summaries.map((s) => el('article', { class: 'card', 'data-job-id': s.id },
    el('h3', {}, jobLink(s.id, s.name), ' ', el('span', { class: 'muted' }, `#${s.id} · ${s.user}`)),
    progressBar(percentOf(s)), summaryStats(s), sparkline(s.loss_history, 240, 48)));
  $('running').replaceChildren(...(cards.length ? cards : [el('p', { class: 'muted' }, 'No running jobs.')]));
}

function renderIncidents(data) {
  const items = data.incidents.map(incidentItem);
  $('incidents').replaceChildren(...(items.length ? items : [el('li', { class: 'muted' }, 'No incidents.')]));
}

const loaders = {
  queue: () => fresh('queue', () => api('/queue?limit=50'), renderQueue),
  history: () => fresh('history', () => api('/history?limit=50'), renderHistory),
  running: () => fresh('running', () => api('/jobs/summaries'), renderRunning),
  nodes: () => fresh('nodes', () => api('/nodes'), renderNodes),
  incidents: () => fresh('incidents', () => api('/incidents?limit=20'), renderIncidents),
  health: loadHealth,
  job: () => (ui.jobId != null ? loadJob(ui.jobId) : null),
};
const OVERVIEW_PARTS = ['queue', 'history', 'running', 'nodes', 'incidents', 'health'];

function markDirty(...parts) {
  for (const p of parts) ui.dirty.add(p);
  if (ui.flushTimer) return;
  const wait = Math.max(0, DEBOUNCE_MS - (Date.now() - ui.lastFlush));
  ui.flushTimer = setTimeout(flush, wait);
}

function flush() {
  ui.flushTimer = null;
  ui.lastFlush = Date.now();
  const visible = ui.view === 'job' ? ['job', 'health'] : OVERVIEW_PARTS;
  for (const p of visible) if (ui.dirty.has(p)) loaders[p]();
  ui.dirty.clear();
}

function onClusterEvent(ev) {
  const d = parseData(ev);
  const mine = ui.view === 'job' && ui.jobId != null;
  if (ev.type === 'job') {
    markDirty('queue', 'history', 'running');
    if (mine && Number(d.id) === ui.jobId) markDirty('job');
  } else if (ev.type === 'incident') {
    markDirty('incidents', 'nodes', 'running');
    if (mine && Number(d.job) === ui.jobId) markDirty('job');
  } else if (ev.type === 'node') {
    markDirty('nodes', 'health');
  }
}

// ---------- actions ----------
async function act(fn, after) {
  showError('');
  try { await fn(); } catch (e) { if (e.status !== 401) showError(e.message); }
  after();
}

function cancelJob(j) {
  if (!confirm(`Cancel job ${j.row_id ?? j.id} (${j.name})?`)) return;
  act(() => api(`/jobs/${Number(j.id)}/cancel`, { method: 'POST' }),
    () => markDirty('queue', 'history', 'running', 'job'));
}

function cancelRow(r) {  // the pending array tasks one queue row stands for, as scancel 2017_[3-1000]
  if (!confirm(`Cancel ${r.row_id} (${r.name}): ${r.count} jobs?`)) return;
  act(() => api('/queue/cancel', { method: 'POST', body: { jobs: r.ref } }),
    () => markDirty('queue', 'history', 'running'));
}

function drainNode(n) {
  if (!confirm(`Drain node ${n.name}? No new jobs will start on it.`)) return;
  const reason = prompt(`Reason for draining ${n.name}:`, 'maintenance');
  if (reason === null) return;
  act(() => api(`/nodes/${encodeURIComponent(n.name)}/drain`, { method: 'POST',
    body: { reason: reason.trim() || 'drained from the web page' } }), () => markDirty('nodes', 'health'));
}

function resumeNode(n) {
  if (!confirm(`Resume node ${n.name}?`)) return;
  act(() => api(`/nodes/${encodeURIComponent(n.name)}/resume`, { method: 'POST' }), () => markDirty('nodes', 'health'));
}

async function submitJob(ev) {
  ev.preventDefault();
  const out = $('submit-result');
  const fail = (msg) => out.replaceChildren(el('p', { class: 'error', id: 'submit-error' }, msg));
  const file = $('sub-file').files[0];
  const body = { script: file ? await file.text() : $('sub-script').value };
  if (!body.script.trim()) return fail('choose a script file or paste the script text');
  const name = $('sub-script-name').value.trim() || (file ? file.name : '');
  if (name) body.script_name = name;
  const int = (id) => { const v = $(id).value.trim(); return v === '' ? null : parseInt(v, 10); };
  if (int('sub-nodes') != null) body.nodes = int('sub-nodes');
  if (int('sub-tasks') != null) body.ntasks_per_node = int('sub-tasks');
  body.priority = $('sub-priority').value;
  for (const [id, key] of [['sub-time', 'time'], ['sub-job-name', 'job_name'], ['sub-dependency', 'dependency']]) {
    const v = $(id).value.trim();
    if (v) body[key] = v;
  }
  const args = splitArgs($('sub-args').value);
  if (args.length) body.args = args;
  $('submit-button').disabled = true;
  try {
    const res = await api('/jobs', { method: 'POST', body });
    const warnings = (res.warnings || []).map((w) => el('li', {}, w));
    out.replaceChildren(el('p', { class: 'ok' }, 'Submitted batch job ', el('a',
      { id: 'submit-job-id', href: `#/jobs/${Number(res.id)}`, 'data-job-id': res.id }, String(res.id))),
    warnings.length ? el('ul', { id: 'submit-warnings', class: 'warnings' }, warnings) : '');
    markDirty('queue', 'history', 'running');
  } catch (e) {
    if (e.status !== 401) fail(e.message);
  } finally {
    $('submit-button').disabled = false;
  }
}

function showOverview() {
  ui.view = 'overview'; ui.jobId = null; ui.job = null;
  $('job-view').hidden = true; $('overview-view').hidden = false;
  markDirty(...OVERVIEW_PARTS);
}

// ---------- routing, session ----------
function route() {
  if (ui.log) { ui.log.abort(); ui.log = null; }
  if (!token()) return;
  showError('');
  const m = /^#\/jobs\/(\d+)\/?$/.exec(location.hash);
  if (m) showJob(Number(m[1])); else showOverview();
  window.scrollTo(0, 0);
}

function tick() {
  if (document.hidden) return;
  if (ui.view !== 'job') markDirty(...OVERVIEW_PARTS);
  else markDirty('health', ...(!ui.job || ACTIVE.has(ui.job.state_code) ? ['job'] : []));
}

function stopStreams() {
  for (const k of ['events', 'log']) if (ui[k]) { ui[k].abort(); ui[k] = null; }
  clearInterval(ui.timer); ui.timer = null;
  setLive(false);
}

function startStreams() {
  stopStreams();
  ui.events = sse('/events', {
    onEvent: onClusterEvent,
    onOpen: () => { setLive(true); markDirty(...OVERVIEW_PARTS, 'job'); },  // catch up on missed events
    onDown: () => setLive(false),
  });
  ui.timer = setInterval(tick, REFRESH_MS);
}

async function start() {
  $('signin').hidden = true; $('app').hidden = false; $('signout').hidden = false;
  try { await loadWhoami(); } catch (e) {
    if (e.status === 401) return;
    showError(e.message, true);
  }
  startStreams();
  route();
}

function signOut(msg) {  // also the answer to any 401: back to the sign-in form with the error line
  stopStreams();
  localStorage.removeItem(TOKEN_KEY);
  ui.view = null; ui.jobId = null; ui.job = null;
  $('app').hidden = true; $('signout').hidden = true; $('signin').hidden = false;
  $('user').textContent = ''; $('token').value = '';
  $('signin-error').textContent = msg || '';
  showError('');
  $('token').focus();
}

function init() {
  $('signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!$('token').value.trim()) return;
    localStorage.setItem(TOKEN_KEY, $('token').value.trim());
    $('signin-error').textContent = '';
    start();
  });
  $('signout').addEventListener('click', (ev) => { ev.preventDefault(); signOut(''); });
  $('submit-form').addEventListener('submit', submitJob);
  $('sub-file').addEventListener('change', () => {
    if ($('sub-file').files[0]) $('sub-script-name').value = $('sub-file').files[0].name;
  });
  $('job-cancel').addEventListener('click', () => { if (ui.job) cancelJob(ui.job); });
  window.addEventListener('hashchange', route);
  window.addEventListener('pagehide', stopStreams);
  window.addEventListener('pageshow', (ev) => { if (ev.persisted && token()) { startStreams(); route(); } });
  loadHealth();
  if (token()) start(); else signOut('');
}

if (typeof document !== 'undefined') {
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init); else init();
}
