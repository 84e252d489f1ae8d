// minihpc status page: plain DOM, no framework. Server text always goes in via
// textContent / Text nodes (el() appends strings as Text nodes), never innerHTML.
'use strict';

const TOKEN_KEY = 'minihpc.token';
const REFRESH_MS = 3000;
const DEBOUNCE_MS = 300;
const LOG_MAX_LINES = 5000;
const ACTIVE = new Set(['PD', 'R']);

// ---------- pure format helpers ----------
const pad2 = (n) => String(n).padStart(2, '0');
const fmtLimit = (s) => (s == null ? 'UNLIMITED' : fmtElapsed(s));  // time limit, like Slurm
const fmtNum = (x, digits = 1) => (x == null || !isFinite(x) ? '-' : Number(x).toFixed(digits));

function fmtElapsed(seconds) {  // squeue TIME: M:SS, H:MM:SS, D-HH:MM:SS
  const t = Math.max(0, Math.floor(Number(seconds) || 0));
  const d = Math.floor(t / 86400), h = Math.floor((t % 86400) / 3600);
  const m = Math.floor((t % 3600) / 60), s = t % 60;
  if (d) return `${d}-${pad2(h)}:${pad2(m)}:${pad2(s)}`;
  return h ? `${h}:${pad2(m)}:${pad2(s)}` : `${m}:${pad2(s)}`;
}

function fmtBytes(bytes) {  // binary units: 8 GiB, 15.5 GiB, 512 MiB
  if (bytes == null || !isFinite(bytes)) return '-';
  for (const [unit, size] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]]) {
    const v = bytes / size;
    if (v >= 1) return `${v >= 100 ? Math.round(v) : Number(v.toFixed(1))} ${unit}`;
  }
  return `${bytes} B`;
}

function fmtEta(seconds) {  // 45s, 3m 05s, 2h 07m, 1d 04h
  if (seconds == null || !isFinite(seconds)) return '-';
  const t = Math.max(0, Math.round(seconds));
  if (t < 60) return `${t}s`;
  if (t < 3600) return `${Math.floor(t / 60)}m ${pad2(t % 60)}s`;
  if (t < 86400) return `${Math.floor(t / 3600)}h ${pad2(Math.floor((t % 3600) / 60))}m`;
  return `${Math.floor(t / 86400)}d ${pad2(Math.floor((t % 86400) / 3600))}h`;
}

function fmtAge(seconds) {  // heartbeat age: 0.4s ago, 2m 05s ago, 3h ago
  if (seconds == null || !isFinite(seconds)) return '-';
  const s = Math.max(0, seconds);
  if (s < 60) return `${s.toFixed(1)}s ago`;
  return s < 3600 ? `${Math.floor(s / 60)}m ${pad2(Math.floor(s % 60))}s ago` : `${Math.floor(s / 3600)}h ago`;
}

