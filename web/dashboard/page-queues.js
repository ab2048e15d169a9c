// Queues: the queue tree as the scheduler sees it now (/v1/queues), and each queue's allocation
// against its fair share over the last hour (/v1/history).
import * as api from './api.js';
import { h, fill, card, table, empty, gpus, num, tenantColor } from './ui.js';
import { timeChart, setSeries, series, destroyAll } from './charts.js';

export const title = 'Queues';

const EPS = 0.001;

// "/" is the root; "a/b" is b under a.
const depth = (path) => (path === '/' ? 0 : path.split('/').length);
const label = (path) => (path === '/' ? 'root' : path.split('/').pop());

export function mount(root, route, ctx) {
  const readHistory = api.historyReader();
  let focus = route.params.get('queue') || '';
  const cols = [
    { label: 'Queue' }, { label: 'Weight', class: 'num' },
    { label: 'Guarantee', class: 'num', title: 'GPUs guaranteed to the queue' },
    { label: 'Limit', class: 'num', title: 'The most GPUs the queue may hold' },
    { label: 'Fair share', class: 'num', title: 'GPUs the queue is entitled to now' },
    { label: 'Allocated', class: 'num', title: 'GPUs its jobs hold' },
    { label: 'Borrowed', class: 'num', title: 'max(0, allocated − guarantee)' },
    { label: 'Allocated vs fair share', class: 'bar-col' },
    { label: 'Pending', class: 'num' }, { label: 'Running', class: 'num' },
    { label: 'Decayed usage', class: 'num', title: 'GPUs of decayed past usage counted against the queue' },
  ];
  const { table: tbl, tbody } = table(cols, 'queues');
  const select = h('select', { class: 'input', 'aria-label': 'Queue shown in the chart', on: { change: () => setFocus(select.value) } });
  const canvas = h('canvas', { role: 'img', 'aria-label': 'Allocated vs fair share over time' });
  const note = h('div', { class: 'chart-empty', text: 'No history yet', hidden: true });
  const legendNote = h('span', { class: 'muted', text: 'solid: allocated · dashed: fair share' });
  fill(root,
    card('Queue tree', h('div', { class: 'table-wrap' }, tbl),
      h('span', { class: 'legend-inline' },
        h('span', { class: 'key borrow' }, 'borrowing beyond guarantee'),
        h('span', { class: 'key over' }, 'over fair share'))),
    card('Share vs entitlement, last hour', h('div', { class: 'chart-box tall' }, canvas, note),
      h('span', { class: 'card-tools' }, legendNote, select)));
  const chart = timeChart(canvas, { yTitle: 'GPUs' });

  function setFocus(path) {
    focus = path;
    history.replaceState(null, '', focus ? `#/queues?queue=${encodeURIComponent(focus)}` : '#/queues');
    ctx.kick();
  }

  async function refresh() {
    const [q, hist] = await Promise.all([api.get('/v1/queues'), readHistory(3600, 10)]);
    renderTable(q.queues);
    renderSelect(q.queues);
    renderChart(q.queues, hist);
  }

  function renderTable(queues) {
    if (!queues.length) {
      fill(tbody, h('tr', null, h('td', { colspan: cols.length }, empty('No queues'))));
      return;
    }
    const rows = queues.map((q) => {
      // The root has no parent to borrow from: its borrowed is meaningless, shown as "—".
      const isRoot = q.path === '/';
      const borrowed = isRoot ? 0 : Math.max(0, q.holds_gpus - q.guarantee_gpus);
      const over = q.holds_gpus > q.fair_share_gpus + EPS;
      const qs = isRoot ? '' : `&queue=${encodeURIComponent(q.path)}`;
      const scale = Math.max(q.fair_share_gpus, q.holds_gpus, q.guarantee_gpus, EPS);
      const bar = h('div', { class: 'sharebar', title: `allocated ${gpus(q.holds_gpus)} of fair share ${gpus(q.fair_share_gpus)} GPUs` },
        h('div', { class: `fill${over ? ' over' : ''}`, style: { width: `${(q.holds_gpus / scale) * 100}%` } }),
        h('div', { class: 'mark', style: { left: `${(q.fair_share_gpus / scale) * 100}%` } }));
      const tr = h('tr', {
        class: [borrowed > EPS ? 'borrowing' : '', over && !isRoot ? 'over-share' : '', focus === q.path ? 'focused' : ''].join(' ').trim() || null,
        dataset: { path: q.path },
        title: 'Show this queue in the chart',
        on: { click: () => setFocus(focus === q.path ? '' : q.path) },
      },
      h('td', { class: 'tree' },
        h('span', { class: 'indent', style: { width: `${depth(q.path) * 18}px` } }),
        h('span', { class: depth(q.path) === 0 ? 'qname root' : 'qname', text: label(q.path), title: q.path })),
      h('td', { class: 'num', text: num(q.weight, 2) }),
      h('td', { class: 'num', text: gpus(q.guarantee_gpus) }),
      h('td', { class: 'num', text: q.limit_gpus === null ? '∞' : gpus(q.limit_gpus) }),
      h('td', { class: 'num', text: gpus(q.fair_share_gpus) }),
      h('td', { class: 'num strong', text: gpus(q.holds_gpus) }),
      h('td', { class: `num${borrowed > EPS ? ' warn' : ''}${isRoot ? ' muted' : ''}`, text: isRoot ? '—' : gpus(borrowed) }),
      h('td', { class: 'bar-col' }, bar),
      h('td', { class: 'num' }, q.pending_jobs ? h('a', { href: `#/jobs?state=pending${qs}`, text: num(q.pending_jobs), on: { click: (e) => e.stopPropagation() } }) : '0'),
      h('td', { class: 'num' }, q.running_jobs ? h('a', { href: `#/jobs?state=running${qs}`, text: num(q.running_jobs), on: { click: (e) => e.stopPropagation() } }) : '0'),
      h('td', { class: 'num', text: gpus(q.decayed_gpus) }));
      return tr;
    });
    fill(tbody, rows);
  }

  let selectKey = '';
  function renderSelect(queues) {
    const key = queues.map((q) => q.path).join('\n') + '\n' + focus;
    if (key === selectKey) return;
    selectKey = key;
    fill(select, h('option', { value: '', text: 'All queues' }),
      queues.filter((q) => q.path !== '/').map((q) => h('option', { value: q.path, text: q.path })));
    select.value = focus;
  }

  function renderChart(queues, hist) {
    const samples = hist && hist.samples ? hist.samples : [];
    note.hidden = samples.length > 0;
    canvas.style.visibility = samples.length ? 'visible' : 'hidden';
    if (!samples.length) return;
    const until = hist.until || samples[samples.length - 1].t;
    // The queues to draw: the chosen one, else every queue but the root (leaves first when
    // there are many).
    let paths = [...new Set(samples.flatMap((s) => (s.queues || []).map((x) => x.path)))].filter((p) => p !== '/');
    if (focus) paths = paths.filter((p) => p === focus);
    if (!paths.length && !focus) paths = ['/'];
    const order = queues.map((q) => q.path);
    paths.sort((a, b) => order.indexOf(a) - order.indexOf(b));
    const ds = [];
    paths.forEach((path) => {
      // Coloured as the tenant of the same name (each tenant has a queue of its name by default).
      const color = tenantColor(path.split('/').pop());
      const pick = (f) => samples.map((s) => {
        const x = (s.queues || []).find((y) => y.path === path);
        return { x: s.t, y: x ? x[f] : null };
      });
      ds.push(series(`${path} allocated`, color, pick('holds_gpus')));
      ds.push(series(`${path} fair share`, color, pick('fair_share_gpus'), { dashed: true }));
      if (focus) ds.push(Object.assign(series(`${path} guarantee`, '#8a94a3', pick('guarantee_gpus'), { dashed: true }), { borderDash: [2, 3] }));
    });
    setSeries(chart, ds, until - 3600, until);
  }

  return {
    interval: 3000,
    refresh,
    unmount() { destroyAll([chart]); },
  };
}
