// The dashboard (/ui/) in a real browser against a real `tessera serve`: sign-in (admin, tenant,
// a bad token), the jobs table and a job's page (history, live log; a preempted job waiting
// again; another tenant's job or none, one message), the GPU grid coloured by tenant (a
// reservation's GPUs outlined and listed), the queue
// tree, the overview's charts (drawn, with data, as steps; the jobs finished a minute adding up
// to the card's count), the audit log and the usage page (rows by user with the API's exact
// GPU-hours, a cost from a price, the CSV, a tenant's own rows, an empty range), with no console
// error on any page. With
// --screenshots DIR it saves DIR/dashboard-<page>.png (1400×900): signin (a refused token) and
// audit from the checks' server; overview, queues, jobs, job,
// nodes (with two reservations) and usage from a second server (16 GPUs, a queue tree, four tenants) where a scene of a busy
// cluster runs for SCENE_SECONDS meanwhile, so that the charts have history (README images). The
// scene runs only with --screenshots: without it the test is what CI runs, and nothing else.
// TESSERA_UI_DIR=web serves the dashboard from disk (serve --ui-dir) instead of the built-in copy.
import fs from 'node:fs';
import path from 'node:path';
import {
  chartsDrawn,
  run, launchBrowser, newPage, startServer, api, check, screenshotDir, sleep, tempDir,
} from './harness.mjs';

const t0 = Date.now();
const uiDir = process.env.TESSERA_UI_DIR ? ['--ui-dir', path.resolve(process.env.TESSERA_UI_DIR)] : [];
const args = ['--virtual-gpus', '8', '--history-interval', '1', ...uiDir];
const server = await startServer(args);
const browser = await launchBrowser();
const shots = screenshotDir();
if (shots) fs.mkdirSync(shots, { recursive: true });
const ADMIN = 's3cret';
const pages = [];
const state = {};
// With --screenshots: the busy cluster whose pages the README shows, started now, running while
// the checks run.
const SCENE_SECONDS = 80;
const scene = shots ? await startScene() : null;

async function open(token, srv = server) {
  const page = await newPage(browser);
  page.setDefaultTimeout(10000);
  pages.push(page);
  await page.goto(`${srv.url}/ui/`);
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

// Polls `cond` (async) every 100 ms until it holds, for at most `ms`.
async function waitFor(cond, what, ms = 15000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(100);
  }
}

// Cancels a server's jobs, then stops it: jobs outlive their server (a restarted one adopts
// them), and none may be left behind.
async function stopServer(srv) {
  try {
    const { jobs } = await api(srv, ADMIN, 'GET', '/v1/jobs?state=pending,running&limit=1000');
    for (const j of jobs) await api(srv, ADMIN, 'POST', `/v1/jobs/${j.id}/cancel?force=true`).catch(() => {});
    for (let i = 0; i < 50; i++) {
      if (!(await api(srv, ADMIN, 'GET', '/v1/jobs?state=running&limit=1')).jobs.length) break;
      await sleep(100);
    }
  } catch { /* the server is gone already */ }
  await srv.stop();
}

// Every series on the page's charts is drawn as steps: between two samples that differ, the
// line is at one of their values, never in between (a spline's would be).
async function checkStepped(page) {
  const r = await page.evaluate(() => {
    const bad = [];
    let changes = 0;
    for (const canvas of document.querySelectorAll('#page canvas')) {
      const chart = Chart.getChart(canvas);
      chart.data.datasets.forEach((d, i) => {
        const line = chart.getDatasetMeta(i).dataset;
        const name = `${canvas.getAttribute('aria-label')}: ${d.label}`;
        if (!line.options.stepped) bad.push(`${name} is not stepped`);
        const pts = line.points || [];
        for (let k = 1; k < pts.length; k++) {
          const [a, b] = [pts[k - 1], pts[k]];
          if (a.skip || b.skip || Math.abs(a.y - b.y) < 4) continue;
          changes++;
          let mid = line.interpolate({ x: (a.x + b.x) / 2 }, 'x');
          if (Array.isArray(mid)) mid = mid[0];
          if (!mid || Math.min(Math.abs(mid.y - a.y), Math.abs(mid.y - b.y)) > 1) {
            bad.push(`${name} between ${a.y} and ${b.y} is drawn at ${mid ? mid.y : 'no point'}`);
            break;
          }
        }
      });
    }
    return { bad, changes };
  });
  check(r.bad.length === 0, r.bad.join('; '));
  check(r.changes > 0, 'some series changes (else nothing was checked)');
}

