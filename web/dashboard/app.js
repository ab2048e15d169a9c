// The dashboard's shell: sign-in, the hash router (#/overview, #/queues, #/jobs?state=...,
// #/jobs/ID, #/nodes, #/usage, #/audit) and the poller that refreshes the open page.
// A read-only server (`tessera kube`: whoami says read_only) offers no action and is asked for
// nothing it does not have; an open one (no token_required in /v1/info) skips the sign-in, one
// behind Kubernetes tokens takes one (`kubectl create token NAME`) and shows whose it is.
import * as api from './api.js';
import * as overview from './page-overview.js';
import * as queues from './page-queues.js';
import * as jobs from './page-jobs.js';
import * as job from './page-job.js';
import * as nodes from './page-nodes.js';
import * as audit from './page-audit.js';
import * as usage from './page-usage.js';

const PAGES = { overview, queues, jobs, job, nodes, usage, audit };
const $ = (id) => document.getElementById(id);

let who = null;      // {admin, tenant, read_only?, server?, user?} of the signed-in token
let info = null;     // GET /v1/info: {server, read_only, token_required}
let current = null;  // {name, inst, gen, timer, busy, again}
let generation = 0;

// --- sign-in ----------------------------------------------------------------------------------

function showSignin(message) {
  stopPage();
  who = null;
  $('shell').hidden = true;
  $('signin').hidden = false;
  const err = $('signin-error');
  err.textContent = message || '';
  err.hidden = !message;
  $('signin-token').value = '';
  $('signin-token').focus();
  if (info && info.read_only && info.token_required) {
    // tessera kube behind Kubernetes' own authentication: a ServiceAccount's token.
    $('signin-label').textContent = 'Kubernetes token';
    $('signin-hint').textContent = 'A token the cluster issued (kubectl create token NAME): you see the jobs of the namespaces whose pods it may list.';
  }
}

async function signIn(token) {
  const me = await api.get('/v1/whoami', { token });
  if (me.read_only && !me.user) api.clearToken(); // an open read-only server: nothing to keep
  else api.setToken(token);
  enter(me);
}

function enter(me) {
  who = me;
  const ro = !!me.read_only;
  $('signin').hidden = true;
  $('shell').hidden = false;
  document.body.classList.toggle('read-only', ro);
  $('nav-audit').hidden = !me.admin || ro;
  // A read-only server (tessera kube) keeps no accounting: no /v1/usage to ask.
  $('nav-usage').hidden = ro;
  $('signout').hidden = ro && !me.user;
  if (ro) {
    const server = me.server ? `tessera ${me.server}` : 'tessera';
    $('who').textContent = me.user ? `${me.user} · read-only` : `${server} · read-only`;
    $('who').title = me.user
      ? `${server} serves a read-only view, as Kubernetes' RBAC lets ${me.user} see it (change the cluster with its own tools)`
      : `${server} serves a read-only view: no token, no actions (change the cluster with its own tools)`;
  } else {
    $('who').textContent = me.admin ? 'admin' : `tenant ${me.tenant}`;
    $('who').title = me.admin ? 'Signed in with the admin token' : `Signed in as tenant ${me.tenant}`;
  }
  route();
}

// Whether the server is a read-only one (`tessera kube`), asked of /v1/info, which both servers
// answer without a token (a refused request would be logged in the browser's console). Only
// then is /v1/whoami asked without a token.
async function readOnlyServer() {
  try {
    info = await api.get('/v1/info', { token: '' });
    if (!info || !info.read_only || info.token_required) return null;
    const me = await api.get('/v1/whoami', { token: '' });
    return me && me.read_only ? me : null;
  } catch {
    return null;
  }
}

$('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const token = $('signin-token').value.trim();
  if (!token) return;
  $('signin-submit').disabled = true;
  try {
    await signIn(token);
  } catch (e) {
    api.clearToken();
    const why = e.status === 401 ? `Sign-in refused: the server does not know this token (${e.message}).`
      : `Sign-in failed: ${e.message}`;
    showSignin(why);
  } finally {
    $('signin-submit').disabled = false;
  }
});

