// Benchmark of the dashboard (/ui/) against its speed targets, in a real Chromium (Debian's,
// through web/node_modules/playwright-core, as the browser tests use it) and a real
// `tessera serve` on loopback. It prints numbers and asserts nothing about time:
//   node scripts/dashboard_bench.mjs --tessera build/release/src/tessera [--out results.json]
//     [--jobs 100000] [--finished 10000] [--runs 5] [--keep]
// Measures:
//   1. first load (target < 1 s): page.goto(/ui/) in a fresh context (empty cache), sign-in
//      with the admin token, until the overview's four charts are drawn (the browser test's
//      condition); median and max of --runs runs; then a warm reload (ETag revalidation) each.
//   2. the jobs page with --jobs jobs in the database (target < 300 ms a page): --jobs pending
//      jobs as arrays of 10,000 (8 virtual GPUs: all but 8 wait), after --finished jobs that
//      ran and finished (arrays of `true`, serve --retain-finished 0: the API reads them from
//      SQLite); the time from a click on "Older ›" to the next page's rows, for 10 pages from
//      the newest and 10 pages among the finished jobs, and from a filter's change to its rows;
//      and the API's own time for the same reads (node fetch, keep-alive), median of 20.
//   3. the size of every asset the dashboard loads (target < 500 kB compressed): the encoded
//      (gzip) body sizes the browser received, each file and their sum.
// Results go to stdout as a table, and as JSON to --out FILE. The server gets a fresh temp dir
// (removed at the end unless --keep); every job it started is cancelled, and any process left
// whose working directory is in that dir is killed.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { launchBrowser, startServer, api, sleep, tempDir, tesseraBinary, chartsDrawn } from '../tests/browser/harness.mjs';

const argv = process.argv;
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i > 0 ? argv[i + 1] : dflt;
};
const OUT = opt('out', null);
const JOBS = Number(opt('jobs', 100000));
const FINISHED = Number(opt('finished', 10000));
const RUNS = Number(opt('runs', 5));
const KEEP = argv.includes('--keep');
const ADMIN = 's3cret';
const TENANTS = ['team-a', 'team-b', 'team-c', 'team-d', 'team-e'];
const ARRAY = 10000; // tasks per array submission (one transaction each)

const startedAt = new Date();
const tStart = Date.now();
const log = (...a) => console.log(`[${((Date.now() - tStart) / 1000).toFixed(1).padStart(6)} s]`, ...a);

// --- statistics -------------------------------------------------------------------------------
function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
  const r = (x) => Math.round(x * 10) / 10;
  return { n: s.length, median: r(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2), p90: r(q(0.9)), max: r(s[s.length - 1]), min: r(s[0]) };
}

// --- the browser's side -----------------------------------------------------------------------

// Page-side timestamps: when the sign-in form shows, when it is submitted. With a token, the
// form is filled and submitted as soon as it shows (the form's own submit handler runs), so that
// the time is the dashboard's, not Playwright's (its fill and click take some 300-700 ms of
// round trips and actionability checks on a 2-core machine).
function instrument(token) {
  document.addEventListener('submit', () => { window.__submitAt = performance.now(); }, true);
  const mark = () => {
    const f = document.getElementById('signin');
    if (!f || f.hidden || window.__formAt) return;
    window.__formAt = performance.now();
    if (token) {
      document.getElementById('signin-token').value = token;
      document.getElementById('signin-form').requestSubmit();
    }
  };
  new MutationObserver(mark).observe(document, { subtree: true, attributes: true, attributeFilter: ['hidden'] });
}

async function newContext(browser, token = null) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  await context.addInitScript(instrument, token);
  const page = await context.newPage();
  page.errors = [];
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.setDefaultTimeout(30000);
  return { context, page };
}

// Records the responses under /ui/: url, status, encoded body size (what came over the wire).
function recordResponses(page, base) {
  const list = [];
  const pending = [];
  page.on('response', (res) => {
    if (!res.url().startsWith(`${base}/ui/`)) return;
    pending.push((async () => {
      const sizes = await res.request().sizes().catch(() => null);
      list.push({
        file: res.url().slice(base.length).split('#')[0], status: res.status(),
        encoding: (await res.allHeaders())['content-encoding'] || 'identity',
        bytes: sizes ? sizes.responseBodySize : null,
      });
    })());
  });
  return { list, done: () => Promise.all(pending) };
}