function fmtClock(unix) {  // unix seconds to local HH:MM:SS
  if (unix == null) return '-';
  const d = new Date(unix * 1000);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

function fmtDateTime(unix) {  // local YYYY-MM-DD HH:MM:SS
  if (unix == null) return '-';
  const d = new Date(unix * 1000);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${fmtClock(unix)}`;
}

function fmtLoss(x) {
  if (x == null || !isFinite(x)) return '-';
  return Math.abs(x) > 0 && Math.abs(x) < 1e-3 ? x.toExponential(2) : String(Number(x.toPrecision(4)));
}

function percentOf(sum) {  // summary percent, else step/total, else null
  const p = sum.percent ?? (sum.step != null && sum.total ? (100 * sum.step) / sum.total : null);
  return p == null ? null : Math.max(0, Math.min(100, p));
}

function sparkPoints(history, w, h, pad = 2) {  // SVG polyline points for [[step, loss], ...] in w x h
  const pts = (history || []).filter((p) => p && isFinite(p[0]) && isFinite(p[1]));
  if (pts.length < 2) return '';
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = (x) => (x1 > x0 ? pad + ((x - x0) / (x1 - x0)) * (w - 2 * pad) : w / 2);
  const sy = (y) => (y1 > y0 ? pad + (1 - (y - y0) / (y1 - y0)) * (h - 2 * pad) : h / 2);
  return pts.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ');
}

// split an args string on whitespace, honouring '...' and "..." quotes
const splitArgs = (text) => [...(text || '').matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);

// incremental text/event-stream parser; st.lastId persists across reconnects, st.done stops it
function sseParser(st, onEvent) {
  let buf = '', type = '', data = [];
  function line(l) {
    if (l === '') {
      if (data.length) onEvent({ type: type || 'message', data: data.join('\n'), id: st.lastId });
      type = ''; data = [];
      return;
    }
    if (l[0] === ':') return;
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id' && !value.includes('\0')) st.lastId = value;
  }
  return function feed(chunk) {
    let text = buf + chunk, hold = '';
    if (text.endsWith('\r')) { hold = '\r'; text = text.slice(0, -1); }  // maybe half of \r\n
    const lines = text.split(/\r\n|\r|\n/);
    buf = lines.pop() + hold;
    for (const l of lines) { line(l); if (st.done) return; }
  };
}

// ---------- DOM helpers ----------
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) if (kid != null) e.append(kid);  // strings become Text nodes
  return e;
}

function svg(tag, attrs = {}, ...kids) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) if (v != null) e.setAttribute(k, String(v));
  for (const kid of kids) if (kid != null) e.append(kid);
  return e;
}

const jobLink = (id, text) => el('a', { href: `#/jobs/${Number(id)}` }, text ?? String(id));

function progressBar(pct) {
  const bar = el('div', { class: 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100 });
  const fill = el('div', { class: 'fill' });
  if (pct != null) { bar.setAttribute('aria-valuenow', pct.toFixed(1)); fill.style.width = `${pct}%`; }
  bar.append(fill, el('span', { class: 'bar-label' }, pct == null ? '-' : `${pct.toFixed(1)}%`));
  return bar;
}

function sparkline(history, w, h) {
  const points = sparkPoints(history, w, h);
  const s = svg('svg', { class: 'spark', viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: 'img',
    'aria-label': 'loss' });
  if (points) s.append(svg('polyline', { points, fill: 'none' }));
  return s;
}

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

const parseData = (ev) => { try { return JSON.parse(ev.data); } catch { return {}; } };

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

function renderQueue(data) {
  $('queue-total').textContent = data.total > data.jobs.length ? `(${data.jobs.length} of ${data.total})` : '';
  const rows = data.jobs.map((j) => {
    const count = j.nodes && j.nodes.length ? j.nodes.length : j.nodes_requested;
    const where = j.nodes && j.nodes.length ? j.nodes.join(',') : `(${j.reason ?? 'None'})`;
    const action = ACTIVE.has(j.state_code)
      ? el('button', { type: 'button', class: 'small danger', onclick: () => cancelJob(j) }, 'Cancel') : '';
    return el('tr', { 'data-job-id': j.id },
      el('td', {}, jobLink(j.id)), el('td', { class: 'name' }, j.name), el('td', {}, j.user),
      el('td', { class: 'state', 'data-state': j.state_code, title: j.state }, j.state_code),
      el('td', { class: 'num' }, fmtElapsed(j.elapsed)),
      el('td', { class: 'num' }, String(count ?? '')), el('td', {}, where), el('td', {}, action));
  });
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No jobs.')));
  $('queue').tBodies[0].replaceChildren(...rows);
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

function summaryStats(s) {
  const step = s.step == null ? '-' : `${s.step}${s.total != null ? ` / ${s.total}` : ''}`;
  return el('dl', { class: 'stats' },
    el('dt', {}, 'step'), el('dd', { 'data-field': 'step' }, step),
    el('dt', {}, 'loss'), el('dd', { 'data-field': 'loss' }, fmtLoss(s.loss)),
    el('dt', {}, 'samples/s'), el('dd', { 'data-field': 'samples_per_second' }, fmtNum(s.samples_per_second)),
    el('dt', {}, 'ETA'), el('dd', { 'data-field': 'eta' }, fmtEta(s.eta_seconds)));
}

function renderRunning(data) {
  const cards = data.summaries.map((s) => el('article', { class: 'card', 'data-job-id': s.id },
    el('h3', {}, jobLink(s.id, s.name), ' ', el('span', { class: 'muted' }, `#${s.id} · ${s.user}`)),
    progressBar(percentOf(s)), summaryStats(s), sparkline(s.loss_history, 240, 48)));
  $('running').replaceChildren(...(cards.length ? cards : [el('p', { class: 'muted' }, 'No running jobs.')]));
}

function incidentItem(i) {
  return el('li', { 'data-kind': i.kind },
    el('time', { datetime: new Date(i.at * 1000).toISOString() }, fmtClock(i.at)), ' ',
    el('span', { class: 'kind' }, i.kind), ' ',
    i.node ? el('span', { class: 'node' }, i.node) : '', ' ',
    i.job != null ? jobLink(i.job, `job ${i.job}`) : '');
}

function renderIncidents(data) {
  const items = data.incidents.map(incidentItem);
  $('incidents').replaceChildren(...(items.length ? items : [el('li', { class: 'muted' }, 'No incidents.')]));
}

const loaders = {
  queue: () => fresh('queue', () => api('/jobs?limit=50'), renderQueue),
  running: () => fresh('running', () => api('/jobs/summaries'), renderRunning),
  nodes: () => fresh('nodes', () => api('/nodes'), renderNodes),
  incidents: () => fresh('incidents', () => api('/incidents?limit=20'), renderIncidents),
  health: loadHealth,
  job: () => (ui.jobId != null ? loadJob(ui.jobId) : null),
};
const OVERVIEW_PARTS = ['queue', 'running', 'nodes', 'incidents', 'health'];

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
    markDirty('queue', 'running');
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
  if (!confirm(`Cancel job ${j.id} (${j.name})?`)) return;
  act(() => api(`/jobs/${Number(j.id)}/cancel`, { method: 'POST' }), () => markDirty('queue', 'running', 'job'));
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
    markDirty('queue', 'running');
  } catch (e) {
    if (e.status !== 401) fail(e.message);
  } finally {
    $('submit-button').disabled = false;
  }
}

// ---------- job page ----------
function setJobState(code, state) {
  const st = $('job-state');
  st.textContent = code || ''; st.dataset.state = code || ''; st.title = state || '';
  $('job-state-name').textContent = state || '';
  $('job-cancel').hidden = !ACTIVE.has(code);
}

function renderJob(j) {
  ui.job = j;
  $('job-title').textContent = `Job ${j.id}: ${j.name}`;
  setJobState(j.state_code, j.state);
  const fields = [
    ['state', j.state], ['exit', j.exit], ['reason', j.reason ?? 'None'], ['user', j.user],
    ['priority', j.priority], ['nodes', j.nodes && j.nodes.length ? j.nodes.join(',') : '-'],
    ['requested', `${j.nodes_requested} node(s) × ${j.tasks_per_node} task(s)`],
    ['attempts', String(j.attempts)], ['requeues', String(j.requeues)],
    ['submitted', fmtDateTime(j.submitted_at)], ['started', fmtDateTime(j.started_at)],
    ['ended', fmtDateTime(j.ended_at)], ['elapsed', fmtElapsed(j.elapsed)], ['time limit', fmtLimit(j.time_limit)],
    ['args', (j.args || []).join(' ') || '-'], ['dependency', (j.dependency || []).join(',') || '-'],
    ['script', j.script_source || '-'], ['workdir', j.workdir || '-'],
  ];
  $('job-fields').replaceChildren(...fields.map(([k, v]) =>
    el('div', {}, el('dt', {}, k), el('dd', { 'data-field': k.replace(' ', '_') }, v == null ? '-' : String(v)))));
}

function renderTimeline(s) {
  const marks = Object.entries(s.attempt_marks || {})
    .map(([n, m]) => ({ n: Number(n), first: m.first, last: m.last })).filter((m) => m.first && m.last)
    .sort((a, b) => a.n - b.n);
  const incidents = s.incidents || [];
  if (!marks.length) { $('timeline').replaceChildren(el('p', { class: 'muted' }, 'No progress marks yet.')); return; }
  const times = [...marks.flatMap((m) => [m.first.at, m.last.at]), ...incidents.map((i) => i.at)];
  const t0 = Math.min(...times), t1 = Math.max(...times), span = t1 - t0 || 1;
  const W = 600, L = 70, R = 10, rowH = 22, top = 16, H = top + marks.length * rowH + 22;
  const x = (t) => L + ((t - t0) / span) * (W - L - R);
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'timeline-svg', role: 'img', 'aria-label': 'attempts timeline' });
  marks.forEach((m, k) => {
    const y = top + k * rowH;
    g.append(svg('text', { x: 4, y: y + 14, class: 'tl-label' }, `attempt ${m.n}`));
    g.append(svg('rect', { x: x(m.first.at), y: y + 3, width: Math.max(3, x(m.last.at) - x(m.first.at)),
      height: rowH - 8, class: 'tl-bar', 'data-attempt': m.n }, svg('title', {}, `attempt ${m.n}: steps ` +
      `${m.first.step}–${m.last.step}, ${fmtClock(m.first.at)}–${fmtClock(m.last.at)}`)));
  });
  for (const i of incidents) {
    g.append(svg('line', { x1: x(i.at), x2: x(i.at), y1: top - 6, y2: H - 20, class: 'tl-incident',
      'data-kind': i.kind },
      svg('title', {}, `${fmtClock(i.at)} ${i.kind}${i.node ? ` ${i.node}` : ''}`)));
  }
  g.append(svg('text', { x: L, y: H - 4, class: 'tl-axis' }, fmtClock(t0)),
    svg('text', { x: W - R, y: H - 4, class: 'tl-axis', 'text-anchor': 'end' }, fmtClock(t1)));
  $('timeline').replaceChildren(g);
}