$('signout').addEventListener('click', () => {
  api.clearToken();
  showSignin('');
});

api.onUnauthorized((msg) => {
  api.clearToken();
  showSignin(`Signed out: the server refused the token (${msg}).`);
});

// --- routing ----------------------------------------------------------------------------------

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?');
  const parts = path.split('/').filter(Boolean);
  const params = new URLSearchParams(qs || '');
  // A job's page takes a job id and nothing else: it goes into API paths.
  if (parts[0] === 'jobs' && /^\d+$/.test(parts[1] || '')) return { name: 'job', id: parts[1], params };
  if (parts[0] === 'jobs' && parts[1]) return { name: 'jobs', params };
  if (!PAGES[parts[0]]) return { name: 'overview', params };
  return { name: parts[0], params };
}

function stopPage() {
  if (!current) return;
  clearTimeout(current.timer);
  if (current.inst.unmount) current.inst.unmount();
  current = null;
}

function route() {
  if (!who) return;
  const r = parseHash();
  if ((r.name === 'audit' && (!who.admin || who.read_only)) || (r.name === 'usage' && who.read_only)) {
    location.hash = '#/overview';
    return;
  }
  for (const a of document.querySelectorAll('.sidebar a.nav')) {
    a.classList.toggle('active', a.dataset.page === (r.name === 'job' ? 'jobs' : r.name));
  }
  // Same page, other parameters (filters, paging): the page updates itself.
  if (current && current.name === r.name && current.inst.update && r.name !== 'job') {
    current.inst.update(r);
    kick();
    return;
  }
  stopPage();
  const root = $('page');
  root.replaceChildren();
  root.className = `page page-${r.name}`;
  setBanner('');
  const ctx = { who, kick, setTitle: (t) => { $('page-title').textContent = t; document.title = `${t} · Tessera`; } };
  const mod = PAGES[r.name];
  ctx.setTitle(mod.title);
  const inst = mod.mount(root, r, ctx);
  current = { name: r.name, inst, gen: ++generation, timer: 0, busy: false, again: false };
  tick(current.gen);
}

window.addEventListener('hashchange', route);

// --- polling ----------------------------------------------------------------------------------

// Refreshes the open page, then again after its interval; never two refreshes at once, and
// none while the tab is hidden.
async function tick(gen) {
  const c = current;
  if (!c || c.gen !== gen) return;
  clearTimeout(c.timer);
  if (c.busy) { c.again = true; return; }
  if (!document.hidden) {
    c.busy = true;
    try {
      await c.inst.refresh();
      if (c.gen === generation) { setBanner(''); setLive(true); }
    } catch (e) {
      if (e.status !== 401 && c.gen === generation) {
        setBanner(`Could not refresh: ${e.message}`);
        setLive(false);
      }
    } finally {
      c.busy = false;
    }
  }
  if (current !== c) return;
  if (c.again) { c.again = false; tick(gen); return; }
  c.timer = setTimeout(() => tick(gen), c.inst.interval || 5000);
}

function kick() { if (current) tick(current.gen); }

document.addEventListener('visibilitychange', () => { if (!document.hidden) kick(); });

function setBanner(text) {
  const b = $('banner');
  b.textContent = text;
  b.hidden = !text;
}

let liveTimer = 0;
function setLive(ok) {
  const l = $('live');
  l.classList.toggle('stale', !ok);
  l.classList.add('pulse');
  clearTimeout(liveTimer);
  liveTimer = setTimeout(() => l.classList.remove('pulse'), 400);
  const d = new Date();
  l.textContent = ok ? `live · ${d.toLocaleTimeString('en-GB')}` : 'stale';
}

// --- start ------------------------------------------------------------------------------------

(async () => {
  const token = api.getToken();
  if (!token) {
    const me = await readOnlyServer();
    if (me) enter(me);
    else showSignin('');
    return;
  }
  try {
    await signIn(token);
  } catch (e) {
    api.clearToken();
    showSignin(e.status === 401 ? `Signed out: the server refused the stored token (${e.message}).` : `Sign-in failed: ${e.message}`);
  }
})();