async function firstLoads(browser, server) {
  const cold = [];
  const warm = [];
  let assets = null;
  for (let i = 0; i < RUNS; i++) {
    const { context, page } = await newContext(browser, ADMIN);
    const rec = recordResponses(page, server.url);
    const t0 = Date.now();
    await page.goto(`${server.url}/ui/`, { waitUntil: 'commit' });
    await chartsDrawn(page, 4);
    const wall = Date.now() - t0;
    const t = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      return { response_end: nav.responseEnd, dom_content_loaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, form_shown: window.__formAt, submitted: window.__submitAt, charts: window.__chartsAt };
    });
    await rec.done();
    const run = { wall_ms: wall, ...Object.fromEntries(Object.entries(t).map(([k, v]) => [k, Math.round(v)])) };
    run.submit_to_charts_ms = run.charts - run.submitted;
    run.signin_ms = run.submitted - run.form_shown; // the in-page fill and submit: ~0
    cold.push(run);
    if (!assets) assets = rec.list.slice();
    log(`first load ${i + 1}: ${wall} ms; in the page: charts at ${run.charts} ms (form at ${run.form_shown} ms, load event ${run.load} ms, submit→charts ${run.submit_to_charts_ms} ms)`);

    // Warm: the same context reloads (cache revalidated by ETag; the token is in sessionStorage).
    const rec2 = recordResponses(page, server.url);
    const t1 = Date.now();
    await page.reload({ waitUntil: 'commit' });
    await chartsDrawn(page, 4);
    const wallWarm = Date.now() - t1;
    await rec2.done();
    const c304 = rec2.list.filter((r) => r.status === 304).length;
    warm.push({ wall_ms: wallWarm, charts: Math.round(await page.evaluate(() => window.__chartsAt)), responses: rec2.list.length, not_modified: c304 });
    log(`  warm reload: ${wallWarm} ms (${c304}/${rec2.list.length} answered 304)`);
    if (page.errors.length) log(`  console errors: ${page.errors.join(' | ')}`);
    await context.close();
  }
  return { cold, warm, assets };
}

// Times one action on the jobs page in the page itself: from the action (a click on "Older ›",
// a filter's change, a hash) to the table holding new rows that fit `expect`, and to the next
// frame after that. Rows rendered before the route changed (a poll with the old parameters)
// do not count: the table's first row at the hashchange is the old one.
async function timeJobs(page, action, expect = {}) {
  return page.evaluate(async ({ action, expect }) => {
    const tbody = document.querySelector('table.jobs tbody');
    const firstId = () => { const r = tbody.querySelector('tr[data-id]'); return r ? r.dataset.id : null; };
    const idBefore = firstId();
    let old = tbody.firstElementChild;
    const hashChanged = new Promise((r) => window.addEventListener('hashchange', () => { old = tbody.firstElementChild; r(); }, { once: true }));
    let changed = false;
    hashChanged.then(() => { changed = true; });
    const fits = () => {
      if (!changed || tbody.firstElementChild === old) return false;
      const rows = [...tbody.querySelectorAll('tr[data-id]')];
      if (expect.empty) return rows.length === 0;
      if (!rows.length) return false;
      if (expect.newId && rows[0].dataset.id === idBefore) return false;
      if (expect.firstId && rows[0].dataset.id !== String(expect.firstId)) return false;
      for (const r of rows) {
        if (expect.state && !expect.state.split(',').includes(r.dataset.state)) return false;
        if (expect.tenant && r.dataset.tenant !== expect.tenant) return false;
        if (expect.reason && (r.querySelector('td.reason .reason-code') || {}).textContent !== expect.reason) return false;
      }
      return true;
    };
    const rendered = new Promise((resolve) => {
      const mo = new MutationObserver(() => { if (fits()) { mo.disconnect(); resolve(performance.now()); } });
      mo.observe(tbody, { childList: true });
    });
    const t0 = performance.now();
    if (action.older) {
      const b = [...document.querySelectorAll('.pager button')].find((x) => x.textContent.includes('Older'));
      if (!b || b.disabled) throw new Error('no enabled "Older" button');
      b.click();
    } else if (action.filter) {
      const s = document.getElementById(`filter-${action.filter}`);
      if (![...s.options].some((o) => o.value === action.value)) throw new Error(`no option ${action.value} in #filter-${action.filter}`);
      s.value = action.value;
      s.dispatchEvent(new Event('change'));
    } else {
      location.hash = action.hash;
    }
    const tDom = await Promise.race([rendered, new Promise((_, rej) => setTimeout(() => rej(new Error(`no rows for ${JSON.stringify(action)} ${JSON.stringify(expect)}`)), 20000))]);
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    const tPaint = performance.now();
    return { dom_ms: tDom - t0, frame_ms: tPaint - t0, first: firstId(), rows: tbody.querySelectorAll('tr[data-id]').length };
  }, { action, expect });
}