await run([
  ['tenants and a job that finishes', async () => {
    state.a = (await api(server, ADMIN, 'POST', '/v1/tenants', { name: 'team-a' })).token;
    state.b = (await api(server, ADMIN, 'POST', '/v1/tenants', { name: 'team-b' })).token;
    await api(server, ADMIN, 'POST', '/v1/tenants', { name: 'team-c' });
    // Finishes at once: the overview's "jobs finished" has something to draw.
    await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'warmup', tenant: 'team-b', gang: { min: 1, max: 1 }, resources: { gpus: 1 }, command: ['sh', '-c', 'echo done'] });
    // A gang of two that runs, and a job held back, which waits.
    state.eval = (await api(server, ADMIN, 'POST', '/v1/jobs', { name: 'eval', tenant: 'team-c', gang: { min: 2, max: 2 }, resources: { gpus: 2 }, command: ['sh', '-c', 'sleep 60'] })).id;
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
  }],

  ['a job preempted and waiting again is not "running for" anything', async () => {
    // Its own server of 2 GPUs: a best-effort job holds them, a research one preempts it, and it
    // waits again, with its last attempt's start still set.
    const srv = await startServer(['--virtual-gpus', '2', '--checkpoint-grace', '1', ...uiDir]);
    let page = null;
    try {
      await api(srv, ADMIN, 'POST', '/v1/tenants', { name: 'team-x' });
      const job = (n, cls) => ({ name: n, tenant: 'team-x', gang: { min: 1, max: 1 }, resources: { gpus: 2 }, priority_class: cls, command: ['sh', '-c', 'sleep 60'] });
      const low = (await api(srv, ADMIN, 'POST', '/v1/jobs', job('low', 'best-effort'))).id;
      await waitFor(async () => (await api(srv, ADMIN, 'GET', `/v1/jobs/${low}`)).state === 'running', 'the low job runs');
      await api(srv, ADMIN, 'POST', '/v1/jobs', job('high', 'research'));
      await waitFor(async () => {
        const j = await api(srv, ADMIN, 'GET', `/v1/jobs/${low}`);
        return j.state === 'pending' && j.preemptions > 0 && j.started_at;
      }, 'the low job is preempted and waits again');
      page = await open(ADMIN, srv);
      await go(page, `#/jobs/${low}`);
      await page.waitForSelector('table.events tr[data-type="Preempted"]');
      await page.waitForSelector('.badge.state-pending');
      const terms = await page.$$eval('dl.kv dt', (dts) => dts.map((d) => d.textContent));
      check(!terms.includes('Running for') && !terms.includes('Ran'), `no run time while it waits: ${terms}`);
      check(terms.includes('Last started') && terms.includes('Waiting because'), `its last start and why it waits: ${terms}`);
    } finally {
      // Closed first: a page still polling a stopped server logs refused connections.
      if (page) await page.close();
      await stopServer(srv);
    }
  }],

  ["another tenant's job, or none, is one message: no panels, no stale marker, no polling", async () => {
    const page = await open(state.b);
    await page.waitForSelector('#shell:not([hidden])');
    const asked = [];
    page.on('request', (r) => { if (/\/v1\/jobs\/\d+/.test(new URL(r.url()).pathname)) asked.push(new URL(r.url()).pathname); });
    for (const [id, want] of [[state.eval, `Job ${state.eval} belongs to another tenant`], [987654, 'No job 987654']]) {
      asked.length = 0;
      await go(page, `#/jobs/${id}`);
      await page.waitForFunction((w) => (document.getElementById('job-unseen') || {}).textContent === w, want);
      // Several poll intervals (1.5 s): nothing more is asked, and nothing turns stale.
      await sleep(4000);
      check(await page.locator('#page .card').count() === 0, 'no empty panels');
      check(await page.isHidden('#banner'), `no error banner: ${await page.textContent('#banner')}`);
      check(!(await page.getAttribute('#live', 'class')).includes('stale'), 'not stale');
      check(asked.length === 1 && asked[0] === `/v1/jobs/${id}`, `the job asked for once: ${asked}`);
      check(await page.textContent('#page') === `← JobsJob #${id}${want}`, `only the message: ${await page.textContent('#page')}`);
    }
    // The browser reports each refused request itself (one each, checked above).
    page.errors = page.errors.filter((e) => !/status of 40[34]/.test(e));
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
    // A reservation (tomorrow, so that nothing today waits for it): its GPUs outlined, a row.
    const start = Date.now() / 1000 + 86400;
    const r = await api(server, ADMIN, 'POST', '/v1/reservations', { name: 'ui-deadline', tenant: 'team-b', gpus: 2, start, end: start + 3600 });
    try {
      await page.waitForSelector('table.reservations tbody tr[data-reservation="ui-deadline"][data-state="upcoming"]');
      await page.waitForFunction(() => document.querySelectorAll('.gpu-cell.reserved').length === 2);
      const marked = await page.$$eval('.gpu-cell.reserved', (cs) => cs.map((c) => `${c.dataset.node}/${c.dataset.gpu}`).sort());
      check(marked.join() === [...r.gpus].sort().join(), `the reserved cells are its GPUs: ${marked} vs ${r.gpus}`);
      const hover = await page.getAttribute('.gpu-cell.reserved', 'title');
      check(hover.includes('reserved: ui-deadline'), `hover names it: ${hover}`);
    } finally {
      await api(server, ADMIN, 'DELETE', '/v1/reservations/ui-deadline');
    }
    await page.waitForFunction(() => document.querySelectorAll('.gpu-cell.reserved').length === 0);
  }],

  ['the queue tree and its chart', async () => {
    const page = state.admin;
    const queues = (await api(server, ADMIN, 'GET', '/v1/queues')).queues;
    await go(page, '#/queues');
    await page.waitForFunction((n) => document.querySelectorAll('table.queues tbody tr[data-path]').length === n, queues.length);
    check(await page.locator('table.queues tr[data-path="team-a"].borrowing').count() === 1, 'team-a borrows (holds beyond its guarantee of 0)');
    await chartsDrawn(page, 1);
    await checkStepped(page);
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

  ['every overview chart is drawn with data, for the last hour, day and month', async () => {
    const page = state.admin;
    await go(page, '#/overview');
    await chartsDrawn(page, 4);
    const labels = await page.evaluate(() => Chart.getChart(document.querySelector('#page canvas')).data.datasets.map((d) => d.label));
    check(labels.includes('team-a') && labels.includes('team-b'), `GPUs by tenant: ${labels}`);
    await page.click('button.seg[data-range="24h"]');
    await page.waitForFunction(() => location.hash === '#/overview?range=24h');
    await page.waitForSelector('#page .chart-grid[data-drawn="24h"]');
    await chartsDrawn(page, 4);
    // A month: asked of the server over 30 days (its hourly averages answer for the past).
    const asked = [];
    const note = (r) => { const u = new URL(r.url()); if (u.pathname === '/v1/history') asked.push(Number(u.searchParams.get('until')) - Number(u.searchParams.get('since'))); };
    page.on('request', note);
    await page.click('button.seg[data-range="30d"]');
    await page.waitForFunction(() => location.hash === '#/overview?range=30d');
    await page.waitForSelector('#page .chart-grid[data-drawn="30d"]');
    await chartsDrawn(page, 4);
    page.off('request', note);
    check(asked.includes(30 * 86400), `a month's history asked for: ${asked}`);
    // The month's charts stay up until the next refresh draws the hour's: wait for those.
    await page.click('button.seg[data-range="1h"]');
    await page.waitForSelector('#page .chart-grid[data-drawn="1h"]');
    await chartsDrawn(page, 4);
    await checkStepped(page);
  }],

  ["the jobs finished per minute add up to the card's count", async () => {
    const page = state.admin;
    // Three jobs that end together, in one sample: a sample's count scaled up to a minute would
    // draw them as 180 a minute.
    const ids = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await api(server, ADMIN, 'POST', '/v1/jobs', { name: `quick-${i}`, tenant: 'team-b', gang: { min: 1, max: 1 }, resources: { gpus: 0.5 }, command: ['true'] })).id);
    }
    await waitFor(async () => {
      const states = await Promise.all(ids.map(async (id) => (await api(server, ADMIN, 'GET', `/v1/jobs/${id}`)).state));
      return states.every((st) => st === 'succeeded');
    }, 'the quick jobs succeed');
    const finished = await api(server, ADMIN, 'GET', '/v1/jobs?state=succeeded,failed,timeout&limit=1000');
    const read = () => page.evaluate(() => {
      const stat = [...document.querySelectorAll('#page .stat')].find((e) => e.querySelector('.stat-label').textContent.startsWith('Jobs finished'));
      const canvas = document.querySelector('#page canvas[aria-label="Jobs finished per minute"]');
      // The point that closes the last minute's step counts nothing.
      const ys = Chart.getChart(canvas).data.datasets[0].data.filter((p) => !p.close).map((p) => p.y);
      return { card: Number(stat.querySelector('.stat-value').textContent.replace(/,/g, '')), sum: ys.reduce((a, y) => a + y, 0), peak: Math.max(...ys), points: ys.length };
    });
    // Once a sample has counted them all.
    await page.waitForFunction((n) => {
      const stat = [...document.querySelectorAll('#page .stat')].find((e) => e.querySelector('.stat-label').textContent.startsWith('Jobs finished'));
      return stat && Number(stat.querySelector('.stat-value').textContent.replace(/,/g, '')) >= n;
    }, finished.jobs.length, { timeout: 15000 });
    const got = await read();
    console.log(`     card ${got.card}, chart: ${got.points} minutes adding up to ${got.sum}, at most ${got.peak} a minute`);
    check(got.card >= 4, `the warm-up and the quick jobs are counted: ${got.card}`);
    check(Math.abs(got.sum - got.card) < 1e-9, `the chart's minutes add up to the card: ${got.sum} vs ${got.card}`);
    check(got.peak <= got.card, `no minute above the total: ${got.peak} > ${got.card}`);
  }],

  ['the usage page: rows by user, the API\'s GPU-hours, a cost, a tenant\'s own rows, an empty range', async () => {
    // Its own server, so that every run has ended before the numbers are compared: the usage
    // of a finished run is the same whenever it is asked, a running one's grows.
    const srv = await startServer(['--virtual-gpus', '4', ...uiDir]);
    const opened = [];
    try {
      await api(srv, ADMIN, 'POST', '/v1/tenants', { name: 'team-a' });
      const teamB = (await api(srv, ADMIN, 'POST', '/v1/tenants', { name: 'team-b' })).token;
      const alice = (await api(srv, ADMIN, 'POST', '/v1/tenants/team-a/users', { name: 'alice' })).token;
      const bob = (await api(srv, ADMIN, 'POST', '/v1/tenants/team-a/users', { name: 'bob' })).token;
      const ids = [];
      for (const [token, gpus, secs] of [[alice, 1, 1], [bob, 2, 2], [alice, 1, 1], [teamB, 1, 1]]) {
        ids.push((await api(srv, token, 'POST', '/v1/jobs', { name: 'u', gang: { min: 1, max: 1 }, resources: { gpus }, command: ['sleep', String(secs)] })).id);
      }
      await waitFor(async () => {
        const states = await Promise.all(ids.map(async (id) => (await api(srv, ADMIN, 'GET', `/v1/jobs/${id}`)).state));
        return states.every((st) => st === 'succeeded');
      }, 'the usage jobs succeed');

      const page = await open(ADMIN, srv);
      opened.push(page);
      // The page's own request, asked again as is: the same window, so the same numbers.
      const asked = [];
      page.on('request', (r) => { const u = new URL(r.url()); if (u.pathname === '/v1/usage') asked.push(u.pathname + u.search); });
      await page.waitForSelector('#shell:not([hidden])');
      check(await page.isVisible('#nav-usage'), 'a Usage link');
      await go(page, '#/usage?by=user');
      for (const who of ['alice@team-a', 'bob@team-a', 'team-b']) await page.waitForSelector(`table.usage tbody tr[data-who="${who}"]`);
      await chartsDrawn(page, 1);
      const last = asked[asked.length - 1];
      check(/by=user/.test(last), `the page asked by user: ${last}`);
      const want = (await api(srv, ADMIN, 'GET', last)).usage;
      check(want.length === 3, `three rows by user: ${JSON.stringify(want)}`);
      const cells = () => page.$$eval('table.usage tbody tr', (trs) => trs.map((tr) => ({
        who: tr.dataset.who, queue: tr.dataset.queue, total: tr.hasAttribute('data-total'),
        types: Object.fromEntries([...tr.querySelectorAll('td.gpuh')].map((td) => [td.dataset.type, td.dataset.value])),
        gpu: tr.querySelector('td.gpu-total').dataset.value,
        cost: tr.querySelector('td.cost') ? tr.querySelector('td.cost').dataset.value : null,
      })));
      const whoOf = (r) => (r.user ? `${r.user}@${r.tenant}` : r.tenant);
      const hours = (r) => Object.values(r.gpu_hours).reduce((a, x) => a + x, 0);
      let got = await cells();
      check(got.length === want.length + 1 && got[got.length - 1].total, `a row each and a total: ${JSON.stringify(got)}`);
      for (const r of want) {
        const row = got.find((g) => g.who === whoOf(r) && g.queue === r.queue);
        check(row, `a row for ${whoOf(r)}`);
        for (const [type, hrs] of Object.entries(r.gpu_hours)) {
          check(Number(row.types[type]) === hrs, `${whoOf(r)} ${type}: ${row.types[type]} vs the API's ${hrs}`);
        }
        check(Number(row.gpu) === hours(r), `${whoOf(r)} total: ${row.gpu} vs ${hours(r)}`);
        check(hours(r) > 0, `${whoOf(r)} used GPUs`);
      }
      check(Number(got[got.length - 1].gpu) === want.reduce((a, r) => a + hours(r), 0), 'the total row adds them up');

      // A price per GPU-hour: cost = hours × price, per row and in all.
      const price = 2.5;
      check(got.every((g) => g.cost === null), 'no cost column before a price');
      await page.fill('input.price[data-type="virtual"]', String(price));
      await page.waitForSelector('table.usage td.cost');
      got = await cells();
      let sum = 0;
      for (const r of want) {
        const row = got.find((g) => g.who === whoOf(r) && g.queue === r.queue);
        const cost = Object.values(r.gpu_hours).reduce((a, x) => a + x * price, 0);
        sum += cost;
        check(Number(row.cost) === cost, `${whoOf(r)} costs ${row.cost}, want ${cost}`);
      }
      check(Number(got[got.length - 1].cost) === sum, `the total cost ${got[got.length - 1].cost} vs ${sum}`);
      check(JSON.parse(await page.evaluate(() => localStorage.getItem('tessera.prices'))).virtual === price, 'the price is kept');

      // The CSV: `tessera usage --csv`'s columns, a line per row (one GPU type each).
      const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#usage-csv')]);
      const csv = fs.readFileSync(await dl.path(), 'utf8').trim().split('\n');
      check(csv[0] === 'tenant,queue,gpu_type,gpu_hours,cpu_hours,jobs_succeeded,jobs_failed,jobs_timeout,jobs_cancelled,started,mean_wait_hours,preempted,preemptor,cost,energy_kwh,carbon_kg,user', `CSV header: ${csv[0]}`);
      check(csv.length === want.length + 1, `a CSV line per row: ${csv.length}`);
      const aliceRow = want.find((r) => r.user === 'alice');
      check(csv.some((l) => l.startsWith(`team-a,team-a,virtual,${aliceRow.gpu_hours.virtual.toFixed(4)},`) && l.endsWith(',alice')), `alice's CSV line: ${csv.join(' | ')}`);

      // By tenant and queue: team-a's row holds both users' GPU-hours.
      await page.click('button.seg[data-by="queue"]');
      await page.waitForFunction(() => location.hash === '#/usage' && document.querySelector('table.usage tbody tr[data-who="team-a"]'));
      const byQueue = (await api(srv, ADMIN, 'GET', asked[asked.length - 1])).usage;
      const a = byQueue.find((r) => r.tenant === 'team-a');
      check(Number(await page.$eval('table.usage tr[data-who="team-a"] td.gpu-total', (td) => td.dataset.value)) === hours(a), 'team-a by queue');

      // A range with nothing in it says so, with no table.
      await page.click('button.seg[data-range="custom"]');
      await page.fill('#usage-from', '2001-01-01');
      await page.fill('#usage-to', '2001-01-02');
      await page.waitForFunction(() => /No usage in this range/.test((document.querySelector('.usage-empty:not([hidden])') || {}).textContent || ''));
      check(await page.isHidden('table.usage'), 'no empty table');
      check(await page.isHidden('#banner'), 'no error');

      // team-b's token: its own rows only.
      const pb = await open(teamB, srv);
      opened.push(pb);
      await pb.waitForSelector('#shell:not([hidden])');
      await go(pb, '#/usage?by=user');
      await pb.waitForSelector('table.usage tbody tr[data-who]');
      const tenants = await pb.$$eval('table.usage tbody tr[data-who]', (trs) => trs.map((tr) => tr.dataset.tenant));
      check(tenants.length === 1 && tenants[0] === 'team-b', `only team-b's rows: ${tenants}`);
      const mine = (await api(srv, teamB, 'GET', '/v1/usage?by=user')).usage;
      check(Number(await pb.$eval('table.usage tr[data-who="team-b"] td.gpu-total', (td) => td.dataset.value)) === hours(mine[0]), "team-b's own GPU-hours");
    } finally {
      // Closed first: a page still polling a stopped server logs refused connections.
      for (const p of opened) await p.close();
      await stopServer(srv);
    }
  }],

  ...(scene ? [['screenshots of a busy cluster', () => sceneShots(scene)]] : []),

  ['no page logged a console error', async () => {
    const errors = pages.flatMap((p) => p.errors);
    check(errors.length === 0, errors.join('\n'));
    console.log(`     ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
  }],
], async () => {
  await browser.close();
  if (scene) await stopScene(scene);
  await stopServer(server);
});

// ---- The screenshots' scene (only with --screenshots) ----------------------------------------

// A second server: 16 GPUs, a queue tree (research: two teams by weight; production: two teams
// with guarantees), four tenants, and a driver that submits jobs of ½, 1, 2 and 4 GPUs (gangs of
// one or two) running 6-40 s, printing a training log, so that allocation rises and falls, jobs
// queue and finish. Research works alone for a while; production's team-d arrives late and
// reclaims its guarantee (a preemption); one big job is held.
async function startScene() {
  const dir = tempDir('tessera-scene-');
  const queues = path.join(dir, 'queues.yaml');
  fs.writeFileSync(queues, [
    'queues:',
    '  - name: research',
    '    weight: 2',
    '    queues:',
    '      - name: team-a',
    '        weight: 2',
    '      - name: team-b',
    '  - name: production',
    '    queues:',
    '      - name: team-c',
    '        guarantee: {gpus: 2}',
    '      - name: team-d',
    '        guarantee: {gpus: 4}',
    '',
  ].join('\n'));
  const srv = await startServer(['--virtual-gpus', '16', '--history-interval', '1', '--queues', queues,
    '--checkpoint-grace', '2', ...uiDir], { dir });
  for (const name of ['team-a', 'team-b', 'team-c', 'team-d']) await api(srv, ADMIN, 'POST', '/v1/tenants', { name });
  // The jobs' program, where their tenants' uids may run it.
  const bin = tempDir('tessera-scene-bin-');
  fs.chmodSync(bin, 0o755);
  const train = path.join(bin, 'train');
  fs.writeFileSync(train, trainScript(), { mode: 0o755 });
  const sc = { srv, bin, train, stop: false, started: Date.now() };
  sc.done = driveScene(sc).catch((e) => { sc.error = e; });
  return sc;
}

// The jobs' program (`train --config FILE --steps N`): a training loop of N one-second steps with
// a falling loss, which says so when it is preempted (SIGTERM) and when it ends.
function trainScript() {
  return [
    '#!/bin/sh',
    'steps=$4',
    'trap \'echo "SIGTERM: checkpoint saved at step $((i*100)), exiting"; exit 143\' TERM',
    'echo "$TESSERA_JOB_NAME attempt $TESSERA_ATTEMPT: rank $RANK of $WORLD_SIZE on GPU(s) $CUDA_VISIBLE_DEVICES${TESSERA_GPU_FRACTION:+ (share $TESSERA_GPU_FRACTION)}"',
    'echo "config $2; loading dataset shard $RANK ... done"',
    'i=0',
    'while [ $i -lt $steps ]; do',
    '  i=$((i+1)); l=$((650 + 2700*10/(i+10) + (i*37)%60))',
    '  printf "step %5d/%d  loss %d.%03d  lr 3.0e-4  %d samples/s\\n" $((i*100)) $((steps*100)) $((l/1000)) $((l%1000)) $((1800 + (i*7919)%241))',
    '  sleep 1',
    'done',
    'echo "done: $((steps*100)) steps, checkpoint written"',
    '',
  ].join('\n');
}

async function driveScene(sc) {
  const { srv } = sc;
  let seed = 7;
  const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const range = (lo, hi) => Math.round(lo + rnd() * (hi - lo));
  // Per tenant: when it submits (seconds into the scene), how often, how many of its jobs may
  // wait at once, and its jobs: [name, GPUs per member, members, shortest, longest run (s)].
  const tenants = {
    'team-a': { leaf: 'research/team-a', windows: [[0, 24], [44, 99]], every: 6, cap: 2, jobs: [
      ['llama-ft', 4, 1, 20, 40], ['pretrain-1b', 2, 2, 25, 40], ['rlhf-ppo', 2, 1, 15, 30], ['distill', 1, 2, 15, 30]] },
    'team-b': { leaf: 'research/team-b', windows: [[0, 99]], every: 3, cap: 3, jobs: [
      ['sweep-lr', 1, 1, 6, 18], ['notebook', 0.5, 1, 20, 40], ['hparam-trial', 1, 1, 8, 20], ['tokenize', 0.5, 1, 6, 12], ['ablation', 2, 1, 10, 20]] },
    'team-c': { leaf: 'production/team-c', windows: [[2, 22], [48, 99]], every: 5, cap: 2, jobs: [
      ['resnet-eval', 1, 1, 10, 25], ['embed-index', 2, 1, 15, 30], ['serve-canary', 0.5, 1, 20, 35]] },
    'team-d': { leaf: 'production/team-d', windows: [[42, 99]], every: 7, cap: 2, jobs: [
      ['ranker-train', 2, 2, 30, 40], ['feature-eval', 1, 1, 10, 25]] },
  };
  const next = Object.fromEntries(Object.entries(tenants).map(([t, p]) => [t, p.windows[0][0]]));
  const submit = (tenant, [name, gpus, members, lo, hi]) => {
    const steps = range(lo, hi);
    return api(srv, ADMIN, 'POST', '/v1/jobs', {
      name, tenant, gang: { min: members, max: members }, resources: { gpus },
      duration_estimate: `${steps + 5}s`,
      command: [sc.train, '--config', `configs/${name}.yaml`, '--steps', String(steps)],
    });
  };
  let held = false;
  let arrived = false;
  while (!sc.stop) {
    const t = (Date.now() - sc.started) / 1000;
    if (t >= SCENE_SECONDS) break;
    const pending = Object.fromEntries((await api(srv, ADMIN, 'GET', '/v1/queues')).queues.map((q) => [q.path, q.pending_jobs]));
    if (t >= 42 && !arrived) {
      // team-d arrives with a gang for its guarantee: research, borrowing, gives GPUs back.
      arrived = true;
      sc.reclaimer = (await submit('team-d', tenants['team-d'].jobs[0])).id;
      next['team-d'] = t + 4;
    }
    if (t >= 30 && !held) {
      // The next pretraining run, held until the team says go.
      held = true;
      const j = await api(srv, ADMIN, 'POST', '/v1/jobs', { name: 'pretrain-7b', tenant: 'team-a', gang: { min: 2, max: 2 }, resources: { gpus: 4 }, command: [sc.train, '--config', 'configs/pretrain-7b.yaml', '--steps', '3600'] });
      await api(srv, ADMIN, 'POST', `/v1/jobs/${j.id}/hold`);
    }
    // Half-GPU work that is still running at the end (the grid's split cells).
    if (t >= 50 && !sc.notebooks) {
      sc.notebooks = true;
      await submit('team-b', ['notebook', 0.5, 1, 45, 45]);
      await submit('team-c', ['serve-canary', 0.5, 1, 40, 40]);
    }
    for (const [tenant, p] of Object.entries(tenants)) {
      if (!p.windows.some(([a, b]) => t >= a && t < b) || t < next[tenant]) continue;
      if ((pending[p.leaf] || 0) >= p.cap) continue;
      await submit(tenant, pick(p.jobs));
      next[tenant] = t + p.every * (0.5 + rnd());
    }
    await sleep(1000);
  }
}

// The five pages of the busy cluster, once the scene has run its course.
async function sceneShots(sc) {
  await sc.done;
  if (sc.error) throw sc.error;
  const { srv } = sc;
  const page = await open(ADMIN, srv);
  await page.waitForSelector('#shell:not([hidden])');

  await go(page, '#/overview');
  // The jobs finished are a point a minute: the scene's history is the GPUs' 30 samples or more.
  await chartsDrawn(page, 4, { minPoints: 2 });
  await page.waitForFunction(() => Chart.getChart(document.querySelector('#page canvas')).data.datasets[0].data.length >= 30);
  await shot(page, 'overview');

  const queues = (await api(srv, ADMIN, 'GET', '/v1/queues')).queues;
  await go(page, '#/queues');
  await page.waitForFunction((n) => document.querySelectorAll('table.queues tbody tr[data-path]').length === n, queues.length);
  check(await page.locator('table.queues tr[data-path="/"].borrowing').count() === 0, 'the root never borrows');
  await chartsDrawn(page, 1, { minPoints: 30 });
  await shot(page, 'queues');

  await go(page, '#/jobs');
  await page.waitForSelector('table.jobs tbody tr[data-id] .state-running');
  await shot(page, 'jobs');

  // A job with a story: preempted and running again if there is one, a gang, running a while;
  // its page shows its history and its log.
  const running = (await api(srv, ADMIN, 'GET', '/v1/jobs?state=running&limit=1000')).jobs;
  const ranAt = (j) => (typeof j.started_at === 'number' ? j.started_at : Date.parse(j.started_at) / 1000) || Date.now() / 1000;
  const score = (j) => (j.preemptions ? 40 : 0) + ((j.allocation || []).length > 1 ? 15 : 0) + Math.min(30, Date.now() / 1000 - ranAt(j));
  const job = running.sort((a, b) => score(b) - score(a))[0];
  check(job, 'a job runs');
  await go(page, `#/jobs/${job.id}`);
  await page.waitForSelector('table.events tr[data-type="Started"]');
  await page.waitForFunction(() => (document.getElementById('job-log').textContent || '').split('\n').length > 5);
  await shot(page, 'job');

  // A reservation for team-d (the GPUs its jobs hold now count as its own), and the next one.
  const t = Date.now() / 1000;
  await api(srv, ADMIN, 'POST', '/v1/reservations', { name: 'ranker-deadline', tenant: 'team-d', gpus: 4, start: t, end: t + 4 * 3600, ignore_jobs: true });
  await api(srv, ADMIN, 'POST', '/v1/reservations', { name: 'eval-window', tenant: 'team-c', gpus: 2, start: t + 86400, end: t + 86400 + 7200, ignore_jobs: true });
  await go(page, '#/nodes');
  await page.waitForFunction(() => document.querySelectorAll('.gpu-cell').length === 16 && document.querySelectorAll('.seg[data-job]').length > 0);
  await page.waitForSelector('table.reservations tbody tr[data-reservation="eval-window"]');
  await shot(page, 'nodes');

  await go(page, '#/usage');
  await page.waitForSelector('table.usage tbody tr[data-who]');
  await shot(page, 'usage');
}

// Stops the driver and the scene's jobs (they outlive the server), then the server.
async function stopScene(sc) {
  sc.stop = true;
  await sc.done;
  const { srv } = sc;
  try {
    const { jobs } = await api(srv, ADMIN, 'GET', '/v1/jobs?state=pending,running&limit=10000');
    for (const j of jobs) await api(srv, ADMIN, 'POST', `/v1/jobs/${j.id}/cancel?force=true`).catch(() => {});
    for (let i = 0; i < 100; i++) {
      if (!(await api(srv, ADMIN, 'GET', '/v1/jobs?state=running&limit=1')).jobs.length) break;
      await sleep(100);
    }
  } catch { /* the server is gone already */ }
  await srv.stop();
  fs.rmSync(sc.bin, { recursive: true, force: true });
}
