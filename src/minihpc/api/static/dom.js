// minihpc status page: DOM builders. Server text always goes in via textContent / Text nodes
// (el() appends strings as Text nodes), never innerHTML. Needs format.js.
'use strict';

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

function summaryStats(s) {
  const step = s.step == null ? '-' : `${s.step}${s.total != null ? ` / ${s.total}` : ''}`;
  return el('dl', { class: 'stats' },
    el('dt', {}, 'step'), el('dd', { 'data-field': 'step' }, step),
    el('dt', {}, 'loss'), el('dd', { 'data-field': 'loss' }, fmtLoss(s.loss)),
    el('dt', {}, 'samples/s'), el('dd', { 'data-field': 'samples_per_second' }, fmtNum(s.samples_per_second)),
    el('dt', {}, 'ETA'), el('dd', { 'data-field': 'eta' }, fmtEta(s.eta_seconds)));
}

function incidentItem(i) {
  return el('li', { 'data-kind': i.kind },
    el('time', { datetime: new Date(i.at * 1000).toISOString() }, fmtClock(i.at)), ' ',
    el('span', { class: 'kind' }, i.kind), ' ',
    i.node ? el('span', { class: 'node' }, i.node) : '', ' ',
    i.job != null ? jobLink(i.job, `job ${i.job}`) : '');
}