async function jobsPage(browser, server, info) {
  const { context, page } = await newContext(browser, ADMIN);
  const out = {};
  const t0 = Date.now();
  await page.goto(`${server.url}/ui/#/jobs`, { waitUntil: 'commit' });
  await page.waitForSelector('table.jobs tbody tr[data-id]');
  out.open_ms = Date.now() - t0;
  log(`jobs page opened (cold, with sign-in) in ${out.open_ms} ms`);
  // The filters' tenant options come from /v1/tenants.
  await page.waitForFunction(() => [...document.querySelectorAll('#filter-tenant option')].some((o) => o.value === 'team-c'));

  const series = async (label, n, fn) => {
    const xs = [];
    for (let i = 0; i < n; i++) xs.push(await fn(i));
    out[label] = { dom: stats(xs.map((x) => x.dom_ms)), frame: stats(xs.map((x) => x.frame_ms)), runs: xs.map((x) => Math.round(x.dom_ms)) };
    log(`${label}: median ${out[label].dom.median} ms, p90 ${out[label].dom.p90}, max ${out[label].dom.max} (to the next frame: median ${out[label].frame.median})`);
  };
  const home = (hash = '#/jobs', expect = { firstId: info.newest }) => timeJobs(page, { hash }, expect);

  // 10 pages back from the newest (pending jobs, in memory); the page opened on the newest.
  await series('older_newest', 10, () => timeJobs(page, { older: true }, { newId: true }));
  // 10 pages back among the finished jobs (in SQLite only, --retain-finished 0).
  if (info.finishedTop) {
    await home(`#/jobs?before=${info.finishedTop + 1}`, { firstId: info.finishedTop });
    await series('older_finished', 10, () => timeJobs(page, { older: true }, { newId: true }));
  }
  // Filters, each from the unfiltered first page, 10 times.
  const filters = [
    ['filter_state_pending', 'state', 'pending', { state: 'pending' }],
    ['filter_tenant_team-c', 'tenant', 'team-c', { tenant: 'team-c' }],
    [`filter_reason_${info.reason}`, 'reason', info.reason, { reason: info.reason }],
  ];
  if (info.rareReason) filters.push([`filter_reason_${info.rareReason}_(no match)`, 'reason', info.rareReason, {}]);
  if (info.finishedTop) filters.push(['filter_state_succeeded', 'state', 'succeeded', { state: 'succeeded' }]);
  for (const [label, name, value, expect] of filters) {
    // A filter that matches nothing shows "No jobs match": wait for that instead.
    if (!(await api(server, ADMIN, 'GET', `/v1/jobs?limit=1&${name}=${value}`)).jobs.length) expect.empty = true;
    await series(label, 10, async () => {
      await home();
      return timeJobs(page, { filter: name, value }, expect);
    });
  }
  if (page.errors.length) log(`console errors: ${page.errors.join(' | ')}`);
  out.console_errors = page.errors;
  await context.close();
  return out;
}

// --- the server's side ------------------------------------------------------------------------

async function timeApi(server, pathname, n = 20) {
  const xs = [];
  let bytes = 0;
  for (let i = 0; i < n + 2; i++) {
    const t0 = performance.now();
    const res = await fetch(server.url + pathname, { headers: { Authorization: `Bearer ${ADMIN}` } });
    const body = await res.arrayBuffer();
    const dt = performance.now() - t0;
    if (!res.ok) throw new Error(`GET ${pathname}: ${res.status}`);
    bytes = body.byteLength;
    if (i >= 2) xs.push(dt); // two to warm the connection
  }
  return { ...stats(xs), bytes };
}

