// Overview: the cluster over the last hour, day, week or month, from /v1/history (samples the
// server keeps), with the current figures on top.
import * as api from './api.js';
import { h, fill, card, stat, num, gpus, tenantColor, OTHER_COLOR } from './ui.js';
import { timeChart, setSeries, series, destroyAll } from './charts.js';

export const title = 'Overview';

// Beyond the last day the server answers from its hourly averages (serve --history-days).
const RANGES = {
  '1h': { seconds: 3600, step: 10, label: 'Last hour' },
  '24h': { seconds: 86400, step: 120, label: 'Last day' },
  '7d': { seconds: 7 * 86400, step: 3600, label: 'Last week' },
  '30d': { seconds: 30 * 86400, step: 4 * 3600, label: 'Last month' },
};

// One chart card: a canvas, and a note shown instead while there is no history.
function chartCard(titleText, cls = '') {
  const canvas = h('canvas', { role: 'img', 'aria-label': titleText });
  const note = h('div', { class: 'chart-empty', text: 'No history yet', hidden: true });
  const box = h('div', { class: `chart-box ${cls}` }, canvas, note);
  return { el: card(titleText, box), canvas, note };
}

export function mount(root, route, ctx) {
  const readHistory = api.historyReader();
  let range = RANGES[route.params.get('range')] ? route.params.get('range') : '1h';

  const buttons = Object.entries(RANGES).map(([key, r]) =>
    h('button', {
      type: 'button', class: 'seg', dataset: { range: key }, text: r.label,
      on: { click: () => setRange(key) },
    }));
  const stats = h('div', { class: 'stats' });
  const cGpus = chartCard('GPUs allocated by tenant', 'tall');
  const cQueue = chartCard('Queue depth');
  const cDecisions = chartCard('Scheduling decisions per second');
  const cFinished = chartCard('Jobs finished per minute');
  // The grid says which range its charts show, once drawn (a click redraws on the next refresh).
  const grid = h('div', { class: 'chart-grid' }, h('div', { class: 'span-all' }, cGpus.el), cQueue.el, cDecisions.el, cFinished.el);

  fill(root,
    h('div', { class: 'toolbar' }, h('div', { class: 'segmented', role: 'group', 'aria-label': 'Time range' }, buttons),
      h('span', { class: 'toolbar-note', id: 'overview-note' })),
    stats,
    grid);

  const charts = {
    gpus: timeChart(cGpus.canvas, { stacked: true, yTitle: 'GPUs' }),
    queue: timeChart(cQueue.canvas, { yTitle: 'jobs' }),
    decisions: timeChart(cDecisions.canvas, { yTitle: 'decisions/s', legend: false }),
    finished: timeChart(cFinished.canvas, { yTitle: 'jobs/min', legend: false }),
  };
  const notes = [cGpus.note, cQueue.note, cDecisions.note, cFinished.note];

  function markRange() {
    for (const b of buttons) b.classList.toggle('on', b.dataset.range === range);
  }
  markRange();

  function setRange(key) {
    range = key;
    markRange();
    history.replaceState(null, '', `#/overview?range=${key}`);
    ctx.kick();
  }

  async function refresh() {
    const key = range;
    const r = RANGES[key];
    const [hist, nodes, queues] = await Promise.all([readHistory(r.seconds, r.step), api.get('/v1/nodes'), api.get('/v1/queues')]);
    const samples = hist && hist.samples ? hist.samples : [];
    const until = hist && hist.until ? hist.until : Math.floor(Date.now() / 1000);
    const since = until - r.seconds;
    renderStats(samples, nodes, queues.queues);
    const noData = samples.length === 0;
    for (const n of notes) n.hidden = !noData;
    for (const c of Object.values(charts)) c.canvas.style.visibility = noData ? 'hidden' : 'visible';
    if (noData) {
      grid.dataset.drawn = key;
      return;
    }

    // GPUs by tenant, stacked; the GPUs this token cannot attribute as "other tenants"; the
    // cluster's capacity as a dashed line on its own stack.
    const names = [...new Set(samples.flatMap((s) => (s.tenants || []).map((t) => t.name)))].sort();
    const byTenant = names.map((name, i) => series(name, tenantColor(name),
      samples.map((s) => {
        const t = (s.tenants || []).find((x) => x.name === name);
        return { x: s.t, y: t ? t.gpus : 0 };
      }), { area: true, stackFill: i === 0 ? 'origin' : '-1' }));
    const other = samples.map((s) => {
      const known = (s.tenants || []).reduce((a, t) => a + t.gpus, 0);
      return { x: s.t, y: Math.max(0, Math.round((s.gpus_allocated - known) * 1000) / 1000) };
    });
    const ds = [...byTenant];
    if (other.some((p) => p.y > 0.001)) {
      ds.push(series('other tenants', OTHER_COLOR, other, { area: true, stackFill: ds.length ? '-1' : 'origin' }));
    }
    const cap = series('capacity', '#1f2430', samples.map((s) => ({ x: s.t, y: s.gpus_total })), { dashed: true });
    cap.stack = 'capacity';
    cap.borderWidth = 1;
    ds.push(cap);
    setSeries(charts.gpus, ds, since, until);

    setSeries(charts.queue, [
      series('pending', '#e15759', samples.map((s) => ({ x: s.t, y: s.pending_jobs })), { area: true }),
      series('running', '#4e79a7', samples.map((s) => ({ x: s.t, y: s.running_jobs }))),
    ], since, until);
    setSeries(charts.decisions, [
      series('decisions/s', '#59a14f', samples.map((s) => ({ x: s.t, y: s.decisions_per_s })), { area: true, interval: true }),
    ], since, until);
    setSeries(charts.finished, [
      series('finished', '#b07aa1', finishedPerMinute(samples, hist.step_s || r.step), { area: true }),
    ], since, until);
    grid.dataset.drawn = key;
  }

  function renderStats(samples, nodes, queues) {
    let total = 0;
    let free = 0;
    let drained = 0;
    for (const n of nodes.nodes) {
      total += n.gpus.length;
      for (const g of n.gpus) free += g.free_milli / 1000;
      if (n.state !== 'up') drained++;
    }
    const last = samples.length ? samples[samples.length - 1] : null;
    // Jobs now: the root queue's counts (else the top-level queues' together).
    const top = queues.filter((q) => q.path === '/');
    const tops = top.length ? top : queues.filter((q) => !q.path.includes('/'));
    const running = tops.reduce((a, q) => a + q.running_jobs, 0);
    const pending = tops.reduce((a, q) => a + q.pending_jobs, 0);
    // Counters are sums over each bucket. The jobs finished are the same samples' completions
    // that the chart draws per minute (finishedPerMinute): its minutes add up to this.
    const finished = samples.reduce((a, s) => a + (s.completions || 0), 0);
    const starts = samples.reduce((a, s) => a + (s.starts || 0), 0);
    fill(stats,
      stat('GPUs allocated', `${gpus(total - free)} / ${num(total)}`,
        total ? `${Math.round(((total - free) / total) * 100)}% of ${nodes.nodes.length} node${nodes.nodes.length === 1 ? '' : 's'}${drained ? `, ${drained} not up` : ''}` : 'no GPUs'),
      stat('Running jobs', num(running)),
      stat('Pending jobs', num(pending)),
      stat('Decisions / s', last ? num(last.decisions_per_s, 2) : '–'),
      stat(`Jobs finished (${RANGES[range].label.toLowerCase()})`, last ? num(finished) : '–',
        last ? `${num(starts)} started` : null));
  }

  return {
    interval: 5000,
    refresh,
    unmount() { destroyAll(Object.values(charts)); },
  };
}

