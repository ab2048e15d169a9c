// Jobs: one page of jobs at a time, newest first, filtered and paged by the server
// (/v1/jobs?order=desc&before=...): the browser never holds more than the rows it shows.
import * as api from './api.js';
import { h, fill, card, table, empty, duration, dateTime, gpus, now, stateBadge } from './ui.js';

export const title = 'Jobs';

const STATES = ['pending', 'running', 'succeeded', 'failed', 'cancelled', 'preempted', 'timeout'];
const CLASSES = ['inference-critical', 'production', 'research', 'best-effort'];
const REASONS = ['Resources', 'Quota', 'FairShare', 'GangFit', 'Reservation', 'HeadOfLine',
  'InferenceReserve', 'TenantLimit', 'ArrayLimit', 'Held', 'Dependency', 'Unrunnable',
  'GoodputRound', 'Staging', 'ReservedGpus'];
const SIZES = [25, 50, 100, 200];
const FILTERS = ['state', 'tenant', 'queue', 'class', 'reason', 'array'];

// GPUs a job holds (running) or asks for (otherwise), and how to say it.
export function jobGpus(j) {
  if (j.allocation && j.allocation.length) {
    const n = j.allocation.reduce((a, m) => a + (m.gpus.length * m.gpu_milli) / 1000, 0);
    return { n, text: gpus(n) };
  }
  const per = (j.spec && j.spec.resources && j.spec.resources.gpus) || 0;
  const gang = (j.spec && j.spec.gang) || { min: 1, max: 1 };
  const members = gang.min || 1;
  const text = members > 1 || gang.max > members
    ? `${gang.min === gang.max ? gang.min : `${gang.min}–${gang.max}`}×${gpus(per)}` : gpus(per);
  return { n: members * per, text };
}

