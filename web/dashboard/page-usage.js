// Usage: accounting over a chosen range (/v1/usage), per tenant and queue or per user: GPU-hours
// by GPU type, CPU-hours, jobs finished, waits, preemptions and energy, with a cost from prices
// per GPU-hour the viewer enters (kept in this browser: the server keeps usage, the operator
// keeps prices, as with `tessera usage --prices`) and a CSV download in `tessera usage --csv`'s
// columns. A tenant's token gets its own tenant's rows only (the server decides).
import * as api from './api.js';
import { h, fill, card, table, empty, num, duration, dateTime, seriesColor } from './ui.js';
import { barChart, setBars, destroyAll } from './charts.js';

export const title = 'Usage';

const RANGES = {
  '24h': { seconds: 86400, label: 'Last 24 h' },
  '7d': { seconds: 7 * 86400, label: '7 days' },
  '30d': { seconds: 30 * 86400, label: '30 days' },
  custom: { label: 'Custom' },
};
const GROUPS = { queue: 'By tenant and queue', user: 'By user' };
// The job states a finished job ends in, in the order `tessera usage` lists them.
const FINAL = ['succeeded', 'failed', 'timeout', 'cancelled'];
const PRICES_KEY = 'tessera.prices';
// `tessera usage --csv`'s header (src/apps/client_tables.cc, usage_csv): the same columns, so
// that a file from either reads the same.
const CSV_HEADER = 'tenant,queue,gpu_type,gpu_hours,cpu_hours,jobs_succeeded,jobs_failed,jobs_timeout,'
  + 'jobs_cancelled,started,mean_wait_hours,preempted,preemptor,cost,energy_kwh,carbon_kg,user';

// Hours (or money) as text: two decimals, but a short job's tiny figure keeps two significant
// digits rather than reading as 0. The cell's title and data-value hold the exact number.
export function hoursText(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  if (x === 0) return '0';
  if (Math.abs(x) < 0.01) return String(Number(x.toPrecision(2)));
  return num(Math.round(x * 100) / 100, 2);
}

// The cost of a row, as cost_of (src/model/accounting.cc) reckons GPU-hours: the sum over its
// GPU types of hours × price; a type without a price costs nothing and is added to `unpriced`.
export function costOf(row, prices, unpriced) {
  let cost = 0;
  for (const [type, hours] of Object.entries(row.gpu_hours || {})) {
    if (Object.prototype.hasOwnProperty.call(prices, type)) cost += hours * prices[type];
    else if (hours > 0 && unpriced && !unpriced.includes(type)) unpriced.push(type);
  }
  return cost;
}

const totalHours = (row) => Object.values(row.gpu_hours || {}).reduce((a, x) => a + x, 0);
// By user, a row is a user of a tenant; the tenant's own token's jobs are the tenant's row.
const whoOf = (row) => (row.user ? `${row.user}@${row.tenant}` : row.tenant);
const rowKey = (row, by) => (by === 'user' ? `${whoOf(row)} · ${row.queue}` : `${row.tenant} / ${row.queue}`);

function loadPrices() {
  try {
    const p = JSON.parse(localStorage.getItem(PRICES_KEY) || '{}');
    const out = {};
    for (const [k, v] of Object.entries(p && typeof p === 'object' ? p : {})) {
      if (typeof v === 'number' && Number.isFinite(v) && v >= 0) out[k] = v;
    }
    return out;
  } catch {
    return {}; // a stored value this page did not write: start afresh
  }
}

const pad = (n) => String(n).padStart(2, '0');
const isoDay = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
// 'YYYY-MM-DD' -> local midnight as unix seconds; NaN if not a date.
function dayStart(s) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s || '');
  if (!m) return NaN;
  return new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3])).getTime() / 1000;
}