// Raw (encoded) size of a /ui/ file asked with Accept-Encoding: gzip, and its decoded size.
function rawSize(url, encoding) {
  return new Promise((resolve, reject) => {
    http.get(url, { headers: { 'Accept-Encoding': encoding } }, (res) => {
      let n = 0;
      res.on('data', (c) => { n += c.length; });
      res.on('end', () => resolve({ bytes: n, encoding: res.headers['content-encoding'] || 'identity' }));
    }).on('error', reject);
  });
}

async function waitIdle(server, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { jobs } = await api(server, ADMIN, 'GET', '/v1/jobs?state=pending,running&limit=1');
    if (!jobs.length) return true;
    await sleep(500);
  }
  return false;
}

// Processes whose working directory is inside `dir` (the jobs this server started).
function processesIn(dir) {
  const pids = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p) || Number(p) === process.pid) continue;
    try {
      if (fs.readlinkSync(`/proc/${p}/cwd`).startsWith(dir)) pids.push(Number(p));
    } catch { /* gone, or not ours to read */ }
  }
  return pids;
}

// --- main -------------------------------------------------------------------------------------

const results = {
  started_at: startedAt.toISOString(), cores: os.cpus().length, cpu: os.cpus()[0] && os.cpus()[0].model,
  node: process.version, tessera: path.resolve(tesseraBinary()), jobs: JOBS, finished_jobs: FINISHED,
};
const dir = tempDir('tessera-bench-');
const serveArgs = ['--virtual-gpus', '8', '--history-interval', '1', '--max-pending-per-tenant', String(JOBS + 1000),
  '--retain-finished', '0'];
results.serve_args = serveArgs;
log(`tessera serve ${serveArgs.join(' ')} in ${dir}; ${results.cores} cores`);
const server = await startServer(serveArgs, { dir });
let browser = null;
const arrays = []; // first task id of each array submitted
let exitCode = 0;

