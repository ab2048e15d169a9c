// Audit (admin only): who changed what, and every refused attempt (/v1/audit).
import * as api from './api.js';
import { h, fill, card, table, empty, dateTime } from './ui.js';

export const title = 'Audit log';

export function mount(root, route, ctx) {
  let params = read(route.params);
  const actor = h('input', { class: 'input', type: 'search', id: 'audit-actor', placeholder: 'Actor (admin, tenant name)', 'aria-label': 'Actor', value: params.actor });
  const target = h('input', { class: 'input', type: 'search', id: 'audit-target', placeholder: 'Target (job 12, tenant x)', 'aria-label': 'Target', value: params.target });
  const refused = h('input', { type: 'checkbox', id: 'audit-refused', checked: params.refused });
  const limit = h('select', { class: 'input', 'aria-label': 'Entries' }, [100, 500, 1000].map((n) => h('option', { value: String(n), text: `last ${n}` })));
  limit.value = String(params.limit);
  const { table: tbl, tbody } = table([{ label: 'Time' }, { label: 'Actor' }, { label: 'Method' }, { label: 'Path' }, { label: 'Status', class: 'num' }, { label: 'Target' }], 'audit');
  const count = h('span', { class: 'muted' });
  fill(root,
    h('div', { class: 'toolbar filters' }, actor, target, h('label', { class: 'inline check' }, refused, ' refused only'), limit),
    card('Audit log', h('div', { class: 'table-wrap' }, tbl), count));

  let debounce = 0;
  const changed = () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      params = { actor: actor.value.trim(), target: target.value.trim(), refused: refused.checked, limit: Number(limit.value) };
      history.replaceState(null, '', `#/audit${api.query({ actor: params.actor, target: params.target, refused: params.refused ? 'true' : '', limit: params.limit === 100 ? '' : params.limit })}`);
      ctx.kick();
    }, 250);
  };
  actor.addEventListener('input', changed);
  target.addEventListener('input', changed);
  refused.addEventListener('change', changed);
  limit.addEventListener('change', changed);

  function read(p) {
    return { actor: p.get('actor') || '', target: p.get('target') || '', refused: p.get('refused') === 'true', limit: [100, 500, 1000].includes(Number(p.get('limit'))) ? Number(p.get('limit')) : 100 };
  }

  async function refresh() {
    const q = api.query({ limit: params.limit, actor: params.actor, target: params.target, refused: params.refused ? 'true' : '' });
    const res = await api.get(`/v1/audit${q}`);
    const rows = res.entries;
    count.textContent = `${rows.length} entr${rows.length === 1 ? 'y' : 'ies'}`;
    if (!rows.length) {
      fill(tbody, h('tr', null, h('td', { colspan: 6 }, empty('No entries match'))));
      return;
    }
    fill(tbody, rows.map((e) => h('tr', { class: e.status >= 400 ? 'refused' : null, dataset: { status: e.status } },
      h('td', { class: 'nowrap mono small', text: dateTime(e.at) }),
      h('td', { text: e.actor || '(unknown token)' }),
      h('td', { class: 'mono', text: e.method }),
      h('td', { class: 'mono', text: e.path }),
      h('td', { class: 'num' }, h('span', { class: `status s${String(e.status)[0]}xx`, text: e.status })),
      h('td', null, jobLink(e.target)))));
  }

  return { interval: 5000, refresh };
}

// "job 12" links to the job's page.
function jobLink(target) {
  const m = /^job (\d+)$/.exec(target || '');
  return m ? h('a', { href: `#/jobs/${m[1]}`, text: target }) : (target || '');
}
