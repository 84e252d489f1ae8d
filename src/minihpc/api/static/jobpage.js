// minihpc status page: the job page (#/jobs/<id>) -- fields, progress, attempts timeline, report
// charts and the live log stream. Needs charts.js, format.js, dom.js; uses ui, api(), sse(),
// token(), showError() and ACTIVE from app.js (loaded last) only when called, never at load time.
'use strict';

const LOG_MAX_LINES = 5000;

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
    ['requested', `${j.node_range ?? j.nodes_requested} node(s) × ${j.tasks_per_node} task(s)`],
    ['attempts', String(j.attempts)], ['requeues', String(j.requeues)],
    ['elastic', j.elastic ? `${(j.nodes || []).length} node(s) now within ${j.node_range}, ${j.resizes} resize(s)` : '-'],
    ['submitted', fmtDateTime(j.submitted_at)], ['started', fmtDateTime(j.started_at)],
    ['ended', fmtDateTime(j.ended_at)], ['elapsed', fmtElapsed(j.elapsed)], ['time limit', fmtLimit(j.time_limit)],
    ['args', (j.args || []).join(' ') || '-'], ['dependency', (j.dependency || []).map((d) => (typeof d === 'number' ? `afterok:${d}` : d)).join(',') || '-'],
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
    const size = (s.launch_nodes || {})[m.n];  // an elastic job's launch after a resize: its nodes
    g.append(svg('text', { x: 4, y: y + 14, class: 'tl-label' }, size ? `${m.n}: ${size} nodes` : `attempt ${m.n}`));
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