function renderJobSummary(s) {
  const has = s && (s.step != null || (s.loss_history || []).length);
  $('job-summary').replaceChildren(...(has
    ? [progressBar(percentOf(s)), summaryStats(s), sparkline(s.loss_history, 600, 120)]
    : [el('p', { class: 'muted' }, 'No progress reported.')]));
  if (s) renderTimeline(s); else $('timeline').replaceChildren();
  $('job-incidents').replaceChildren(...((s && s.incidents) || []).map(incidentItem));
}

async function loadJob(id) {
  const n = (ui.seq.job = (ui.seq.job || 0) + 1);
  try {
    const optional = (path) => api(path).catch((e) => { if (e.status === 401) throw e; return null; });
    const [job, summary, report] = await Promise.all([api(`/jobs/${id}`), optional(`/jobs/${id}/summary`),
      optional(`/jobs/${id}/report`)]);
    if (n !== ui.seq.job || ui.jobId !== id) return job;
    $('job-error').hidden = true;
    renderJob(job);
    renderJobSummary(summary);
    renderReportCharts($('job-charts'), report);
    if (ui.errorFromLoad) showError('');
    return job;
  } catch (e) {
    if (e.status === 404 && ui.jobId === id) { $('job-error').textContent = e.message; $('job-error').hidden = false; }
    else if (e.status !== 401) showError(e.message, true);
    return null;
  }
}