export function mount(root, route, ctx) {
  const admin = ctx.who.admin;
  const readOnly = !!ctx.who.read_only; // tessera kube: no /v1/tenants; a tenant is a leaf queue
  let params = readParams(route.params);
  let cursors = params.before ? [params.before] : []; // the `before` of each page so far, for "Newer"
  let lastPage = null;

  const controls = {};
  const mkSelect = (name, label, options) => {
    const s = h('select', { class: 'input', id: `filter-${name}`, 'aria-label': label, on: { change: () => apply({ [name]: s.value }) } },
      h('option', { value: '', text: `${label}: all` }),
      options.map((o) => (typeof o === 'string' ? h('option', { value: o, text: o }) : h('option', { value: o.value, text: o.text }))));
    controls[name] = s;
    return s;
  };
  const stateSel = mkSelect('state', 'State', [{ value: 'pending,running', text: 'active (pending, running)' }, ...STATES,
    { value: 'succeeded,failed,cancelled,preempted,timeout', text: 'finished (any)' }]);
  const tenantSel = admin ? mkSelect('tenant', 'Tenant', []) : null;
  const queueSel = mkSelect('queue', 'Queue', []);
  const classSel = mkSelect('class', 'Class', CLASSES);
  const reasonSel = mkSelect('reason', 'Reason', REASONS);
  const sizeSel = h('select', { class: 'input', 'aria-label': 'Rows per page', on: { change: () => apply({ limit: sizeSel.value }) } },
    SIZES.map((n) => h('option', { value: String(n), text: `${n} per page` })));
  const goto = h('input', { class: 'input', type: 'search', placeholder: 'Go to job ID', 'aria-label': 'Go to job ID', size: 12 });
  const gotoForm = h('form', { class: 'goto', on: { submit: (e) => {
    e.preventDefault();
    const id = goto.value.trim().replace(/^#/, '');
    if (/^\d+$/.test(id)) location.hash = `#/jobs/${id}`;
  } } }, goto);
  const reset = h('button', { type: 'button', class: 'btn small ghost', text: 'Clear filters', on: { click: () => apply({ state: '', tenant: '', queue: '', class: '', reason: '', array: '' }) } });

  const cols = [
    { label: 'ID', class: 'num' }, { label: 'Name' }, { label: 'Tenant' }, { label: 'Queue' },
    { label: 'Class' }, { label: 'State' }, { label: 'GPUs', class: 'num', title: 'held (running) or asked for: members × GPUs each' },
    { label: 'Age', class: 'num', title: 'since submission' }, { label: 'Reason / message' },
  ];
  const { table: tbl, tbody } = table(cols, 'jobs');
  const info = h('span', { class: 'muted pager-info' });
  const newest = h('button', { type: 'button', class: 'btn small', text: '« Newest', on: { click: () => page([]) } });
  const newer = h('button', { type: 'button', class: 'btn small', text: '‹ Newer', on: { click: () => page(cursors.slice(0, -1)) } });
  const older = h('button', { type: 'button', class: 'btn small', text: 'Older ›', on: { click: () => {
    if (lastPage && lastPage.next_before) page([...cursors, String(lastPage.next_before)]);
  } } });
  const errorBox = h('div', { class: 'inline-error', hidden: true });

  fill(root,
    h('div', { class: 'toolbar filters' }, stateSel, tenantSel, queueSel, classSel, reasonSel, reset,
      h('span', { class: 'spacer' }), gotoForm),
    errorBox,
    card('Jobs', h('div', { class: 'table-wrap' }, tbl),
      h('span', { class: 'pager' }, info, sizeSel, newest, newer, older)));

  function readParams(p) {
    const o = {};
    for (const f of FILTERS) o[f] = p.get(f) || '';
    o.limit = SIZES.includes(Number(p.get('limit'))) ? Number(p.get('limit')) : 50;
    o.before = p.get('before') || '';
    return o;
  }

  function syncControls() {
    for (const f of FILTERS) {
      const s = controls[f];
      if (!s) continue;
      if (params[f] && ![...s.options].some((o) => o.value === params[f])) {
        s.appendChild(h('option', { value: params[f], text: params[f] }));
      }
      s.value = params[f];
      s.classList.toggle('active', !!params[f]);
    }
    sizeSel.value = String(params.limit);
  }
  syncControls();

  // Changing a filter starts again at the newest page; the filters live in the URL.
  function apply(change) {
    const next = { ...params, ...change, before: '' };
    cursors = [];
    location.hash = hashOf(next);
  }

  function page(stack) {
    cursors = stack;
    location.hash = hashOf({ ...params, before: stack.length ? stack[stack.length - 1] : '' });
  }

  function hashOf(p) {
    return `#/jobs${api.query({ ...Object.fromEntries(FILTERS.map((f) => [f, p[f]])), limit: p.limit === 50 ? '' : p.limit, before: p.before })}`;
  }

  let optionsLoaded = 0;
  async function loadOptions() {
    // The tenants and queues to filter by change rarely: read them at most every 30 s.
    if (Date.now() - optionsLoaded < 30000) return;
    optionsLoaded = Date.now();
    const [t, q] = await Promise.all([
      admin && !readOnly ? api.get('/v1/tenants') : Promise.resolve(null),
      api.get('/v1/queues'),
    ]);
    const paths = q.queues.map((x) => x.path).filter((p) => p !== '/');
    if (t && tenantSel) refillSelect(tenantSel, 'Tenant', t.tenants.map((x) => x.name));
    if (readOnly && tenantSel) refillSelect(tenantSel, 'Tenant', paths.filter((p) => !paths.some((o) => o.startsWith(`${p}/`))));
    refillSelect(queueSel, 'Queue', paths);
    syncControls();
  }

  function refillSelect(sel, label, values) {
    const cur = sel.value;
    fill(sel, h('option', { value: '', text: `${label}: all` }), values.map((v) => h('option', { value: v, text: v })));
    sel.value = cur;
  }

  async function refresh() {
    loadOptions().catch(() => { optionsLoaded = 0; });
    const q = { order: 'desc', limit: params.limit, before: params.before };
    for (const f of FILTERS) q[f] = params[f];
    const asked = params;
    let res;
    try {
      res = await api.get(`/v1/jobs${api.query(q)}`);
    } catch (e) {
      if (asked !== params) return;
      if (e.status === 400) { // a filter the server refuses: say so, keep the page
        errorBox.textContent = `The server refused this filter: ${e.message}`;
        errorBox.hidden = false;
        fill(tbody, h('tr', null, h('td', { colspan: cols.length }, empty('No jobs'))));
        return;
      }
      throw e;
    }
    if (asked !== params) return; // the filters or the page changed meanwhile: a newer read follows
    errorBox.hidden = true;
    lastPage = res;
    render(res.jobs);
  }

  function render(jobs) {
    const t = now();
    if (!jobs.length) {
      fill(tbody, h('tr', null, h('td', { colspan: cols.length }, empty(params.before ? 'No older jobs' : 'No jobs match these filters'))));
    } else {
      fill(tbody, jobs.map((j) => {
        const link = `#/jobs/${j.id}`;
        const g = jobGpus(j);
        const why = j.state === 'pending' ? (j.reason || '') : (j.message || '');
        const whyTitle = j.state === 'pending' ? (j.pending_reason || j.reason || '') : (j.message || '');
        return h('tr', { class: 'clickable', dataset: { id: j.id, tenant: j.tenant, state: j.state }, on: { click: (e) => {
          if (e.target.closest('a')) return;
          location.hash = link;
        } } },
        h('td', { class: 'num mono' }, h('a', { href: link, text: j.id })),
        h('td', { class: 'name' }, h('a', { href: link, text: j.name || '(unnamed)' }),
          j.array_id ? h('span', { class: 'tag', text: `array ${j.array_id}[${j.array_index}]` }) : null),
        h('td', { text: j.tenant }),
        h('td', { class: 'mono small', text: j.queue }),
        h('td', { text: j.priority_class }),
        h('td', null, stateBadge(j.state)),
        h('td', { class: 'num', text: g.text }),
        h('td', { class: 'num', text: duration(t - j.submitted_at), title: dateTime(j.submitted_at) }),
        h('td', { class: 'reason', title: whyTitle || null },
          j.state === 'pending' && why ? h('span', { class: 'reason-code', text: why }) : why));
      }));
    }
    const start = cursors.length;
    info.textContent = jobs.length ? `page ${start + 1} · ${jobs.length} job${jobs.length === 1 ? '' : 's'} · #${jobs[0].id}–#${jobs[jobs.length - 1].id}` : '';
    newest.disabled = !params.before;
    newer.disabled = !params.before;
    older.disabled = !lastPage || !lastPage.next_before;
  }

  return {
    interval: 1000,
    refresh,
    update(r) {
      params = readParams(r.params);
      // A cursor that is not the top of our stack came from outside (link, back button).
      if (!params.before) cursors = [];
      else if (cursors[cursors.length - 1] !== params.before) {
        const i = cursors.indexOf(params.before);
        cursors = i >= 0 ? cursors.slice(0, i + 1) : [params.before];
      }
      syncControls();
    },
  };
}
