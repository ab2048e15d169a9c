// The dashboard (/ui/) served read-only by `tessera kube`, in a real browser: a Kubernetes API
// emulator (`tessera-kube-emulator`, 4 nodes × 8 GPUs), `tessera kube` scheduling it, and the
// example 4-pod gang created with the real kubectl (deploy/kubernetes/examples/bare-pod-gang.yaml).
// Checks: no sign-in and a "tessera kube · read-only" badge, no Audit page, the jobs table lists
// the pod group (and filters it), its page shows its placement and, instead of events and logs,
// the kubectl commands that show them; no action button on any page; the node grid has the 32
// GPUs, all the gang's, in its tenant's legend colour; the overview's charts are drawn with data;
// no request for an endpoint kube lacks, no failed request and no console error.
// The gang's pods run 30 s on the emulator's fake kubelet (then the pod group is gone): every
// check that needs it placed runs within that window.
// TESSERA_UI_DIR=web serves the dashboard from disk (a proxy in front of kube, which has no
// --ui-dir) instead of the binary's built-in copy.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  chartsDrawn,
  run, launchBrowser, newPage, check, screenshotDir, tesseraBinary, emulatorBinary, tempDir, sleep,
  repo,
} from './harness.mjs';

const t0 = Date.now();
const dir = tempDir('tessera-kube-browser-');
const kubeconfig = path.join(dir, 'emu.kubeconfig');
const procs = [];
const shots = screenshotDir();
if (shots) fs.mkdirSync(shots, { recursive: true });
const state = {};

function start(name, args, bin = tesseraBinary()) {
  const log = fs.openSync(path.join(dir, `${name}.log`), 'a');
  const proc = spawn(bin, args, { stdio: ['ignore', log, log] });
  proc.logName = name;
  procs.push(proc);
  return proc;
}

async function waitFile(file, proc, what) {
  const deadline = Date.now() + 15000;
  while (!fs.existsSync(file) || fs.readFileSync(file, 'utf8').trim() === '') {
    if (proc.exitCode !== null) throw new Error(`${what} exited: ${fs.readFileSync(path.join(dir, `${proc.logName}.log`), 'utf8')}`);
    if (Date.now() > deadline) throw new Error(`${what} did not start in 15 s`);
    await sleep(50);
  }
  return fs.readFileSync(file, 'utf8').trim();
}