function appendLog(text) {
  ui.logBuf.push(text);
  if (!ui.logTimer) ui.logTimer = setTimeout(flushLog, 16);
}

function flushLog() {
  ui.logTimer = null;
  const pre = $('log');
  const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
  ui.logLines += ui.logBuf.length;
  pre.append(ui.logBuf.join(''));
  ui.logBuf = [];
  if (ui.logLines > LOG_MAX_LINES * 1.2) {  // keep the newest lines only, trimmed in batches
    pre.textContent = pre.textContent.split('\n').slice(-LOG_MAX_LINES - 1).join('\n');
    ui.logLines = LOG_MAX_LINES;
  }
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

function onLogEvent(ev) {
  const d = parseData(ev);
  if (ev.type === 'line') {
    const j = ui.job;
    const multi = j && ((j.nodes || []).length > 1 || j.nodes_requested > 1);
    appendLog(`${multi && d.node ? `${d.node}: ` : ''}${d.line ?? ''}\n`);
  } else if (ev.type === 'state' || ev.type === 'end') {
    setJobState(d.state_code, d.state);
    loadJob(ui.jobId);  // refresh fields (attempts, nodes, exit, times)
    if (ev.type === 'end') {
      if (ui.logTimer) { clearTimeout(ui.logTimer); flushLog(); }  // every line is shown before the end state
      $('log-state').textContent = `${d.state} (exit ${d.exit ?? '-'})`;
      $('log-state').dataset.state = d.state_code || '';
      return true;  // the stream is over: do not reconnect
    }
  }
  return false;
}

async function showJob(id) {
  ui.view = 'job'; ui.jobId = id; ui.job = null;
  $('overview-view').hidden = true; $('job-view').hidden = false;
  $('job-title').textContent = `Job ${id}`;
  setJobState('', '');
  for (const k of ['log-state', 'log', 'job-fields', 'job-summary', 'timeline', 'job-incidents', 'job-charts']) $(k).replaceChildren();
  $('log-state').dataset.state = ''; $('job-error').hidden = true;
  ui.logBuf = []; ui.logLines = 0;
  await loadJob(id);
  // no stream for a missing job (404 shown), or if the user moved on meanwhile
  if (ui.jobId !== id || ui.view !== 'job' || !token() || !$('job-error').hidden) return;
  ui.log = sse(`/jobs/${id}/logs/stream`,
    { onEvent: onLogEvent, onFatal: (msg) => { $('log-state').textContent = msg; } });
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
if (typeof module !== 'undefined') {
  module.exports = { fmtElapsed, fmtLimit, fmtBytes, fmtEta, fmtAge, fmtClock, fmtLoss, percentOf, sparkPoints,
    splitArgs, sseParser };
}