export function mount(root, route, ctx) {
  let params = readParams(route.params);
  let prices = loadPrices();
  let data = null;     // the last answer: {since, until, by, usage}
  let typesKey = null; // the GPU types the price inputs were built for

  const rangeButtons = Object.entries(RANGES).map(([key, r]) =>
    h('button', { type: 'button', class: 'seg', dataset: { range: key }, text: r.label, on: { click: () => setRange(key) } }));
  const groupButtons = Object.entries(GROUPS).map(([key, label]) =>
    h('button', { type: 'button', class: 'seg', dataset: { by: key }, text: label, on: { click: () => set({ by: key }) } }));
  const from = h('input', { type: 'date', class: 'input', id: 'usage-from', 'aria-label': 'From (first day)', on: { change: () => set({ from: from.value }) } });
  const to = h('input', { type: 'date', class: 'input', id: 'usage-to', 'aria-label': 'To (last day, included)', on: { change: () => set({ to: to.value }) } });
  const custom = h('span', { class: 'usage-custom' }, h('label', { class: 'inline' }, 'from', from), h('label', { class: 'inline' }, 'to', to));
  const note = h('span', { class: 'toolbar-note', id: 'usage-window' });
  const invalid = h('div', { class: 'inline-error', id: 'usage-invalid', hidden: true });

  const priceBox = h('div', { class: 'usage-prices' });
  const unpricedNote = h('div', { class: 'muted', id: 'usage-unpriced', hidden: true });
  const pricesCard = card('Price per GPU-hour', h('div', null, priceBox, unpricedNote),
    h('span', { class: 'muted', text: 'kept in this browser' }));

  const csvButton = h('button', { type: 'button', class: 'btn small', id: 'usage-csv', text: 'Download CSV', on: { click: download } });
  const tableWrap = h('div', { class: 'table-wrap' });
  const tableCard = card('Usage', tableWrap, h('span', { class: 'card-tools' }, csvButton));
  const canvas = h('canvas', { role: 'img', 'aria-label': 'GPU-hours by GPU type' });
  const chartNote = h('div', { class: 'chart-empty', text: 'No GPU-hours in this range', hidden: true });
  const chartCard = card('GPU-hours', h('div', { class: 'chart-box tall' }, canvas, chartNote));
  const emptyBox = h('section', { class: 'card usage-empty', hidden: true });

  fill(root,
    h('div', { class: 'toolbar' },
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Time range' }, rangeButtons), custom,
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Grouping' }, groupButtons), note),
    invalid, emptyBox, tableCard, chartCard, pricesCard);
  const chart = barChart(canvas, { stacked: true, yTitle: 'GPU-hours', yFormat: hoursText });
  markControls();

  function readParams(p) {
    const range = RANGES[p.get('range')] ? p.get('range') : '24h';
    const by = GROUPS[p.get('by')] ? p.get('by') : 'queue';
    // A custom range defaults to the last 7 days, so that choosing it shows something at once.
    const today = new Date();
    const weekAgo = new Date(today.getTime() - 6 * 86400 * 1000);
    return { range, by, from: p.get('from') || isoDay(weekAgo), to: p.get('to') || isoDay(today) };
  }

  function markControls() {
    for (const b of rangeButtons) b.classList.toggle('on', b.dataset.range === params.range);
    for (const b of groupButtons) b.classList.toggle('on', b.dataset.by === params.by);
    custom.hidden = params.range !== 'custom';
    from.value = params.from;
    to.value = params.to;
    tableCard.querySelector('h2').textContent = params.by === 'user' ? 'Usage by user' : 'Usage by tenant and queue';
    chartCard.querySelector('h2').textContent = params.by === 'user' ? 'GPU-hours by user' : 'GPU-hours by tenant and queue';
  }

  function setRange(key) { set({ range: key }); }

  // Keeps the choice in the address (a link or a reload shows the same), then fetches.
  function set(change) {
    params = { ...params, ...change };
    const q = { range: params.range === '24h' ? '' : params.range, by: params.by === 'queue' ? '' : params.by };
    if (params.range === 'custom') Object.assign(q, { from: params.from, to: params.to });
    history.replaceState(null, '', `#/usage${api.query(q)}`);
    markControls();
    ctx.kick();
  }

  // The window asked for: the last N seconds up to now, or whole local days from `from` to
  // `to` included (no later than now: the server counts runs still going up to now anyway).
  function rangeWindow() {
    const now = Math.floor(Date.now() / 1000);
    if (params.range !== 'custom') return { since: now - RANGES[params.range].seconds, until: now };
    const since = dayStart(params.from);
    const end = dayStart(params.to);
    if (!Number.isFinite(since) || !Number.isFinite(end)) return { error: 'Choose a first and a last day.' };
    if (end < since) return { error: 'The last day is before the first.' };
    const until = Math.min(now, end + 86400);
    if (until <= since) return { error: 'The range starts in the future.' };
    return { since, until };
  }

  async function refresh() {
    const w = rangeWindow();
    invalid.hidden = !w.error;
    invalid.textContent = w.error || '';
    if (w.error) {
      data = null;
      for (const el of [emptyBox, tableCard, chartCard, pricesCard]) el.hidden = true;
      note.textContent = '';
      return;
    }
    const by = params.by;
    const asked = JSON.stringify(params);
    const res = await api.get(`/v1/usage${api.query({ since: w.since, until: w.until, by })}`);
    // A newer choice came while this one was asked: its own refresh follows (app.js's tick).
    if (asked !== JSON.stringify(params)) return;
    data = { since: res.since, until: res.until, by, usage: res.usage || [] };
    render();
  }

  function render() {
    const rows = data.usage;
    note.textContent = `${dateTime(data.since)} → ${dateTime(data.until)}`;
    const nothing = rows.length === 0;
    emptyBox.hidden = !nothing;
    for (const el of [tableCard, chartCard, pricesCard]) el.hidden = nothing;
    if (nothing) {
      fill(emptyBox, empty(`No usage in this range (${dateTime(data.since)} to ${dateTime(data.until)}).`));
      return;
    }
    // GPU types in a fixed order (by name), whichever row uses them first.
    const types = [...new Set(rows.flatMap((r) => Object.keys(r.gpu_hours || {})))].sort();
    renderPrices(types);
    renderTable(rows, types);
    renderChart(rows, types);
  }

  function renderPrices(types) {
    const key = types.join('\n');
    if (key === typesKey) return; // rebuilt only when the types change: typing keeps focus
    typesKey = key;
    if (!types.length) {
      fill(priceBox, h('span', { class: 'muted', text: 'No GPU-hours in this range: nothing to price.' }));
      return;
    }
    fill(priceBox, types.map((type) => {
      const input = h('input', {
        type: 'number', class: 'input price', min: '0', step: 'any', placeholder: 'no price',
        dataset: { type }, 'aria-label': `Price per GPU-hour of ${type}`,
        value: Object.prototype.hasOwnProperty.call(prices, type) ? String(prices[type]) : '',
      });
      input.addEventListener('input', () => setPrice(type, input));
      return h('label', { class: 'inline' }, type, input);
    }));
  }

  // An empty box takes the price away; a negative or non-number is refused (marked, not kept).
  function setPrice(type, input) {
    const text = input.value.trim();
    const v = Number(text);
    const ok = text === '' || (Number.isFinite(v) && v >= 0);
    input.classList.toggle('invalid', !ok);
    if (!ok) return;
    prices = loadPrices(); // another tab may have set other types meanwhile
    if (text === '') delete prices[type];
    else prices[type] = v;
    localStorage.setItem(PRICES_KEY, JSON.stringify(prices));
    if (data) render();
  }

  function renderTable(rows, types) {
    const by = data.by;
    const priced = types.some((t) => Object.prototype.hasOwnProperty.call(prices, t));
    const carbon = rows.some((r) => typeof r.carbon_kg === 'number');
    const cols = [
      { label: by === 'user' ? 'User' : 'Tenant' }, { label: 'Queue' },
      ...types.map((t) => ({ label: `${t} GPU-h`, class: 'num', title: `GPU-hours of ${t}` })),
      { label: 'GPU-hours', class: 'num', title: 'All GPU types together' },
      { label: 'CPU-hours', class: 'num' },
      { label: 'Finished', title: 'Jobs finished in the range, by final state' },
      { label: 'Started', class: 'num', title: 'Jobs started for the first time in the range' },
      { label: 'Mean wait', class: 'num', title: 'From submission to first start' },
      { label: 'Preempted', class: 'num', title: 'Runs of its jobs preempted (suffered)' },
      { label: 'Caused', class: 'num', title: "Runs of others' jobs preempted for its jobs" },
      { label: 'Energy kWh', class: 'num', title: 'Estimated GPU energy; – where unknown' },
      ...(carbon ? [{ label: 'CO₂ kg', class: 'num' }] : []),
      ...(priced ? [{ label: 'Cost', class: 'num', title: 'Sum over GPU types of GPU-hours × price' }] : []),
    ];
    const { table: tbl, tbody } = table(cols, 'usage');
    // A figure's cell: rounded text, the exact number in its title and data-value.
    const figure = (x, cls = '', extra = {}) => h('td', {
      class: `num ${cls}`.trim(), text: hoursText(x), title: String(x), dataset: { ...extra, value: String(x) },
    });
    const unknown = (cls) => h('td', { class: `num muted ${cls}`, text: '–' });
    const unpriced = [];
    const sum = { types: Object.fromEntries(types.map((t) => [t, 0])), gpu: 0, cpu: 0, jobs: {}, started: 0,
      preempted: 0, preemptor: 0, kwh: null, co2: null, cost: 0 };
    const trs = rows.map((r) => {
      const gpu = totalHours(r);
      const cost = costOf(r, prices, unpriced);
      sum.gpu += gpu;
      sum.cpu += r.cpu_hours || 0;
      sum.started += r.started || 0;
      sum.preempted += r.preempted || 0;
      sum.preemptor += r.preemptor || 0;
      sum.cost += cost;
      for (const t of types) sum.types[t] += (r.gpu_hours || {})[t] || 0;
      for (const [st, n] of Object.entries(r.jobs || {})) sum.jobs[st] = (sum.jobs[st] || 0) + n;
      if (typeof r.energy_kwh === 'number') sum.kwh = (sum.kwh || 0) + r.energy_kwh;
      if (typeof r.carbon_kg === 'number') sum.co2 = (sum.co2 || 0) + r.carbon_kg;
      const who = by === 'user' ? whoOf(r) : r.tenant;
      return h('tr', { dataset: { who, tenant: r.tenant, queue: r.queue, user: r.user || '' } },
        h('td', { class: 'usage-who', text: who, title: by === 'user' && !r.user ? "The jobs of the tenant's own token" : null }),
        h('td', { class: 'queue', text: r.queue || '–' }),
        types.map((t) => Object.prototype.hasOwnProperty.call(r.gpu_hours || {}, t)
          ? figure(r.gpu_hours[t], 'gpuh', { type: t })
          : h('td', { class: 'num muted gpuh', dataset: { type: t, value: '0' }, text: '–' })),
        figure(gpu, 'gpu-total strong'),
        figure(r.cpu_hours || 0, 'cpu'),
        h('td', { class: 'jobs', text: jobsText(r.jobs) }),
        h('td', { class: 'num', text: num(r.started || 0) }),
        h('td', { class: 'num', text: r.started ? duration((r.mean_wait_hours || 0) * 3600) : '–' }),
        h('td', { class: `num${r.preempted ? ' warn' : ''}`, text: num(r.preempted || 0) }),
        h('td', { class: 'num', text: num(r.preemptor || 0) }),
        typeof r.energy_kwh === 'number' ? figure(r.energy_kwh, 'kwh') : unknown('kwh'),
        carbon ? (typeof r.carbon_kg === 'number' ? figure(r.carbon_kg, 'co2') : unknown('co2')) : null,
        priced ? figure(cost, 'cost') : null);
    });
    const total = h('tr', { class: 'total', dataset: { total: '' } },
      h('td', { class: 'usage-who', text: 'Total' }), h('td'),
      types.map((t) => figure(sum.types[t], 'gpuh', { type: t })),
      figure(sum.gpu, 'gpu-total strong'), figure(sum.cpu, 'cpu'),
      h('td', { class: 'jobs', text: jobsText(sum.jobs) }),
      h('td', { class: 'num', text: num(sum.started) }), h('td'),
      h('td', { class: 'num', text: num(sum.preempted) }), h('td', { class: 'num', text: num(sum.preemptor) }),
      sum.kwh === null ? unknown('kwh') : figure(sum.kwh, 'kwh'),
      carbon ? (sum.co2 === null ? unknown('co2') : figure(sum.co2, 'co2')) : null,
      priced ? figure(sum.cost, 'cost') : null);
    fill(tbody, trs, total);
    fill(tableWrap, tbl);
    unpricedNote.hidden = !priced || !unpriced.length;
    unpricedNote.textContent = unpriced.length
      ? `No price for ${unpriced.join(', ')}: ${unpriced.length === 1 ? 'its' : 'their'} GPU-hours cost nothing here.` : '';
  }

  function renderChart(rows, types) {
    const hours = rows.reduce((a, r) => a + totalHours(r), 0);
    chartNote.hidden = hours > 0;
    canvas.style.visibility = hours > 0 ? 'visible' : 'hidden';
    const labels = rows.map((r) => rowKey(r, data.by));
    setBars(chart, labels, types.map((t, i) => ({
      label: t,
      data: rows.map((r) => (r.gpu_hours || {})[t] || 0),
      backgroundColor: seriesColor(i),
      borderWidth: 0,
      maxBarThickness: 48,
    })));
  }

  // The table as `tessera usage --csv` writes it: a line per GPU type a row used (a CPU-only
  // row: one line with no type), the row's other figures on its first line only, so that
  // columns sum; cost per line where prices are set.
  function download() {
    if (!data || !data.usage.length) return;
    const priced = Object.keys(prices).length > 0;
    const quoted = (v) => (/[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
    const f4 = (x) => (x || 0).toFixed(4);
    const lines = [CSV_HEADER];
    for (const r of data.usage) {
      const types = Object.entries(r.gpu_hours || {});
      if (!types.length) types.push(['', 0]);
      types.forEach(([type, hrs], k) => {
        const first = k === 0;
        const count = (st) => (first ? (r.jobs || {})[st] || 0 : 0);
        const known = (v) => (first && typeof v === 'number' ? f4(v) : '');
        lines.push([
          quoted(r.tenant), quoted(r.queue || ''), quoted(type), f4(hrs), f4(first ? r.cpu_hours : 0),
          ...FINAL.map(count), first ? r.started || 0 : 0, f4(first ? r.mean_wait_hours : 0),
          first ? r.preempted || 0 : 0, first ? r.preemptor || 0 : 0,
          priced ? f4(costOf({ gpu_hours: { [type]: hrs } }, prices)) : '',
          known(r.energy_kwh), known(r.carbon_kg), quoted(r.user || ''),
        ].join(','));
      });
    }
    const blob = new Blob([`${lines.join('\n')}\n`], { type: 'text/csv' });
    const a = h('a', { href: URL.createObjectURL(blob), download: `tessera-usage-${data.by}-${isoDay(new Date(data.since * 1000))}-${isoDay(new Date(data.until * 1000))}.csv` });
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  return {
    // Usage of running jobs grows, but slowly: a minute between polls is plenty.
    interval: 60000,
    refresh,
    update(r) {
      params = readParams(r.params);
      markControls();
    },
    unmount() { destroyAll([chart]); },
  };
}

// "2 succeeded, 1 failed": finished jobs by final state, the usual ones first.
function jobsText(jobs) {
  const entries = Object.entries(jobs || {}).filter(([, n]) => n > 0);
  entries.sort(([a], [b]) => {
    const ia = FINAL.indexOf(a) < 0 ? FINAL.length : FINAL.indexOf(a);
    const ib = FINAL.indexOf(b) < 0 ? FINAL.length : FINAL.indexOf(b);
    return ia - ib || a.localeCompare(b);
  });
  return entries.length ? entries.map(([st, n]) => `${num(n)} ${st}`).join(', ') : '–';
}
