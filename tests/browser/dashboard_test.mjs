// The dashboard (/ui/) in a real browser against a real `tessera serve`: sign-in (admin, tenant,
// a bad token), the jobs table and a job's page (history, live log), the GPU grid coloured by
// tenant, the queue tree, the overview's charts (drawn, with data) and the audit log, with no
// console error on any page. With --screenshots DIR it saves DIR/dashboard-<page>.png (1400×900):
// overview, queues, jobs, job, nodes, audit, and signin (a refused token).
// TESSERA_UI_DIR=web serves the dashboard from disk (serve --ui-dir) instead of the built-in copy.
import fs from 'node:fs';
import path from 'node:path';
import {
  chartsDrawn,
  run, launchBrowser, newPage, startServer, api, check, screenshotDir, sleep,
} from './harness.mjs';

const t0 = Date.now();
const args = ['--virtual-gpus', '8', '--history-interval', '1'];
if (process.env.TESSERA_UI_DIR) args.push('--ui-dir', path.resolve(process.env.TESSERA_UI_DIR));
const server = await startServer(args);
const browser = await launchBrowser();
const shots = screenshotDir();
if (shots) fs.mkdirSync(shots, { recursive: true });
const ADMIN = 's3cret';
const pages = [];
const state = {};

async function open(token) {
  const page = await newPage(browser);
  page.setDefaultTimeout(10000);
  pages.push(page);
  await page.goto(`${server.url}/ui/`);
  await page.waitForSelector('#signin:not([hidden])');
  await page.fill('#signin-token', token);
  await page.click('#signin-submit');
  return page;
}

