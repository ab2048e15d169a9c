// tessera report: draws the tables and plots from the JSON data block the binary inlined
// (src/report/html_report.cc). Every text from the data goes through textContent, never HTML.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('data').textContent);
  const root = document.getElementById('report');
  root.textContent = '';

  // Tableau 10, then golden-angle hues for long lists (many tenants).
  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#bab0ac'];
  const color = (i) => i < PALETTE.length ? PALETTE[i] : `hsl(${(i * 137.5) % 360}, 55%, 45%)`;
  const GREYS = ['#555', '#888', '#aaa', '#333', '#777', '#999', '#bbb'];

  // ---- small DOM helpers ----
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }
  const fmt = (v, digits = 2) => (v === null || v === undefined || Number.isNaN(v)) ? 'n/a'
    : Number(v).toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const hours = (s, d = 2) => (s === null || s === undefined) ? 'n/a' : fmt(s / 3600, d);
  const pct = (f, d = 1) => (f === null || f === undefined) ? 'n/a' : fmt(100 * f, d);

  function table(columns, rows) {
    const head = el('tr', {}, ...columns.map((c) => el('th', {}, c.title)));
    const body = rows.map((r, i) => el('tr', {}, ...columns.map((c, k) => {
      const td = el('td', c.text ? { class: 'text' } : {});
      if (k === 0 && c.swatch) {
        td.append(el('span', { class: 'swatch', style: `background:${c.swatch(r, i)}` }));
      }
      td.append(String(c.value(r, i)));
      return td;
    })));
    return el('div', { class: 'table-wrap' }, el('table', {}, el('thead', {}, head), el('tbody', {}, ...body)));
  }

  const charts = [];
  // A figure: a title, a note, and a chart (or, when its data is absent, why).
  function figure(parent, title, note, config, wide) {
    const fig = el('div', { class: 'figure' + (wide ? ' wide' : '') }, el('h3', {}, title));
    if (note) fig.append(el('p', { class: 'note' }, note));
    parent.append(fig);
    if (!config) return fig;
    if (typeof config === 'string') { fig.append(el('p', { class: 'missing' }, config)); return fig; }
    const canvas = el('canvas', { role: 'img', 'aria-label': title });
    // A chart of many bars asks for the height they need.
    fig.append(el('div', config.height ? { class: 'chart', style: `height:${config.height}px` } : { class: 'chart' }, canvas));
    delete config.height;
    try {
      charts.push(new Chart(canvas, withDefaults(config)));
    } catch (e) {
      console.error(`chart "${title}": ${e && e.message}`);
      fig.append(el('p', { class: 'error' }, `This chart could not be drawn: ${e && e.message}`));
    }
    return fig;
  }

  function withDefaults(c) {
    const o = c.options || (c.options = {});
    o.animation = false;
    o.responsive = true;
    o.maintainAspectRatio = false;
    o.plugins = Object.assign({ legend: { position: 'bottom', labels: { boxWidth: 14, boxHeight: 2 } } }, o.plugins || {});
    o.plugins.tooltip = Object.assign({ mode: 'nearest', intersect: false }, o.plugins.tooltip || {});
    if (c.type === 'line' || c.type === 'scatter') {
      o.parsing = false;
      o.normalized = true;  // every line's points come sorted by x
      o.elements = { point: { radius: 0, hitRadius: 4 }, line: { borderWidth: 1.6, tension: 0 } };
    }
    return c;
  }

  // A series from the data: {x0, dx, y} (regular) or {x, y} (downsampled).
  function points(s, scale = 1, floor) {
    if (!s) return [];
    const out = new Array(s.y.length);
    for (let i = 0; i < s.y.length; i++) {
      let x = s.x ? s.x[i] : s.x0 + s.dx * i;
      if (floor !== undefined && x < floor) x = floor;
      out[i] = { x, y: s.y[i] * scale };
    }
    return out;
  }
  const axis = (title, extra) => Object.assign({ type: 'linear', title: { display: true, text: title }, grid: { color: '#eceff3' } }, extra || {});
  const PER_DECADE = (v) => {
    const m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
    if (Math.abs(m - 1) > 1e-6) return '';
    return v >= 1 ? `${v.toLocaleString('en-US')} h` : `${+(v * 60).toPrecision(3)} min`;
  };
  const hoursLabel = (h) => h >= 24 && Math.abs(h / 24 - Math.round(h / 24)) < 1e-9 ? `${Math.round(h / 24)} d` : `${+h.toPrecision(3)} h`;

  const section = (title, sub) => {
    root.append(el('h2', {}, title));
    if (sub) root.append(el('p', { class: 'note' }, sub));
  };

  // ---- simulate ----
  function simulateSection(runs) {
    section('Simulation runs', runs.length > 1 ? `${runs.length} runs compared: one line per run in every plot.` : null);
    root.append(table([
      { title: 'run', text: true, value: (r) => r.label, swatch: (r, i) => color(i) },
      { title: 'backfill', text: true, value: (r) => r.backfill || 'n/a' },
      { title: 'jobs', value: (r) => r.finished === r.jobs ? fmt(r.jobs, 0) : `${fmt(r.finished, 0)} / ${fmt(r.jobs, 0)}` },
      { title: 'JCT mean h', value: (r) => hours(r.jct.mean) },
      { title: 'p50', value: (r) => hours(r.jct.p50) },
      { title: 'p95', value: (r) => hours(r.jct.p95) },
      { title: 'p99', value: (r) => hours(r.jct.p99) },
      { title: 'wait mean h', value: (r) => hours(r.queueing_delay.mean) },
      { title: 'wait p95', value: (r) => hours(r.queueing_delay.p95) },
      { title: 'makespan h', value: (r) => hours(r.makespan, 1) },
      { title: 'GPU alloc %', value: (r) => pct(r.gpu_allocation) },
      { title: 'effective %', value: (r) => pct(r.effective_utilisation) },
      { title: 'Jain', value: (r) => fmt(r.jain, 3) },
      { title: 'SLA met %', value: (r) => pct(r.sla) },
      { title: 'preemptions', value: (r) => fmt(r.preemptions, 0) },
      { title: 'lost GPU-h', value: (r) => fmt(r.lost_gpu_hours, 1) },
    ], runs));
    const first = runs[0];
    root.append(el('p', { class: 'note' },
      `Workload ${first.workload || 'n/a'}; cluster ${fmt(first.cluster.nodes, 0)} nodes, ${fmt(first.cluster.gpus, 0)} GPUs. Hours are wall-clock hours of the replay.`));
    const grid = el('div', { class: 'grid' });
    root.append(grid);

    for (const [key, title, what] of [['jct_cdf', 'JCT distribution', 'job completion time'], ['wait_cdf', 'Queueing delay distribution', 'queueing delay (submit to first start)']]) {
      const have = runs.filter((r) => r[key]);
      const lacking = runs.filter((r) => !r[key]).map((r) => r.label);
      const note = (lacking.length && have.length ? `Not in ${lacking.join(', ')} (results from before jct.cdf; pass --events). ` : '') +
        'CDF over finished jobs; log scale, values under 1 min drawn at 1 min.';
      figure(grid, title, note, have.length === 0
        ? `No ${what} distribution in these results: re-run simulate with this version, or pass its --events log.`
        : {
          type: 'line',
          data: { datasets: runs.map((r, i) => r[key] && ({ label: r.label, data: points(r[key], 1, 1 / 60), borderColor: color(i), backgroundColor: color(i), stepped: false })).filter(Boolean) },
          options: { scales: { x: axis(`${what} (hours, log)`, { type: 'logarithmic', ticks: { callback: PER_DECADE, autoSkip: false, maxRotation: 0 } }), y: axis('% of jobs', { min: 0, max: 100 }) } },
        });
    }

    {
      const have = runs.filter((r) => r.allocation);
      figure(grid, 'GPU allocation over time', 'Mean share of the cluster\'s GPUs held, per share-series bucket (hours since the first submit).', have.length === 0
        ? 'No share_series in these results (simulate --series-interval 0 turns it off).'
        : {
          type: 'line',
          data: { datasets: runs.map((r, i) => r.allocation && ({ label: r.label, data: points(r.allocation), borderColor: color(i), backgroundColor: color(i) })).filter(Boolean) },
          options: { scales: { x: axis('hours since the first submit', { min: 0 }), y: axis('% of GPUs allocated', { min: 0, max: 100 }) } },
        });
    }

    {
      const have = runs.filter((r) => r.timeline);
      const sets = [];
      runs.forEach((r, i) => {
        if (!r.timeline) return;
        const t = r.timeline;
        const per = hoursLabel(t.dx);
        sets.push({ label: `${r.label}: preemptions per ${per}`, data: points({ x0: t.x0, dx: t.dx, y: t.preemptions }), borderColor: color(i), backgroundColor: color(i), stepped: 'before' });
        if (t.total_failures > 0) {
          const f = points({ x0: t.x0, dx: t.dx, y: t.failures }).filter((p) => p.y > 0);
          sets.push({ type: 'line', showLine: false, label: `${r.label}: ${t.failure_label} per ${per}`, data: f, borderColor: color(i), backgroundColor: color(i), pointStyle: 'triangle', pointRadius: 5, pointHoverRadius: 6 });
        }
      });
      const totals = have.map((r) => `${r.label}: ${fmt(r.timeline.total_preemptions, 0)} preemptions, ${fmt(r.timeline.total_failures, 0)} ${r.timeline.failure_label}`).join('; ');
      figure(grid, 'Preemptions and failures over time', have.length ? totals + '.' : null, have.length === 0
        ? 'No timeline in these results (written by simulate --json since tessera report; or pass --events).'
        : {
          type: 'line',
          data: { datasets: sets },
          options: { scales: { x: axis('hours since the first submit', { min: 0 }), y: axis('count per bucket', { min: 0, ticks: { precision: 0 } }) } },
        });
    }

    {
      const tenants = [];
      for (const r of runs) for (const t of r.per_tenant) if (!tenants.includes(t.tenant)) tenants.push(t.tenant);
      figure(grid, 'Mean JCT per tenant', 'Finished jobs of each tenant; the table below gives p50, p95 and waits.', tenants.length === 0
        ? 'No per_tenant metrics in these results.'
        : {
          type: 'bar',
          data: {
            labels: tenants,
            datasets: runs.map((r, i) => ({
              label: r.label, backgroundColor: color(i), borderColor: color(i),
              data: tenants.map((name) => { const t = r.per_tenant.find((x) => x.tenant === name); return t && t.jct_mean !== null ? t.jct_mean / 3600 : null; }),
            })),
          },
          options: { scales: { x: { grid: { display: false } }, y: axis('mean JCT (hours)', { min: 0 }) } },
        });
    }

    for (const [i, r] of runs.entries()) {
      if (!r.shares) {
        figure(root, `Share against entitlement: ${r.label}`, null, 'No share_series in this result.', true);
        continue;
      }
      const sets = [];
      r.shares.forEach((q, k) => {
        sets.push({ label: q.queue, data: points(q.gpus), borderColor: color(k), backgroundColor: color(k) });
        if (q.entitled) sets.push({ label: `${q.queue} entitled`, data: points(q.entitled), borderColor: color(k), backgroundColor: color(k), borderDash: [5, 4], borderWidth: 1.2 });
      });
      const fig = figure(root, `Share against entitlement: ${r.label}`,
        'Mean GPUs each tenant queue held (solid) and its entitlement: its fair share of the GPUs given who had demand (dashed, same colour).', {
          type: 'line',
          data: { datasets: sets },
          options: {
            scales: { x: axis('hours since the first submit', { min: 0 }), y: axis('GPUs', { min: 0 }) },
            plugins: { legend: { position: 'right', labels: { boxWidth: 14, boxHeight: 2, filter: (item) => !item.text.endsWith(' entitled') } } },
          },
        }, true);
      fig.dataset.run = String(i);
    }

    const rows = [];
    for (const r of runs) for (const t of r.per_tenant) rows.push(Object.assign({ run: r.label }, t));
    if (rows.length) {
      root.append(el('h3', {}, 'Per tenant'));
      root.append(table([
        { title: 'run', text: true, value: (t) => t.run },
        { title: 'tenant', text: true, value: (t) => t.tenant },
        { title: 'jobs', value: (t) => fmt(t.jobs, 0) },
        { title: 'JCT mean h', value: (t) => hours(t.jct_mean) },
        { title: 'p50', value: (t) => hours(t.jct_p50) },
        { title: 'p95', value: (t) => hours(t.jct_p95) },
        { title: 'wait mean h', value: (t) => hours(t.wait_mean) },
        { title: 'GPU-hours', value: (t) => fmt(t.gpu_hours, 0) },
        { title: 'preemptions', value: (t) => fmt(t.preemptions, 0) },
      ], rows));
    }
  }

  // ---- frag ----
  function fragSection(results) {
    section('Fragmentation (tessera frag)', 'GPU allocation and fragmentation as pods arrive with no departures (the FGD paper\'s capacity experiment). Solid: these results; dashed grey: the FGD authors\' published curves on the same pod list (mean of their 10 seeds).');
    const published = (r, policy) => {
      if (!r.baselines) return null;
      const b = r.baselines.find((x) => x.policy.endsWith(policy));
      return b ? b.allocated[b.allocated.length - 1] : null;
    };
    root.append(table([
      { title: 'policy', text: true, value: (r) => r.label, swatch: (r, i) => color(i) },
      { title: 'pod list', text: true, value: (r) => r.workload + (r.workload_known ? '' : ' (assumed)') },
      { title: 'seeds', value: (r) => fmt(r.seeds, 0) },
      { title: 'GPUs', value: (r) => fmt(r.total_gpus, 0) },
      { title: 'arrived %', value: (r) => fmt(r.end.arrived, 0) },
      { title: 'allocated %', value: (r) => fmt(r.end.allocated, 2) },
      { title: 'frag ratio %', value: (r) => fmt(r.end.frag_ratio, 2) },
      { title: 'published FGD %', value: (r) => fmt(published(r, 'FGD'), 2) },
      { title: 'published BestFit %', value: (r) => fmt(published(r, 'BestFit'), 2) },
      { title: 'pods failed', value: (r) => `${fmt(r.pods_failed, 0)} / ${fmt(r.pods_arrived, 0)}` },
    ], results));
    const grid = el('div', { class: 'grid' });
    root.append(grid);
    const base = results.find((r) => r.baselines);
    for (const [key, title, ylabel] of [['allocated', 'GPU allocation', 'GPUs allocated (% of capacity)'], ['frag_ratio', 'Fragmentation ratio', 'fragmented / free GPU (%)']]) {
      const sets = results.map((r, i) => ({
        label: r.label, borderColor: color(i), backgroundColor: color(i), borderWidth: 2,
        data: r.curve.arrived.map((x, k) => ({ x, y: r.curve[key][k] })),
      }));
      if (base) {
        base.baselines.forEach((b, k) => {
          const src = key === 'allocated' ? { arrived: b.arrived, values: b.allocated } : b.frag_ratio;
          if (!src) return;
          sets.push({ label: `${b.policy.replace(/^\d+-/, '')} (published)`, borderColor: GREYS[k % GREYS.length], backgroundColor: GREYS[k % GREYS.length], borderDash: [4, 3], borderWidth: 1.2, data: src.arrived.map((x, n) => ({ x, y: src.values[n] })) });
        });
      }
      figure(grid, `${title} against arrived demand`, base ? null : 'The published FGD curves are not at hand (../shared/data/fgd-reference, or --data-dir).', {
        type: 'line', data: { datasets: sets },
        options: { scales: { x: axis('arrived GPU demand (% of capacity)', { min: 0 }), y: axis(ylabel, { min: 0 }) } },
      });
    }
  }

  // ---- colocate ----
  function colocateSection(results) {
    section('Co-location (tessera colocate)', 'IndSD: mean individual slowdown (lower is better); PacSav: packing saving (higher is better).');
    results.forEach((r, n) => {
      root.append(el('h3', {}, `${r.file}: sources ${r.sources || 'n/a'}, ${fmt(r.seeds, 0)} seeds`));
      root.append(table([
        { title: 'policy', text: true, value: (p) => p.name },
        { title: 'IndSD %', value: (p) => fmt(p.indsd_pct, 2) },
        { title: 'IndSD co-located %', value: (p) => fmt(p.indsd_colocated_pct, 2) },
        { title: 'PacSav %', value: (p) => fmt(p.pacsav_pct, 2) },
        { title: 'pairs PacSav %', value: (p) => fmt(p.pacsav_pairs_pct, 2) },
        { title: 'makespan s', value: (p) => fmt(p.makespan_s, 0) },
        { title: 'mean JCT s', value: (p) => fmt(p.mean_jct_s, 0) },
      ], r.policies));
      const gains = r.improvements;
      if (!gains.length) {
        root.append(el('p', { class: 'missing' }, 'No improvements in this result (they need the baselines fcfs and random among its policies).'));
        return;
      }
      root.append(table([
        { title: 'improvement', text: true, value: (g) => g.key },
        { title: 'ours pp', value: (g) => fmt(g.ours_pp, 2) },
        { title: '± se', value: (g) => fmt(g.ours_pp_stderr, 2) },
        { title: 'ours relative %', value: (g) => fmt(g.ours_relative_pct, 1) },
        { title: 'published %', value: (g) => fmt(g.published_pct, 2) },
      ], gains));
      const grid = el('div', { class: 'grid' });
      root.append(grid);
      figure(grid, 'Improvements against the published ones', 'Relative improvement over the baseline, % (IndSD lower, PacSav higher).', {
        type: 'bar',
        height: Math.max(300, 26 * gains.length + 90),
        data: {
          labels: gains.map((g) => g.key),
          datasets: [
            { label: 'ours (relative %)', data: gains.map((g) => g.ours_relative_pct), backgroundColor: color(0) },
            { label: 'published %', data: gains.map((g) => g.published_pct), backgroundColor: '#9aa3b1' },
          ],
        },
        options: { indexAxis: 'y', scales: { x: axis('improvement (%)'), y: { ticks: { autoSkip: false, font: { size: 10 } } } } },
      }, true).dataset.result = String(n);
    });
  }

  // ---- predict ----
  function predictSection(results) {
    section('Runtime prediction (tessera predict)', 'Online prediction from finished jobs, scored on each job as it is submitted.');
    results.forEach((r) => {
      root.append(el('h3', {}, `${r.file}: ${r.workload || 'n/a'}, ${fmt(r.jobs, 0)} jobs`));
      root.append(table([
        { title: 'predictor', text: true, value: (p) => p.predictor },
        { title: 'jobs scored', value: (p) => fmt(p.jobs, 0) },
        { title: 'median rel. error %', value: (p) => pct(p.median_rel_error) },
        { title: 'p90 rel. error %', value: (p) => pct(p.p90_rel_error) },
        { title: 'mean rel. error %', value: (p) => pct(p.mean_rel_error) },
        { title: 'within 2× %', value: (p) => pct(p.within_2x) },
        { title: 'interval coverage %', value: (p) => pct(p.interval_coverage) },
        { title: 'under-estimated %', value: (p) => pct(p.under_estimated) },
      ], r.predictors));
      const grid = el('div', { class: 'grid' });
      root.append(grid);
      const labels = r.predictors.map((p) => p.predictor);
      const bar = (label, key, i) => ({ label, backgroundColor: color(i), data: r.predictors.map((p) => p[key] === null ? null : 100 * p[key]) });
      figure(grid, 'Prediction error', 'Relative error |predicted − actual| / actual, %.', {
        type: 'bar',
        data: { labels, datasets: [bar('median', 'median_rel_error', 0), bar('p90', 'p90_rel_error', 1)] },
        options: { scales: { y: axis('relative error (%)', { min: 0 }) } },
      });
      figure(grid, 'Predictions within 2× and interval coverage', null, {
        type: 'bar',
        data: { labels, datasets: [bar('within 2×', 'within_2x', 2), bar('p10–p90 covers', 'interval_coverage', 3)] },
        options: { scales: { y: axis('% of jobs', { min: 0, max: 100 }) } },
      });
    });
  }

  const counts = [['simulate', 'simulation'], ['frag', 'frag'], ['colocate', 'colocate'], ['predict', 'predict']]
    .filter(([k]) => data[k].length).map(([k, w]) => `${data[k].length} ${w} result${data[k].length > 1 ? 's' : ''}`);
  document.getElementById('meta').textContent = counts.join(', ') || 'No results.';
  if (data.simulate.length) simulateSection(data.simulate);
  if (data.frag.length) fragSection(data.frag);
  if (data.colocate.length) colocateSection(data.colocate);
  if (data.predict.length) predictSection(data.predict);
  const files = [...data.simulate, ...data.frag, ...data.colocate, ...data.predict].map((r) => r.file);
  document.getElementById('footer').textContent = `Written by ${data.generator || 'tessera'} from ${files.join(', ')}. Self-contained: the data and Chart.js are inline; nothing is fetched.`;
  // Charts are sized for the screen; printing needs them redrawn for the page.
  window.addEventListener('beforeprint', () => charts.forEach((c) => c.resize()));
  // For tests and timing: the charts are drawn (animation is off, so a Chart draws when made).
  document.body.dataset.drawnMs = String(Math.round(performance.now()));
  document.body.dataset.ready = String(charts.length);
})();