try {
  for (const name of TENANTS) await api(server, ADMIN, 'POST', '/v1/tenants', { name }).catch(() => {});

  // Finished jobs first (the lowest ids): arrays of `true` at 1/8 GPU each, run to the end.
  const info = {};
  if (FINISHED > 0) {
    const t0 = Date.now();
    for (let i = 0, k = 0; i < FINISHED; i += 2000, k++) {
      const n = Math.min(2000, FINISHED - i);
      const j = await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'done', tenant: TENANTS[k % TENANTS.length], array: `0-${n - 1}`, resources: { gpus: 0.125 }, command: ['true'] });
      arrays.push(j.id);
    }
    const idle = await waitIdle(server, 300000);
    const top = (await api(server, ADMIN, 'GET', '/v1/jobs?limit=1&order=desc')).jobs[0];
    info.finishedTop = top.id;
    results.finished_setup_s = (Date.now() - t0) / 1000;
    log(`${FINISHED} finished jobs in ${results.finished_setup_s} s${idle ? '' : ' (not all finished in 300 s)'}; newest id ${top.id}, ${top.state}`);
  }

  // The pending jobs: arrays of 10,000 `sleep 3600`, one GPU each (8 run, the rest wait).
  const t1 = Date.now();
  const perCall = [];
  let lastN = 0;
  for (let i = 0, k = 0; i < JOBS; i += ARRAY, k++) {
    const n = Math.min(ARRAY, JOBS - i);
    lastN = n;
    const c0 = Date.now();
    const j = await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'sweep', tenant: TENANTS[k % TENANTS.length], array: `0-${n - 1}`, resources: { gpus: 1 }, command: ['sleep', '3600'] });
    perCall.push(Date.now() - c0);
    if (j.array_index !== 0 || !j.id) throw new Error(`unexpected answer to an array: ${JSON.stringify(j).slice(0, 300)}`);
    arrays.push(j.id);
  }
  const newest = (await api(server, ADMIN, 'GET', '/v1/jobs?limit=1&order=desc')).jobs[0];
  const expectTop = arrays[arrays.length - 1] + lastN - 1;
  if (newest.id !== expectTop) throw new Error(`newest job ${newest.id}, want ${expectTop}`);
  info.newest = newest.id;
  results.submit = { arrays: perCall.length, total_s: (Date.now() - t1) / 1000, per_array_ms: stats(perCall), newest_id: newest.id };
  log(`${JOBS} jobs submitted as ${perCall.length} arrays in ${results.submit.total_s} s (median ${results.submit.per_array_ms.median} ms an array); newest id ${newest.id}`);

  // The reason most pending jobs give now (it changes: "Resources" just after submission,
  // "Reservation" later), and one that none gives (a filter that scans everything).
  const pickReason = async () => {
    const sample = (await api(server, ADMIN, 'GET', '/v1/jobs?state=pending&order=desc&limit=200')).jobs;
    const counts = {};
    for (const j of sample) if (j.reason) counts[j.reason] = (counts[j.reason] || 0) + 1;
    for (const [r] of Object.entries(counts).sort((a, b) => b[1] - a[1])) {
      if ((await api(server, ADMIN, 'GET', `/v1/jobs?reason=${r}&limit=1`)).jobs.length) return { reason: r, counts };
    }
    return { reason: 'Resources', counts };
  };
  for (const r of ['Quota', 'Held', 'Unrunnable', 'Dependency']) {
    if (!(await api(server, ADMIN, 'GET', `/v1/jobs?reason=${r}&limit=1`)).jobs.length) { info.rareReason = r; break; }
  }
  await sleep(3000); // a few history samples with all of it
  ({ reason: info.reason, counts: results.reasons_in_newest_200 } = await pickReason());

  // 4. API times (node fetch, keep-alive), median of 20.
  const mid = info.newest - Math.floor(JOBS / 2);
  const apiPaths = [
    '/v1/jobs?order=desc&limit=50',
    `/v1/jobs?order=desc&limit=50&before=${mid}`,
    ...(info.finishedTop ? [`/v1/jobs?order=desc&limit=50&before=${Math.floor(info.finishedTop / 2)}`] : []),
    '/v1/jobs?order=desc&limit=50&state=pending',
    '/v1/jobs?order=desc&limit=50&tenant=team-c',
    `/v1/jobs?order=desc&limit=50&reason=${info.reason}`,
    ...(info.rareReason ? [`/v1/jobs?order=desc&limit=50&reason=${info.rareReason}`] : []),
    ...(info.finishedTop ? ['/v1/jobs?order=desc&limit=50&state=succeeded', `/v1/jobs?order=desc&limit=50&state=succeeded&before=${Math.floor(info.finishedTop / 2)}`] : []),
    `/v1/history?since=${Math.floor(Date.now() / 1000) - 3600}&until=${Math.floor(Date.now() / 1000)}&step=10`,
    '/v1/nodes', '/v1/queues', '/v1/tenants', '/v1/whoami',
  ];
  results.api = {};
  for (const p of apiPaths) {
    results.api[p] = await timeApi(server, p);
    log(`API ${p}: median ${results.api[p].median} ms, max ${results.api[p].max} ms, ${results.api[p].bytes} B`);
  }

  browser = await launchBrowser();
  results.browser = browser.version();

  // 1. First load, and 3. the assets it loaded.
  const fl = await firstLoads(browser, server);
  results.first_load = {
    wall: stats(fl.cold.map((r) => r.wall_ms)),
    in_page: stats(fl.cold.map((r) => r.charts)),
    form_shown: stats(fl.cold.map((r) => r.form_shown)),
    load_event: stats(fl.cold.map((r) => r.load)),
    submit_to_charts: stats(fl.cold.map((r) => r.submit_to_charts_ms)),
    runs: fl.cold,
  };
  results.warm_reload = { wall: stats(fl.warm.map((r) => r.wall_ms)), in_page: stats(fl.warm.map((r) => r.charts)), runs: fl.warm };
  const assets = [];
  for (const a of fl.assets.sort((x, y) => x.file.localeCompare(y.file))) {
    const plain = await rawSize(server.url + a.file, 'identity');
    const gz = await rawSize(server.url + a.file, 'gzip');
    assets.push({ file: a.file, status: a.status, browser_encoding: a.encoding, browser_bytes: a.bytes, gzip_bytes: gz.encoding === 'gzip' ? gz.bytes : null, plain_bytes: plain.bytes });
  }
  results.assets = {
    files: assets,
    browser_total: assets.reduce((s, a) => s + (a.browser_bytes || 0), 0),
    gzip_total: assets.reduce((s, a) => s + (a.gzip_bytes ?? a.plain_bytes), 0),
    plain_total: assets.reduce((s, a) => s + a.plain_bytes, 0),
  };

  // 2. The jobs page.
  info.reason = (await pickReason()).reason;
  results.jobs_page = await jobsPage(browser, server, info);
} catch (e) {
  console.error(`benchmark failed: ${e.stack || e}`);
  results.error = String(e.stack || e);
  exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  // Cancel every array (and anything else still running), then stop the server.
  try {
    for (const id of arrays) await api(server, ADMIN, 'POST', `/v1/jobs/${id}/cancel?array=true`).catch(() => {});
    const { jobs } = await api(server, ADMIN, 'GET', '/v1/jobs?state=pending,running&limit=1000');
    for (const j of jobs) await api(server, ADMIN, 'POST', `/v1/jobs/${j.id}/cancel?force=true`).catch(() => {});
    await waitIdle(server, 15000);
  } catch (e) { console.error(`cleanup: ${e.message}`); }
  await server.stop();
  const left = processesIn(dir);
  for (const pid of left) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
  if (left.length) log(`killed ${left.length} leftover job processes`);
  if (!KEEP) fs.rmSync(dir, { recursive: true, force: true });
}
results.run_s = (Date.now() - tStart) / 1000;

