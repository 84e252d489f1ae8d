// minihpc status page: pure helpers, no DOM -- number/time formatting, the sparkline geometry,
// argument splitting and the text/event-stream parser. Loaded first; Node tests can require() it.
'use strict';

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

const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

// a job panel's title after its name, from /queue's or /history's counts:
// ": 2 rows, 1003 jobs", ": 50 of 120 rows, 1052 jobs; 248 more jobs"
function panelTitle(p) {
  const shown = p.rows.length;
  const rows = p.total_rows != null && p.total_rows > shown ? `${shown} of ${plural(p.total_rows, 'row')}`
    : plural(shown, 'row');
  const more = p.more_jobs ? `; ${plural(p.more_jobs, 'more job')}` : '';
  const partial = p.complete === false ? ' (the last row may lack older tasks)' : '';
  return `: ${rows}, ${plural(p.shown_jobs, 'job')}${more}${partial}`;
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

// the JSON payload of one SSE event, or {} when it is not JSON
const parseData = (ev) => { try { return JSON.parse(ev.data); } catch { return {}; } };

if (typeof module !== 'undefined') {
  module.exports = { fmtElapsed, fmtLimit, fmtBytes, fmtEta, fmtAge, fmtClock, fmtLoss, percentOf, sparkPoints,
    splitArgs, sseParser, panelTitle };
}