async function getJson(url) {
  const res = await fetch(url);
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

// TESSERA_UI_DIR: /ui/* from that folder's dashboard/ (the chart library from web/node_modules),
// everything else passed on to kube.
function startUiProxy(target, uiDir) {
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    if (u.pathname.startsWith('/ui/')) {
      const rel = u.pathname.slice(4) || 'index.html';
      const file = rel === 'vendor/chart.umd.min.js'
        ? path.join(repo, 'web', 'node_modules', 'chart.js', 'dist', 'chart.umd.min.js')
        : path.join(uiDir, 'dashboard', rel);
      if (rel.includes('..') || !fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store' });
      res.end(fs.readFileSync(file));
      return;
    }
    const up = http.request({ host: target.split(':')[0], port: Number(target.split(':')[1]), path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', () => { res.writeHead(502); res.end(); });
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function go(page, hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

async function shot(page, name) {
  if (!shots) return;
  await page.evaluate(() => document.fonts.ready);
  await page.screenshot({ path: path.join(shots, `kube-dashboard-${name}.png`) });
}

// No action anywhere on the page: no hold/release/cancel/drain/resume button, no sign-out.
async function noActions(page, where) {
  const labels = await page.$$eval('button', (bs) => bs.filter((b) => b.offsetParent !== null).map((b) => b.textContent.trim()));
  const actions = labels.filter((l) => /^(hold|release|cancel|drain|resume|sign out)$/i.test(l));
  check(actions.length === 0, `${where}: no action buttons, found ${actions.join(', ')}`);
}

const browserReady = launchBrowser();
let browser = null;

await run([
  ['the emulator, tessera kube and the example gang (kubectl apply)', async () => {
    const emu = start('emulator', ['--listen', '127.0.0.1:0', '--nodes', '4', '--gpus-per-node', '8',
      '--racks', '2', '--kubeconfig-out', kubeconfig], emulatorBinary());
    await waitFile(kubeconfig, emu, 'tessera-kube-emulator');
    const kube = start('kube', ['kube', '--kubeconfig', kubeconfig, '--listen', '127.0.0.1:0',
      '--topology-labels', 'network.topology.nvidia.com/leaf',
      '--addr-file', path.join(dir, 'addr'), '--history-interval', '1']);
    state.kube = await waitFile(path.join(dir, 'addr'), kube, 'tessera kube');
    state.url = `http://${state.kube}`;
    if (process.env.TESSERA_UI_DIR) {
      state.proxy = await startUiProxy(state.kube, path.resolve(process.env.TESSERA_UI_DIR));
      state.url = `http://127.0.0.1:${state.proxy.address().port}`;
      console.log(`     the dashboard from ${process.env.TESSERA_UI_DIR} (a proxy in front of kube)`);
    }
    execFileSync('kubectl', ['--kubeconfig', kubeconfig, 'apply', '-f',
      path.join(repo, 'deploy', 'kubernetes', 'examples', 'bare-pod-gang.yaml')], { stdio: 'pipe', timeout: 20000 });
    const deadline = Date.now() + 15000;
    for (;;) {
      const { jobs } = await getJson(`http://${state.kube}/v1/jobs?state=running`).catch(() => ({ jobs: [] }));
      const j = jobs.find((x) => x.name === 'team-a/bare-gang');
      if (j && j.allocation.length === 4) { state.job = j; break; }
      if (Date.now() > deadline) throw new Error('the gang was not placed in 15 s');
      await sleep(100);
    }
    state.placedAt = Date.now();
    browser = await browserReady;
    check(state.job.tenant === 'team-a', `tenant is the namespace's queue: ${state.job.tenant}`);
  }],

  ['the dashboard opens read-only: no sign-in, the kube badge, no Audit page', async () => {
    const page = await newPage(browser);
    page.setDefaultTimeout(8000);
    state.page = page;
    page.requests = [];
    page.failed = [];
    page.on('request', (r) => page.requests.push(new URL(r.url()).pathname));
    page.on('response', (r) => { if (r.status() >= 400) page.failed.push(`${r.status()} ${r.url()}`); });
    await page.goto(`${state.url}/ui/`);
    await page.waitForSelector('#shell:not([hidden])');
    await page.waitForSelector('#page .stat');
    check(await page.isHidden('#signin'), 'no sign-in form');
    check(await page.textContent('#who') === 'tessera kube · read-only', `badge: ${await page.textContent('#who')}`);
    check(await page.locator('.sidebar a.nav[data-page="audit"]:visible').count() === 0, 'no Audit link');
    check(await page.isHidden('#signout'), 'no sign-out');
    await go(page, '#/audit');
    await page.waitForFunction(() => location.hash === '#/overview');
  }],

  ['the jobs table lists the pod group and filters it', async () => {
    const page = state.page;
    const row = `table.jobs tbody tr[data-id="${state.job.id}"]`;
    await go(page, '#/jobs');
    await page.waitForSelector(`${row}[data-state="running"]`);
    check((await page.textContent(`${row} td.name`)).includes('team-a/bare-gang'), 'the row names the pod group');
    check(await page.getAttribute(row, 'data-tenant') === 'team-a', 'tenant team-a');
    await page.waitForSelector('#filter-tenant option[value="team-a"]', { state: 'attached' });
    await page.selectOption('#filter-tenant', 'team-a');
    await page.waitForFunction(() => location.hash.includes('tenant=team-a'));
    await page.waitForSelector(row);
    await page.selectOption('#filter-state', 'pending');
    await page.waitForFunction(() => location.hash.includes('state=pending') && document.querySelector('table.jobs tbody tr[data-id]') === null
      && /No jobs match/.test(document.querySelector('table.jobs tbody').textContent));
    await page.click('text=Clear filters');
    await page.waitForSelector(row);
    await noActions(page, 'jobs');
    await shot(page, 'jobs');
  }],

  ["the pod group's page: placement, and kubectl in place of events and logs", async () => {
    const page = state.page;
    await page.click(`table.jobs tbody tr[data-id="${state.job.id}"] td.name a`);
    await page.waitForFunction((id) => location.hash === `#/jobs/${id}`, state.job.id);
    await page.waitForSelector('table.placement tbody tr[data-node="gpu-node-0003"]');
    const nodes = await page.$$eval('table.placement tbody tr[data-node]', (rs) => rs.map((r) => r.dataset.node).sort());
    check(nodes.join() === 'gpu-node-0000,gpu-node-0001,gpu-node-0002,gpu-node-0003', `placement: ${nodes}`);
    check((await page.textContent('.job-title')).includes('team-a/bare-gang'), 'the title names the pod group');
    check(await page.locator('.job-head .state-running').count() === 1, 'state running');
    const note = await page.textContent('#kube-note');
    check(note.includes('kubectl describe pods -n team-a -l scheduling.x-k8s.io/pod-group=bare-gang'), `describe: ${note}`);
    check(note.includes('kubectl logs -n team-a -l scheduling.x-k8s.io/pod-group=bare-gang'), `logs: ${note}`);
    check(await page.locator('table.events, #job-log').count() === 0, 'no events table, no log');
    await sleep(1600); // one more poll
    await noActions(page, 'job');
    await shot(page, 'job');
  }],

  ["the node grid: 32 GPUs, the gang's 32 in its tenant's colour", async () => {
    const page = state.page;
    await go(page, '#/nodes');
    await page.waitForSelector(`.seg[data-job="${state.job.id}"]`);
    check(await page.locator('.gpu-cell').count() === 32, `32 GPU cells, got ${await page.locator('.gpu-cell').count()}`);
    const segs = await page.$$eval(`.gpu-cell .seg[data-job="${state.job.id}"]`, (ss) => ss.map((s) => getComputedStyle(s).backgroundColor));
    const legend = await page.$eval('#gpu-legend .legend-item[data-tenant="team-a"] .swatch', (el) => getComputedStyle(el).backgroundColor);
    check(segs.length === 32, `32 cells hold the gang, got ${segs.length}`);
    check(segs.every((c) => c === legend), `every cell has team-a's legend colour ${legend}: ${[...new Set(segs)]}`);
    // Two racks of two nodes: a heading over each rack's nodes, in order.
    const racks = await page.$$eval('#node-grid > *', (els) => els.map((e) => (e.classList.contains('rack-head') ? `rack:${e.dataset.rack}` : e.dataset.rack)));
    const heads = racks.filter((r) => r.startsWith('rack:'));
    check(heads.length === 2, `a heading per rack: ${racks}`);
    check(racks.every((r, i) => r.startsWith('rack:') || `rack:${r}` === [...racks.slice(0, i)].reverse().find((x) => x.startsWith('rack:'))), `nodes under their rack's heading: ${racks}`);
    check(await page.locator('#reservations').count() === 0, 'no reservations card on kube');
    await noActions(page, 'nodes');
    await shot(page, 'nodes');
  }],

  ['the queues page and the overview charts, drawn with data', async () => {
    const page = state.page;
    await go(page, '#/queues');
    await page.waitForSelector('table.queues tbody tr[data-path="team-a"]');
    await noActions(page, 'queues');
    await go(page, '#/overview');
    await chartsDrawn(page, 4, { minPoints: 2 });
    const labels = await page.evaluate(() => Chart.getChart(document.querySelector('#page canvas')).data.datasets.map((d) => d.label));
    check(labels.includes('team-a'), `GPUs by tenant: ${labels}`);
    await noActions(page, 'overview');
    await shot(page, 'overview');
    console.log(`     checked ${((Date.now() - state.placedAt) / 1000).toFixed(1)} s after the gang was placed`);
  }],

  ['no request for what kube lacks, no failed request, no console error', async () => {
    const page = state.page;
    const lacking = page.requests.filter((p) => /^\/v1\/(audit|tenants|usage)|^\/v1\/jobs\/[^/]+\/(events|logs)/.test(p));
    check(lacking.length === 0, `asked for ${[...new Set(lacking)].join(', ')}`);
    check(page.failed.length === 0, page.failed.join('\n'));
    check(page.errors.length === 0, page.errors.join('\n'));
    console.log(`     ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
  }],
], async () => {
  if (browser) await browser.close(); else await browserReady.then((b) => b.close()).catch(() => {});
  if (state.proxy) state.proxy.close();
  for (const p of procs.reverse()) {
    if (p.exitCode !== null) continue;
    p.kill('SIGTERM');
    const exited = new Promise((r) => p.once('exit', r));
    if (await Promise.race([exited.then(() => true), sleep(5000).then(() => false)]) === false) p.kill('SIGKILL');
  }
});