// --- report -----------------------------------------------------------------------------------
const row = (label, s, target = '') => console.log(`${label.padEnd(58)} ${String(s.median).padStart(8)} ${String(s.p90 ?? '').padStart(8)} ${String(s.max).padStart(8)}  ${target}`);
console.log(`\nDashboard benchmark, ${results.started_at}, ${results.cores} cores (${results.cpu}), ${results.browser || 'no browser'}`);
console.log(`${JOBS} pending jobs + ${FINISHED} finished (serve ${serveArgs.join(' ')}); ms unless said`);
console.log(`${''.padEnd(58)} ${'median'.padStart(8)} ${'p90'.padStart(8)} ${'max'.padStart(8)}`);
if (results.first_load) {
  row(`first load, cold: goto→signed in→charts, node wall (${RUNS})`, results.first_load.wall, 'target < 1000');
  row('  in the page: navigation start→charts drawn', results.first_load.in_page);
  row('    of which: navigation start→sign-in form shown', results.first_load.form_shown);
  row('    of which: submit→charts drawn', results.first_load.submit_to_charts);
  row('    (load event)', results.first_load.load_event);
  row('warm reload (ETag): reload→charts, node wall', results.warm_reload.wall);
  row('  in the page: navigation start→charts drawn', results.warm_reload.in_page);
}
if (results.jobs_page) {
  const jp = results.jobs_page;
  console.log(`jobs page opened cold with sign-in: ${jp.open_ms} ms`);
  for (const [k, v] of Object.entries(jp)) if (v && v.dom) row(`jobs ${k} (click→rows; 10)`, v.dom, 'target < 300');
}
if (results.api) for (const [p, v] of Object.entries(results.api)) row(`API ${p.length > 52 ? `${p.slice(0, 49)}...` : p}`, v);
if (results.assets) {
  console.log('assets loaded by the first load (bytes over the wire in the browser / gzip / plain):');
  for (const a of results.assets.files) console.log(`  ${a.file.padEnd(34)} ${String(a.browser_bytes).padStart(8)} ${String(a.gzip_bytes ?? '-').padStart(8)} ${String(a.plain_bytes).padStart(8)}  ${a.browser_encoding}`);
  console.log(`  ${'total'.padEnd(34)} ${String(results.assets.browser_total).padStart(8)} ${String(results.assets.gzip_total).padStart(8)} ${String(results.assets.plain_total).padStart(8)}  target < 500000 compressed`);
}
console.log(`run time ${results.run_s.toFixed(1)} s`);
if (OUT) {
  fs.writeFileSync(OUT, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`results written to ${OUT}`);
}
process.exit(exitCode);
