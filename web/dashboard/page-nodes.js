// Nodes: every GPU of the cluster as a cell, grouped by node and coloured by the tenant whose
// job holds it; a fractional share fills its part of the cell. GPUs held by jobs this token may
// not see are "other tenants" (grey).
import * as api from './api.js';
import { h, fill, card, stat, num, gpus, tenantColor, OTHER_COLOR, FREE_COLOR } from './ui.js';

export const title = 'Nodes';

export function mount(root, route, ctx) {
  const admin = ctx.who.admin;
  const canDrain = admin && !ctx.who.read_only; // a read-only server (tessera kube) takes no action
  const stats = h('div', { class: 'stats' });
  const legend = h('div', { class: 'legend', id: 'gpu-legend' });
  const grid = h('div', { class: 'node-grid', id: 'node-grid' });
  const actionError = h('div', { class: 'inline-error', hidden: true });
  fill(root, stats, actionError,
    card('GPUs by tenant', h('div', null, legend, grid),
      h('span', { class: 'muted', text: 'one cell per GPU · hover a cell for its jobs' })));

  async function drain(node, yes) {
    if (!window.confirm(`${yes ? 'Drain' : 'Resume'} node ${node}?`)) return;
    actionError.hidden = true;
    try {
      await api.post(`/v1/nodes/${encodeURIComponent(node)}/${yes ? 'drain' : 'resume'}`);
    } catch (e) {
      actionError.textContent = `${yes ? 'drain' : 'resume'} refused: ${e.message}`;
      actionError.hidden = false;
    }
    ctx.kick();
  }

  async function refresh() {
    // Each GPU's holders come with their tenant and share (null tenant: another tenant's job,
    // which this token may not name).
    const n = await api.get('/v1/nodes');
    const perTenant = new Map();
    const running = new Set();
    let other = 0;
    let total = 0;
    let used = 0;
    let notUp = 0;
    const cards = n.nodes.map((node) => {
      if (node.state !== 'up') notUp++;
      const cells = node.gpus.map((g) => {
        total++;
        const usedMilli = 1000 - g.free_milli;
        used += usedMilli / 1000;
        const holders = g.holders || g.jobs.map((id) => ({ job: id, tenant: null, name: null, gpu_milli: 0 }));
        const known = holders.filter((x) => x.tenant);
        const unknown = holders.filter((x) => !x.tenant);
        const knownMilli = known.reduce((a, x) => a + x.gpu_milli, 0);
        const rest = Math.max(0, usedMilli - knownMilli);
        const segs = [];
        const lines = [`${node.name} GPU ${g.index}`];
        for (const x of known) {
          const t = x.tenant;
          running.add(x.job);
          perTenant.set(t, (perTenant.get(t) || 0) + x.gpu_milli / 1000);
          const text = `job ${x.job} ${x.name || ''} · tenant ${t} · ${gpus(x.gpu_milli / 1000)} GPU`;
          lines.push(text);
          segs.push(h('a', {
            class: 'seg', href: `#/jobs/${x.job}`, title: text,
            dataset: { tenant: t, job: x.job },
            style: { height: `${Math.min(100, x.gpu_milli / 10)}%`, background: tenantColor(t) },
          }));
        }
        if (rest > 0 && unknown.length) {
          other += rest / 1000;
          const text = `${unknown.length} job${unknown.length === 1 ? '' : 's'} of other tenants · ${gpus(rest / 1000)} GPU`;
          lines.push(text);
          segs.push(h('div', { class: 'seg other', title: text, dataset: { tenant: '' }, style: { height: `${rest / 10}%`, background: OTHER_COLOR } }));
        }
        if (g.free_milli > 0) lines.push(`free ${gpus(g.free_milli / 1000)}`);
        return h('div', {
          class: `gpu-cell${g.jobs.length ? '' : ' free'}`,
          title: lines.join('\n'),
          dataset: { node: node.name, gpu: g.index, jobs: g.jobs.join(' ') },
        },
        h('div', { class: 'gpu-fill' }, segs),
        h('span', { class: 'gpu-idx', text: g.index }));
      });
      const cpuUsed = node.cpu_milli - node.free_cpu_milli;
      const memUsed = node.mem_mib - node.free_mem_mib;
      const state = node.state !== 'up' ? h('span', { class: `badge node-${node.state}`, text: node.state }) : null;
      const act = canDrain ? h('button', {
        type: 'button', class: 'btn tiny ghost', text: node.state === 'up' ? 'Drain' : 'Resume',
        on: { click: () => drain(node.name, node.state === 'up') },
      }) : null;
      return h('div', { class: `node-card node-${node.state}`, dataset: { node: node.name, state: node.state } },
        h('div', { class: 'node-head' },
          h('span', { class: 'node-name', text: node.name }), state,
          h('span', { class: 'muted small', text: `${node.gpu_type} · ${node.gpus.length} GPU${node.gpus.length === 1 ? '' : 's'}` }),
          h('span', { class: 'spacer' }), act),
        h('div', { class: 'node-res muted small', text: `CPU ${num(cpuUsed / 1000, 1)}/${num(node.cpu_milli / 1000, 1)} · memory ${num(memUsed / 1024, 1)}/${num(node.mem_mib / 1024, 1)} GiB` }),
        h('div', { class: 'gpu-row' }, cells));
    });

    fill(stats,
      stat('Nodes', num(n.nodes.length), notUp ? `${notUp} draining or drained` : 'all up'),
      stat('GPUs', num(total)),
      stat('Allocated', gpus(used), total ? `${Math.round((used / total) * 100)}%` : null),
      stat('Free', gpus(total - used)),
      stat('Running jobs', num(running.size), admin ? null : 'of this tenant'));

    const names = [...perTenant.keys()].sort();
    fill(legend,
      names.map((t) => h('span', { class: 'legend-item', dataset: { tenant: t } },
        h('span', { class: 'swatch', style: { background: tenantColor(t) } }),
        h('span', { class: 'legend-name', text: t }),
        h('span', { class: 'muted', text: ` ${gpus(perTenant.get(t))}` }))),
      other > 0 ? h('span', { class: 'legend-item', dataset: { tenant: '' } },
        h('span', { class: 'swatch', style: { background: OTHER_COLOR } }), 'other tenants',
        h('span', { class: 'muted', text: ` ${gpus(other)}` })) : null,
      h('span', { class: 'legend-item' }, h('span', { class: 'swatch free', style: { background: FREE_COLOR } }), 'free',
        h('span', { class: 'muted', text: ` ${gpus(total - used)}` })),
      h('span', { class: 'legend-item' }, h('span', { class: 'swatch drained' }), 'draining / drained node'));
    fill(grid, cards.length ? cards : h('div', { class: 'empty', text: 'No nodes' }));
  }

  return { interval: 3000, refresh };
}
