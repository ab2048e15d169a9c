// Nodes: every GPU of the cluster as a cell, grouped by node (and nodes by rack) and coloured by
// the tenant whose job holds it; a fractional share fills its part of the cell. GPUs held by
// jobs this token may not see are "other tenants" (grey); a reserved GPU is outlined, and the
// reservations are listed below the grid.
import * as api from './api.js';
import {
  h, fill, card, stat, num, gpus, tenantColor, OTHER_COLOR, FREE_COLOR, table, dateTime, empty,
} from './ui.js';

export const title = 'Nodes';

export function mount(root, route, ctx) {
  const admin = ctx.who.admin;
  const canDrain = admin && !ctx.who.read_only; // a read-only server (tessera kube) takes no action
  const stats = h('div', { class: 'stats' });
  const legend = h('div', { class: 'legend', id: 'gpu-legend' });
  const grid = h('div', { class: 'node-grid', id: 'node-grid' });
  const actionError = h('div', { class: 'inline-error', hidden: true });
  const reserved = h('div', { id: 'reservations' });
  // tessera kube has no reservations: the card is left out there.
  const hasReservations = !ctx.who.read_only;
  fill(root, stats, actionError,
    card('GPUs by tenant', h('div', null, legend, grid),
      h('span', { class: 'muted', text: 'one cell per GPU · hover a cell for its jobs' })),
    hasReservations ? card('Reservations', reserved,
      h('span', { class: 'muted', text: 'GPUs set aside for a tenant or user over a window' })) : null);

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
    let reservedGpus = 0;
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
        if (g.reservation) {
          reservedGpus++;
          lines.push(`reserved: ${g.reservation}${g.reservation_active ? '' : ' (its window is yet to begin)'}`);
        }
        const marks = (g.jobs.length ? '' : ' free') +
          (g.reservation ? ` reserved${g.reservation_active ? ' active' : ''}` : '');
        return h('div', {
          class: `gpu-cell${marks}`,
          title: lines.join('\n'),
          dataset: { node: node.name, gpu: g.index, jobs: g.jobs.join(' '), reservation: g.reservation || '' },
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
      return h('div', { class: `node-card node-${node.state}`, dataset: { node: node.name, state: node.state, rack: node.rack || '' } },
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
      h('span', { class: 'legend-item' }, h('span', { class: 'swatch drained' }), 'draining / drained node'),
      reservedGpus ? h('span', { class: 'legend-item' }, h('span', { class: 'swatch reserved' }), 'reserved') : null);
    fill(grid, cards.length ? byRack(n.nodes, cards) : h('div', { class: 'empty', text: 'No nodes' }));
    if (hasReservations) await showReservations(reservedGpus);
  }

  // With more than one rack, a heading per rack over its nodes (nodes come rack by rack).
  function byRack(nodes, cards) {
    const racks = new Set(nodes.map((x) => x.rack || ''));
    if (racks.size < 2) return cards;
    const out = [];
    let last = null;
    nodes.forEach((node, i) => {
      const rack = node.rack || '';
      if (rack !== last) {
        const count = nodes.filter((x) => (x.rack || '') === rack);
        const gpuCount = count.reduce((a, x) => a + x.gpus.length, 0);
        out.push(h('div', { class: 'rack-head', dataset: { rack } },
          h('span', { class: 'node-name', text: `rack ${rack || '?'}` }),
          h('span', { class: 'muted small', text: ` ${count.length} node${count.length === 1 ? '' : 's'} · ${gpuCount} GPUs` })));
        last = rack;
      }
      out.push(cards[i]);
    });
    return out;
  }

  async function showReservations(reservedGpus) {
    const r = await api.get('/v1/reservations');
    if (!r.reservations.length) {
      fill(reserved, empty('No reservations'));
      return;
    }
    const { table: tbl, tbody } = table([
      { label: 'Name' }, { label: 'For' }, { label: 'State' }, { label: 'Start' }, { label: 'End' },
      { label: 'GPUs', class: 'num' }, { label: 'Busy', title: 'jobs not its own on its GPUs' },
    ], 'reservations');
    for (const x of r.reservations) {
      const who = x.tenant ? (x.user ? `${x.user}@${x.tenant}` : x.tenant) : 'another tenant';
      tbody.append(h('tr', { dataset: { reservation: x.name, state: x.state } },
        h('td', { class: 'mono', text: x.name }),
        h('td', { text: who }),
        h('td', null, h('span', { class: `badge state-${x.state === 'active' ? 'running' : x.state === 'ended' ? 'succeeded' : 'pending'}`, text: x.state })),
        h('td', { text: dateTime(x.start) }),
        h('td', { text: dateTime(x.end) }),
        h('td', { class: 'num', text: String(x.gpus.length), title: x.gpus.join(' ') }),
        h('td', { text: x.busy_jobs.length ? x.busy_jobs.join(', ') : '–' })));
    }
    fill(reserved, tbl, h('div', { class: 'muted small', text: `${reservedGpus} GPU${reservedGpus === 1 ? '' : 's'} held by reservations in force (outlined in the grid)` }));
  }

  return { interval: 3000, refresh };
}
