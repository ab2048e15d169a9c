// One job: its spec, placement, history (events) and the tail of a rank's log, followed live
// (the log from the byte where the last read stopped, X-Log-Offset). On a read-only server
// (`tessera kube`) a job is a pod group: its state, placement and reason, no actions, and a
// note that its events and logs are Kubernetes' (no /events or /logs is asked for).
import * as api from './api.js';
import { h, fill, card, table, empty, duration, dateTime, gpus, now, stateBadge, tenantColor } from './ui.js';
import { jobGpus } from './page-jobs.js';

export const title = 'Job';

const TAIL = 64 * 1024;
const KEEP = 256 * 1024; // characters of log kept on the page
const FINISHED = ['succeeded', 'failed', 'cancelled', 'preempted', 'timeout'];

export function mount(root, route, ctx) {
  const id = route.id;
  const readOnly = !!ctx.who.read_only;
  let job = null;
  let gone = false; // read-only: the pod group is no longer there (its pods finished or went)
  let unseen = 0; // 403 or 404: the job is another tenant's, or there is none
  let rank = 0;
  let log = null; // {rank, attempt, next, decoder}

  const heading = h('h2', { class: 'job-title', text: `Job #${id}` });
  const badge = h('span');
  const actions = h('span', { class: 'actions' });
  const actionError = h('div', { class: 'inline-error', hidden: true });
  const summary = h('dl', { class: 'kv' });
  const { table: placeTbl, tbody: placeBody } = table([{ label: 'Rank', class: 'num' }, { label: 'Node' }, { label: 'GPUs' }, { label: 'Share', class: 'num' }], 'placement');
  const { table: evTbl, tbody: evBody } = table([{ label: 'Time' }, { label: 'Event' }, { label: 'Details' }], 'events');
  const rankSel = h('select', { class: 'input', id: 'log-rank', 'aria-label': 'Rank', on: { change: () => { rank = Number(rankSel.value); log = null; fill(pre); ctx.kick(); } } });
  const follow = h('input', { type: 'checkbox', checked: true, id: 'log-follow' });
  const logInfo = h('span', { class: 'muted' });
  const pre = h('pre', { class: 'log', id: 'job-log', tabindex: '0' });
  const logNote = h('div', { class: 'empty', hidden: true });
  const spec = h('pre', { class: 'spec' });
  const kubeNote = h('div', { class: 'kube-note', id: 'kube-note' });
  const goneNote = h('div', { class: 'empty gone-note', hidden: true });

  if (readOnly) {
    fill(root,
      h('div', { class: 'job-head' },
        h('a', { href: '#/jobs', class: 'back', text: '← Jobs' }), heading, badge),
      goneNote,
      h('div', { class: 'two-col' },
        card('Summary', h('div', null, summary, h('details', { class: 'spec-details' }, h('summary', { text: 'Full spec' }), spec))),
        h('div', { class: 'stack' },
          card('Placement (pods)', h('div', { class: 'table-wrap' }, placeTbl)),
          card('Events and logs', kubeNote))));
  } else fill(root,
    h('div', { class: 'job-head' },
      h('a', { href: '#/jobs', class: 'back', text: '← Jobs' }), heading, badge, h('span', { class: 'spacer' }), actions),
    actionError,
    h('div', { class: 'two-col' },
      card('Summary', h('div', null, summary, h('details', { class: 'spec-details' }, h('summary', { text: 'Full spec' }), spec))),
      h('div', { class: 'stack' },
        card('Placement', h('div', { class: 'table-wrap' }, placeTbl)),
        card('History', h('div', { class: 'table-wrap events-wrap' }, evTbl)))),
    card('Log', h('div', null, logNote, pre),
      h('span', { class: 'card-tools' }, logInfo, h('label', { class: 'inline' }, 'Rank ', rankSel),
        h('label', { class: 'inline' }, follow, ' follow'))));

  async function act(what) {
    if (what === 'cancel' && !window.confirm(`Cancel job #${id}?`)) return;
    actionError.hidden = true;
    try {
      await api.post(`/v1/jobs/${id}/${what}`);
    } catch (e) {
      actionError.textContent = `${what} refused: ${e.message}`;
      actionError.hidden = false;
    }
    ctx.kick();
  }

  function renderActions(j) {
    const held = j.state === 'pending' && j.reason === 'Held';
    const btns = [];
    if (j.state === 'pending' && !held) btns.push(['hold', 'Hold']);
    if (held) btns.push(['release', 'Release']);
    if (!FINISHED.includes(j.state)) btns.push(['cancel', 'Cancel']);
    const key = btns.map((b) => b[0]).join();
    if (actions.dataset.key === key) return;
    actions.dataset.key = key;
    fill(actions, btns.map(([a, label]) => h('button', {
      type: 'button', class: `btn small${a === 'cancel' ? ' danger' : ''}`, text: label, on: { click: () => act(a) },
    })));
  }

  // A job this token may not see (403) or that does not exist (404): one message instead of the
  // page's panels, and no more requests, since the answer does not change while the page is open.
  function showUnseen(status) {
    unseen = status;
    fill(root,
      h('div', { class: 'job-head' }, h('a', { href: '#/jobs', class: 'back', text: '← Jobs' }), heading),
      h('div', { class: 'empty job-unseen', id: 'job-unseen', role: 'status',
        text: status === 403 ? `Job ${id} belongs to another tenant` : `No job ${id}` }));
  }

  function row(label, value, cls) {
    if (value === null || value === undefined || value === '') return null;
    return [h('dt', { text: label }), h('dd', { class: cls || null }, value)];
  }

  // The kubectl commands that show a job's pods' events and logs: by the label its convention
  // puts on them (scheduler-plugins', Kueue's), else by name (a Volcano gang's annotation
  // selects nothing; a lone pod).
  function renderKubeNote(j) {
    const k = j.kube || { namespace: 'NAMESPACE', selector: '', pods: ['POD'] };
    let describe;
    let logs;
    if (k.selector) {
      describe = `kubectl describe pods -n ${k.namespace} -l ${k.selector}`;
      logs = `kubectl logs -n ${k.namespace} -l ${k.selector} --prefix --all-containers`;
    } else {
      const pods = (k.pods || []).join(' ');
      describe = `kubectl describe pods -n ${k.namespace} ${pods}`;
      logs = (k.pods || []).length === 1
        ? `kubectl logs -n ${k.namespace} ${pods} --all-containers`
        : `for p in ${pods}; do kubectl logs -n ${k.namespace} $p --prefix --all-containers; done`;
    }
    const key = `${describe}\n${logs}`;
    if (kubeNote.dataset.key === key) return;
    kubeNote.dataset.key = key;
    fill(kubeNote,
      h('p', null, 'This scheduler only places pods: their events (the scheduler\'s included) and logs are Kubernetes\'. Ask the cluster:'),
      h('div', { class: 'cmd-label', text: 'Events, conditions and exit codes' }),
      h('pre', { class: 'cmd', text: describe }),
      h('div', { class: 'cmd-label', text: 'Logs' }),
      h('pre', { class: 'cmd', text: logs }));
  }

  function renderSummary(j) {
    const t = now();
    const s = j.spec || {};
    const res = s.resources || {};
    const gang = s.gang || { min: 1, max: 1 };
    // started_at is the last attempt's start: a job preempted or requeued keeps it while it
    // waits again, so whether it runs now is its state's to say; the wait before it is the
    // first attempt's only.
    const first = !(j.attempts > 1);
    const last = !first || j.state === 'pending' || j.state === 'preempted';
    let ran = null;
    if (j.started_at && j.state === 'running') ran = ['Running for', duration(t - j.started_at)];
    else if (j.started_at && j.finished_at) ran = ['Ran', duration(j.finished_at - j.started_at)];
    fill(summary,
      readOnly ? row('Pod group', j.name, 'mono') : null,
      row('Tenant', h('span', null, h('span', { class: 'swatch', style: { background: tenantColor(j.tenant) } }), j.tenant)),
      row('Queue', j.queue, 'mono'),
      row('Priority class', j.priority_class),
      row('Command', (s.command || []).map((c) => (/[\s"']/.test(c) ? JSON.stringify(c) : c)).join(' '), 'mono'),
      row('Gang', gang.min === gang.max ? `${gang.min} member${gang.min === 1 ? '' : 's'}` : `${gang.min}–${gang.max} members`),
      row('Per member', Object.entries(res).map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ')),
      row('GPUs', jobGpus(j).text),
      row('Submitted', `${dateTime(j.submitted_at)} (${duration(t - j.submitted_at)} ago)`),
      row(last ? 'Last started' : 'Started', !j.started_at ? null
        : `${dateTime(j.started_at)}${first ? ` (waited ${duration(j.started_at - j.submitted_at)})` : ''}`),
      row('Finished', j.finished_at ? dateTime(j.finished_at) : null),
      ran ? row(ran[0], ran[1]) : null,
      readOnly ? null : row('Attempts', String(j.attempts)),
      row('Preemptions', j.preemptions ? String(j.preemptions) : null),
      row('Exit code', j.exit_code === null ? null : String(j.exit_code), j.exit_code ? 'bad' : null),
      row('Waiting because', j.state === 'pending' && (j.pending_reason || j.reason) ? `${j.reason ? j.reason + ': ' : ''}${j.pending_reason || ''}` : null),
      row('Message', j.message || null),
      row('Array', j.array_id ? h('a', { href: `#/jobs?array=${j.array_id}`, text: `${j.array_id} [${j.array_index}]` }) : null));
    spec.textContent = JSON.stringify(s, null, 2);
  }

  function renderPlacement(j) {
    if (!j.allocation || !j.allocation.length) {
      fill(placeBody, h('tr', null, h('td', { colspan: 4 }, empty(j.state === 'pending' ? 'Not placed yet' : 'Holds no GPUs'))));
      return;
    }
    fill(placeBody, j.allocation.map((m) => h('tr', null,
      h('td', { class: 'num', text: m.rank }),
      h('td', { class: 'mono' }, h('a', { href: '#/nodes', text: m.node })),
      h('td', { class: 'mono', text: m.gpus.length ? m.gpus.join(', ') : '–' }),
      h('td', { class: 'num', text: m.gpu_milli === 1000 ? 'whole GPU' + (m.gpus.length === 1 ? '' : 's') : `${gpus(m.gpu_milli / 1000)} of a GPU` }))));
  }

  let eventsKey = '';
  function renderEvents(events) {
    const key = events.map((e) => `${e.at}${e.type}`).join();
    if (key === eventsKey) return;
    eventsKey = key;
    if (!events.length) {
      fill(evBody, h('tr', null, h('td', { colspan: 3 }, empty('No events'))));
      return;
    }
    fill(evBody, events.map((e) => h('tr', { dataset: { type: e.type } },
      h('td', { class: 'nowrap mono small', text: dateTime(e.at) }),
      h('td', null, h('span', { class: `event ev-${e.type.toLowerCase()}`, text: e.type })),
      h('td', { text: e.message }))));
  }

  function renderRanks(j) {
    const n = Math.max((j.spec && j.spec.gang && j.spec.gang.max) || 1, (j.allocation || []).length, 1);
    if (rankSel.options.length === n) return;
    fill(rankSel, Array.from({ length: n }, (_, i) => h('option', { value: String(i), text: String(i) })));
    rankSel.value = String(Math.min(rank, n - 1));
    rankSel.disabled = n === 1;
  }

  async function refreshLog(j) {
    if (!j.attempts) {
      logNote.textContent = 'No log yet: the job has not started.';
      logNote.hidden = false;
      pre.hidden = true;
      logInfo.textContent = '';
      return;
    }
    if (log && !follow.checked) return;
    const q = { rank, tail_bytes: TAIL };
    if (log && log.rank === rank) q.offset = log.next;
    let res;
    try {
      res = await api.get(`/v1/jobs/${id}/logs${api.query(q)}`, { raw: true });
    } catch (e) {
      if (e.status === 401) throw e;
      logNote.textContent = `No log for rank ${rank}: ${e.message}`;
      logNote.hidden = false;
      pre.hidden = true;
      return;
    }
    const offset = Number(res.headers.get('X-Log-Offset') || 0);
    const attempt = res.headers.get('X-Log-Attempt') || '';
    const bytes = new Uint8Array(await res.arrayBuffer());
    // A new attempt writes a new log: start over from its tail.
    if (log && (log.attempt !== attempt || log.rank !== rank)) {
      log = null;
      fill(pre);
      return refreshLog(j);
    }
    if (!log) log = { rank, attempt, next: offset, decoder: new TextDecoder() };
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    if (bytes.length) {
      const text = log.decoder.decode(bytes, { stream: true });
      pre.appendChild(document.createTextNode(offset > 0 && !pre.firstChild ? `… (${offset} earlier bytes not shown)\n${text}` : text));
      if (pre.textContent.length > KEEP) pre.textContent = pre.textContent.slice(-KEEP);
    }
    log.next = offset + bytes.length;
    logNote.hidden = true;
    pre.hidden = false;
    if (!pre.firstChild) pre.appendChild(document.createTextNode(''));
    logInfo.textContent = `attempt ${attempt} · ${log.next.toLocaleString('en-US')} bytes`;
    if (atBottom || bytes.length === log.next) pre.scrollTop = pre.scrollHeight;
  }

  function renderPods(j) {
    if (!j.allocation || !j.allocation.length) {
      fill(placeBody, h('tr', null, h('td', { colspan: 4 }, empty(j.state === 'pending' ? 'No pod bound yet' : 'Holds no GPUs'))));
      return;
    }
    fill(placeBody, j.allocation.map((m) => h('tr', { dataset: { node: m.node } },
      h('td', { class: 'num', text: m.rank }),
      h('td', { class: 'mono' }, h('a', { href: '#/nodes', text: m.node }), m.pod ? h('div', { class: 'muted small', text: `pod ${m.pod}` }) : null),
      h('td', { class: 'mono', text: m.gpus.length ? m.gpus.join(', ') : '–' }),
      h('td', { class: 'num', text: m.gpu_milli === 1000 ? 'whole GPU' + (m.gpus.length === 1 ? '' : 's') : `${gpus(m.gpu_milli / 1000)} of a GPU` }))));
  }

  async function refreshReadOnly() {
    if (gone || unseen) return;
    let j;
    try {
      j = await api.get(`/v1/jobs/${id}`);
    } catch (e) {
      if (e.status === 403) return showUnseen(403);
      if (e.status !== 404) throw e;
      // The pod group's pods finished or were deleted: the scheduler forgets it. Say so once
      // and ask no more.
      gone = true;
      goneNote.textContent = job
        ? `Pod group ${job.name} is gone: its pods finished or were deleted (kubectl keeps what is left of them).`
        : `No pod group #${id}: the scheduler does not know it (finished pods are forgotten).`;
      goneNote.hidden = false;
      if (!job) fill(badge);
      return;
    }
    job = j;
    ctx.setTitle(`Job #${j.id}`);
    heading.textContent = `${j.name || '(unnamed)'} `;
    heading.appendChild(h('span', { class: 'muted mono', text: `#${j.id}` }));
    fill(badge, stateBadge(j.state));
    renderSummary(j);
    renderPods(j);
    renderKubeNote(j);
  }

  async function refresh() {
    if (readOnly) return refreshReadOnly();
    if (unseen) return;
    let j;
    let ev;
    try {
      // The first time, the job alone: a job this token may not see costs one refused request.
      const first = job ? null : await api.get(`/v1/jobs/${id}`);
      [j, ev] = await Promise.all([first || api.get(`/v1/jobs/${id}`), api.get(`/v1/jobs/${id}/events`)]);
    } catch (e) {
      if (e.status === 403 || e.status === 404) return showUnseen(e.status);
      throw e;
    }
    job = j;
    ctx.setTitle(`Job #${j.id}`);
    heading.textContent = `${j.name || '(unnamed)'} `;
    heading.appendChild(h('span', { class: 'muted mono', text: `#${j.id}` }));
    fill(badge, stateBadge(j.state));
    renderActions(j);
    renderSummary(j);
    renderPlacement(j);
    renderEvents(ev.events || []);
    renderRanks(j);
    await refreshLog(j);
  }

  return {
    get interval() { return gone || unseen ? 60000 : job && FINISHED.includes(job.state) ? 5000 : 1500; },
    refresh,
  };
}