async function go(page, hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

async function shot(page, name) {
  if (!shots) return;
  await page.evaluate(() => document.fonts.ready);
  await page.screenshot({ path: path.join(shots, `dashboard-${name}.png`) });
}

const cssColor = (page, selector) => page.$eval(selector, (el) => getComputedStyle(el).backgroundColor);

await run([
  ['tenants and a job that finishes', async () => {
    state.a = (await api(server, ADMIN, 'POST', '/v1/tenants', { name: 'team-a' })).token;
    state.b = (await api(server, ADMIN, 'POST', '/v1/tenants', { name: 'team-b' })).token;
    await api(server, ADMIN, 'POST', '/v1/tenants', { name: 'team-c' });
    // Finishes at once: the overview's "jobs finished" has something to draw.
    await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'warmup', tenant: 'team-b', gang: { min: 1, max: 1 }, resources: { gpus: 1 }, command: ['sh', '-c', 'echo done'] });
    // A gang of two that runs, and a job held back, which waits.
    await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'eval', tenant: 'team-c', gang: { min: 2, max: 2 }, resources: { gpus: 2 }, command: ['sh', '-c', 'sleep 60'] });
    const held = await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'pretrain', tenant: 'team-c', gang: { min: 1, max: 1 }, resources: { gpus: 8 }, command: ['sh', '-c', 'sleep 60'] });
    await api(server, ADMIN, 'POST', `/v1/jobs/${held.id}/hold`);
  }],

  ['a bad token is refused in the UI with a message, and no page shows', async () => {
    const page = await newPage(browser);
    pages.push(page);
    await page.goto(`${server.url}/ui/`);
    await page.fill('#signin-token', 'not-a-token');
    await page.click('#signin-submit');
    await page.waitForSelector('#signin-error:not([hidden])');
    const msg = await page.textContent('#signin-error');
    check(/refused/i.test(msg) && /token/i.test(msg), `message: ${msg}`);
    check(await page.isHidden('#shell'), 'the app stays hidden');
    check(await page.evaluate(() => sessionStorage.getItem('tessera.token')) === null, 'no token kept');
    await shot(page, 'signin');
    // The browser reports the refused request (401) itself; nothing else may fail.
    page.errors = page.errors.filter((e) => !/status of 401/.test(e));
  }],

  ['the dashboard loads after sign-in with the admin token', async () => {
    const page = await open(ADMIN);
    state.admin = page;
    await page.waitForSelector('#shell:not([hidden])');
    await page.waitForSelector('#page .stat');
    check(await page.textContent('#who') === 'admin', 'signed in as admin');
    check(await page.isVisible('#nav-audit'), 'the admin sees the audit page');
    const load = await page.evaluate(() => performance.getEntriesByType('navigation')[0].loadEventEnd);
    console.log(`     first load ${Math.round(load)} ms`);
  }],

  ['a submitted job appears in the jobs table within 2 s', async () => {
    const page = state.admin;
    await go(page, '#/jobs');
    await page.waitForSelector('table.jobs tbody tr[data-id]');
    const submitted = Date.now();
    const job = await api(server, ADMIN, 'POST', '/v1/jobs', {
      name: 'train', tenant: 'team-a', gang: { min: 1, max: 1 }, resources: { gpus: 1 },
      command: ['sh', '-c', 'echo hello-from-job; sleep 30'],
    });
    state.job = job.id;
    await page.waitForSelector(`table.jobs tbody tr[data-id="${job.id}"]`, { timeout: 2000 });
    console.log(`     shown after ${Date.now() - submitted} ms`);
    // team-b's job, half a GPU: the tenant's view must not show it.
    state.jobB = (await api(server, ADMIN, 'POST', '/v1/jobs', {
      name: 'frac', tenant: 'team-b', gang: { min: 1, max: 1 }, resources: { gpus: 0.5 },
      command: ['sh', '-c', 'sleep 30'],
    })).id;
    await page.waitForSelector(`table.jobs tbody tr[data-id="${state.jobB}"]`);
    await page.waitForSelector(`table.jobs tbody tr[data-id="${job.id}"] .state-running`);
    await shot(page, 'jobs');
  }],

  ['the jobs table filters on the server', async () => {
    const page = state.admin;
    const rows = () => page.$$eval('table.jobs tbody tr[data-id]', (trs) => trs.map((r) => ({ id: r.dataset.id, state: r.dataset.state, tenant: r.dataset.tenant })));
    await page.selectOption('#filter-state', 'succeeded');
    await page.waitForFunction(() => location.hash.includes('state=succeeded'));
    await page.waitForFunction(() => {
      const trs = [...document.querySelectorAll('table.jobs tbody tr[data-id]')];
      return trs.length > 0 && trs.every((r) => r.dataset.state === 'succeeded');
    });
    check((await rows()).every((r) => r.tenant === 'team-b'), 'only the warm-up job succeeded');
    await page.selectOption('#filter-state', '');
    // queue= is newer than state=: checked where the server filters on it.
    const probe = await api(server, ADMIN, 'GET', '/v1/jobs?queue=team-b&limit=100').catch(() => null);
    if (probe && probe.jobs.every((j) => j.tenant === 'team-b')) {
      await page.selectOption('#filter-queue', 'team-b');
      await page.waitForFunction(() => {
        const trs = [...document.querySelectorAll('table.jobs tbody tr[data-id]')];
        return location.hash.includes('queue=team-b') && trs.length > 0 && trs.every((r) => r.dataset.tenant === 'team-b');
      });
    } else {
      console.log('     (this server ignores queue=: the queue filter is not checked)');
    }
    await page.click('text=Clear filters');
    await page.waitForSelector(`table.jobs tbody tr[data-id="${state.job}"]`);
  }],

  ["the job's page shows its history and its running log", async () => {
    const page = state.admin;
    await page.click(`table.jobs tbody tr[data-id="${state.job}"] td.name a`);
    await page.waitForFunction((id) => location.hash === `#/jobs/${id}`, state.job);
    await page.waitForSelector('table.events tr[data-type="Submitted"]');
    await page.waitForSelector('table.events tr[data-type="Started"]');
    await page.waitForFunction(() => (document.getElementById('job-log').textContent || '').includes('hello-from-job'));
    check((await page.textContent('.job-title')).includes('train'), 'title names the job');
    check((await page.textContent('table.placement')).includes('vm'), 'placement names the node');
    await shot(page, 'job');
  }],

  ["the node grid shows the server's GPUs, coloured by tenant", async () => {
    const page = state.admin;
    const nodes = (await api(server, ADMIN, 'GET', '/v1/nodes')).nodes;
    const total = nodes.reduce((a, n) => a + n.gpus.length, 0);
    check(total === 8, `8 GPUs, got ${total}`);
    await go(page, '#/nodes');
    await page.waitForSelector(`.seg[data-job="${state.job}"]`);
    check(await page.locator('.gpu-cell').count() === total, 'one cell per GPU');
    for (const n of nodes) {
      check(await page.locator(`.gpu-cell[data-node="${n.name}"]`).count() === n.gpus.length, `node ${n.name}'s GPUs`);
    }
    const job = await api(server, ADMIN, 'GET', `/v1/jobs/${state.job}`);
    const { node, gpus: [gpu] } = job.allocation[0];
    const seg = `.gpu-cell[data-node="${node}"][data-gpu="${gpu}"] .seg[data-job="${state.job}"]`;
    const cell = await cssColor(page, seg);
    const legend = await cssColor(page, '#gpu-legend .legend-item[data-tenant="team-a"] .swatch');
    check(cell === legend, `team-a's GPU ${cell} has the legend's colour ${legend}`);
    const title = await page.getAttribute(seg, 'title');
    check(title.includes(`job ${state.job}`) && title.includes('team-a'), `hover names the job: ${title}`);
    // The half GPU fills half its cell.
    const frac = await api(server, ADMIN, 'GET', `/v1/jobs/${state.jobB}`);
    const fseg = `.gpu-cell[data-node="${frac.allocation[0].node}"][data-gpu="${frac.allocation[0].gpus[0]}"] .seg[data-job="${state.jobB}"]`;
    await page.waitForSelector(fseg);
    const share = await page.$eval(fseg, (el) => el.getBoundingClientRect().height / el.parentElement.getBoundingClientRect().height);
    check(Math.abs(share - 0.5) < 0.1, `half a GPU fills half a cell (${share})`);
    await shot(page, 'nodes');
  }],

  ['the queue tree and its chart', async () => {
    const page = state.admin;
    const queues = (await api(server, ADMIN, 'GET', '/v1/queues')).queues;
    await go(page, '#/queues');
    await page.waitForFunction((n) => document.querySelectorAll('table.queues tbody tr[data-path]').length === n, queues.length);
    check(await page.locator('table.queues tr[data-path="team-a"].borrowing').count() === 1, 'team-a borrows (holds beyond its guarantee of 0)');
    await chartsDrawn(page, 1);
    await shot(page, 'queues');
  }],

  ['the audit log, filtered to refusals', async () => {
    const page = state.admin;
    // team-a may not submit for team-b: refused (403) and audited.
    await api(server, state.a, 'POST', '/v1/jobs', { name: 'x', tenant: 'team-b', command: ['true'] }).catch(() => {});
    await go(page, '#/audit');
    await page.waitForSelector('table.audit tbody tr[data-status="201"]');
    await page.check('#audit-refused');
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('table.audit tbody tr[data-status]')];
      return rows.length > 0 && rows.every((r) => Number(r.dataset.status) >= 400);
    });
    await page.uncheck('#audit-refused');
    await page.waitForSelector('table.audit tbody tr[data-status="201"]');
    await shot(page, 'audit');
  }],

  ["a tenant's token shows only that tenant's jobs", async () => {
    const page = await open(state.a);
    await page.waitForSelector('#shell:not([hidden])');
    check(await page.textContent('#who') === 'tenant team-a', 'signed in as team-a');
    check(await page.isHidden('#nav-audit'), 'no audit page for a tenant');
    await go(page, '#/jobs');
    await page.waitForSelector(`table.jobs tbody tr[data-id="${state.job}"]`);
    const tenants = await page.$$eval('table.jobs tbody tr[data-id]', (rows) => rows.map((r) => r.dataset.tenant));
    check(tenants.length > 0 && tenants.every((t) => t === 'team-a'), `only team-a's jobs: ${tenants}`);
    check(await page.locator(`table.jobs tbody tr[data-id="${state.jobB}"]`).count() === 0, "team-b's job is not listed");
    // On the grid, team-b's GPU is another tenant's (grey, unnamed).
    await go(page, '#/nodes');
    await page.waitForSelector('.seg.other');
    check(await page.locator('#gpu-legend .legend-item[data-tenant="team-b"]').count() === 0, 'team-b is not named');
    await go(page, '#/audit');
    await page.waitForFunction(() => location.hash === '#/overview');
    // A token revoked while its page is open: the next poll's 401 returns to the sign-in form.
    await go(page, '#/jobs');
    await page.waitForSelector('table.jobs tbody tr[data-id]');
    await api(server, ADMIN, 'DELETE', '/v1/tenants/team-a/token');
    await page.waitForSelector('#signin:not([hidden]) #signin-error:not([hidden])');
    check(/refused/.test(await page.textContent('#signin-error')), 'says the token was refused');
    check(await page.isHidden('#shell'), 'no page after a 401');
    page.errors = page.errors.filter((e) => !/status of 401/.test(e));
  }],

  ['every overview chart is drawn with data, for the last hour and the last day', async () => {
    const page = state.admin;
    await go(page, '#/overview');
    await chartsDrawn(page, 4);
    const labels = await page.evaluate(() => Chart.getChart(document.querySelector('#page canvas')).data.datasets.map((d) => d.label));
    check(labels.includes('team-a') && labels.includes('team-b'), `GPUs by tenant: ${labels}`);
    await page.click('button.seg[data-range="24h"]');
    await page.waitForFunction(() => location.hash === '#/overview?range=24h');
    await chartsDrawn(page, 4);
    await page.click('button.seg[data-range="1h"]');
    await chartsDrawn(page, 4);
    await shot(page, 'overview');
  }],

  ['no page logged a console error', async () => {
    const errors = pages.flatMap((p) => p.errors);
    check(errors.length === 0, errors.join('\n'));
    console.log(`     ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
  }],
], async () => {
  await browser.close();
  // Jobs outlive the server (a restarted one adopts them): cancel them, so none is left behind.
  try {
    const { jobs } = await api(server, ADMIN, 'GET', '/v1/jobs?state=pending,running&limit=1000');
    for (const j of jobs) await api(server, ADMIN, 'POST', `/v1/jobs/${j.id}/cancel?force=true`).catch(() => {});
    for (let i = 0; i < 50; i++) {
      if (!(await api(server, ADMIN, 'GET', '/v1/jobs?state=running&limit=1')).jobs.length) break;
      await sleep(100);
    }
  } catch { /* the server is gone already */ }
  await server.stop();
});