// Jobs finished per minute: each sample's completions (the jobs that finished in the interval
// that ends at its t) added up per minute of the clock, a point at the minute's start, so that
// the minutes add up to the card's count. Not a sample's count scaled up to a minute: a sample is
// 10 s by default, and 4 jobs that end in the same one would read as 24 a minute. Where the
// history's buckets are wider than a minute (the last day), per bucket of whole minutes, divided
// by its minutes. The last bucket's end closes the line (a point marked `close`, no count of its
// own), so that the last minute is drawn as wide as the others, and a young server's only one
// at all.
export function finishedPerMinute(samples, step) {
  const width = Math.max(1, Math.ceil((step || 60) / 60)) * 60;
  const out = [];
  for (const s of samples) {
    const start = (Math.ceil(s.t / width) - 1) * width; // (start, start + width] holds s.t
    const last = out[out.length - 1];
    if (last && last.x === start) last.n += s.completions || 0;
    else out.push({ x: start, n: s.completions || 0 });
  }
  const points = out.map((p) => ({ x: p.x, y: (p.n * 60) / width }));
  if (!points.length) return points;
  // The first minute from where the history starts, if later: no wider than what was counted.
  points[0].x = Math.max(points[0].x, samples[0].t - (samples[0].interval_s || 0));
  points.push({ x: points[points.length - 1].x + width, y: points[points.length - 1].y, close: true });
  return points;
}
