// minihpc web page: the job report's charts (GET /jobs/{id}/report), as inline SVG.
// Loss by attempt, samples/s over time, and mean step time per rank split by phase -- the
// same data `minihpc report` draws as PNGs. Text from the server goes in as text nodes only.
'use strict';

const CHART_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];
const CW = 560, CH = 220, PAD = { l: 52, r: 12, t: 26, b: 30 };

function chartNode(tag, attrs = {}, text) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text != null) e.append(document.createTextNode(String(text)));
  return e;
}

function fmtTick(v) {
  const a = Math.abs(v);
  if (Number.isInteger(v) && a < 1000) return String(v);
  if (a >= 1000) return `${(v / 1000).toFixed(1)}k`;
  if (a >= 10) return v.toFixed(0);
  if (a >= 0.1) return v.toFixed(2);
  return v.toExponential(1);
}

function chartFrame(title, label, xlo, xhi, ylo, yhi, xlabel, ylabel) {
  const svg = chartNode('svg', { viewBox: `0 0 ${CW} ${CH}`, class: 'chart', role: 'img', 'aria-label': label });
  svg.append(chartNode('text', { x: PAD.l, y: 16, class: 'chart-title' }, `${title} (${ylabel})`));
  const x = (v) => PAD.l + ((v - xlo) / ((xhi - xlo) || 1)) * (CW - PAD.l - PAD.r);
  const y = (v) => CH - PAD.b - ((v - ylo) / ((yhi - ylo) || 1)) * (CH - PAD.t - PAD.b);
  svg.append(chartNode('rect', { x: PAD.l, y: PAD.t, width: CW - PAD.l - PAD.r, height: CH - PAD.t - PAD.b,
    class: 'chart-axes' }));
  for (const v of [ylo, (ylo + yhi) / 2, yhi]) {
    svg.append(chartNode('text', { x: PAD.l - 4, y: y(v) + 4, class: 'chart-tick', 'text-anchor': 'end' }, fmtTick(v)));
  }
  if (xlabel) {
    svg.append(chartNode('text', { x: PAD.l, y: CH - 8, class: 'chart-tick' }, fmtTick(xlo)));
    svg.append(chartNode('text', { x: CW - PAD.r, y: CH - 8, class: 'chart-tick', 'text-anchor': 'end' }, fmtTick(xhi)));
    svg.append(chartNode('text', { x: (PAD.l + CW - PAD.r) / 2, y: CH - 8, class: 'chart-tick', 'text-anchor': 'middle' }, xlabel));
  }
  return { svg, x, y };
}

function legend(svg, names) {
  names.forEach((name, i) => {
    const ly = PAD.t + 12 + i * 14;
    svg.append(chartNode('rect', { x: CW - PAD.r - 110, y: ly - 8, width: 10, height: 10, fill: CHART_COLORS[i % 8] }));
    svg.append(chartNode('text', { x: CW - PAD.r - 96, y: ly + 1, class: 'chart-tick' }, name));
  });
}

function lineChart(title, series, xlabel, ylabel) {
  const names = Object.keys(series).filter((k) => series[k].length);
  const pts = names.flatMap((k) => series[k]);
  if (!pts.length) return null;
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  const f = chartFrame(title, title, Math.min(...xs), Math.max(...xs), Math.min(0, ...ys), Math.max(...ys), xlabel, ylabel);
  names.forEach((name, i) => {
    const points = series[name].map(([a, b]) => `${f.x(a).toFixed(1)},${f.y(b).toFixed(1)}`).join(' ');
    f.svg.append(chartNode('polyline', { points, fill: 'none', stroke: CHART_COLORS[i % 8], 'stroke-width': 1.5,
      'data-series': name }));
  });
  if (names.length > 1) legend(f.svg, names);
  return f.svg;
}

function stackedBars(title, bars) {
  const ranks = Object.keys(bars);
  if (!ranks.length) return null;
  const phases = [...new Set(ranks.flatMap((r) => Object.keys(bars[r])))];
  const totals = ranks.map((r) => phases.reduce((s, p) => s + (bars[r][p] || 0), 0));
  const f = chartFrame(title, title, 0, ranks.length, 0, Math.max(...totals), null, 's/step');
  const slot = (CW - PAD.l - PAD.r) / ranks.length;
  ranks.forEach((rank, i) => {
    let base = 0;
    phases.forEach((p, j) => {
      const v = bars[rank][p] || 0;
      const top = f.y(base + v), bottom = f.y(base);
      f.svg.append(chartNode('rect', { x: PAD.l + i * slot + slot * 0.2, y: top, width: slot * 0.6,
        height: Math.max(0, bottom - top), fill: CHART_COLORS[j % 8], 'data-phase': p }));
      base += v;
    });
    f.svg.append(chartNode('text', { x: PAD.l + (i + 0.5) * slot, y: CH - 8, class: 'chart-tick',
      'text-anchor': 'middle' }, rank));
  });
  legend(f.svg, phases);
  return f.svg;
}

// The job page's charts; an empty report says so.
function renderReportCharts(container, report) {
  const charts = report ? [
    lineChart('training loss', report.loss || {}, 'step', 'loss'),
    lineChart('throughput', report.throughput || {}, 'seconds', 'samples/s'),
    stackedBars('mean step time per rank', report.step_time || {}),
  ].filter(Boolean) : [];
  if (!charts.length) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = 'No training metrics reported (see minihpc.job.progress).';
    container.replaceChildren(p);
    return;
  }
  container.replaceChildren(...charts);
}

if (typeof module !== 'undefined') module.exports = { fmtTick };
