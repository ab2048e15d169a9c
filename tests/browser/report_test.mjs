// `tessera report` in a real browser: two policies on a slice of the Philly trace (and a frag
// result) make one page that, opened from disk with every network request refused, draws every
// chart with its data and no console error. --screenshots DIR saves DIR/report.png.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { run, launchBrowser, newPage, check, tempDir, tesseraBinary, screenshotDir, repo } from './harness.mjs';

const tessera = path.resolve(tesseraBinary());  // the commands run in a scratch directory
const dataDir = process.env.TESSERA_DATA || path.resolve(repo, '..', 'shared', 'data');
const philly = path.join(dataDir, 'philly', 'pollux', 'philly.csv');
const fragPods = path.join(dataDir, 'alibaba-gpu-2023', 'openb_pod_list_default.csv');
if (!fs.existsSync(philly)) {
  console.log(`skip: ${philly} is missing`);
  process.exit(0);
}
const dir = tempDir('tessera-report-');
const cluster = path.join(dir, 'c16x4.yaml');
fs.writeFileSync(cluster, '{racks: 1, nodes_per_rack: 16, node: {gpus: 4, gpu_type: V100}}\n');
const tess = (...args) => execFileSync(tessera, args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const results = [];
const policies = ['fifo', 'las'];
const browser = await launchBrowser();
let page;
const blocked = [];

await run([
  ['two policies on 1,500 Philly jobs, and a frag run', async () => {
    for (const p of policies) {
      const out = path.join(dir, `${p}.json`);
      tess('simulate', '--workload', philly, '--max-jobs', '1500', '--cluster', cluster,
        '--policy', p, '--quiet', '--json', out);
      results.push(out);
    }
    if (fs.existsSync(fragPods)) {
      const out = path.join(dir, 'frag.json');
      tess('frag', '--policy', 'fgd', '--seeds', '1', '--quiet', '--json', out);
      results.push(out);
    }
  }],
  ['tessera report writes one page', async () => {
    tess('report', ...results, '-o', path.join(dir, 'r.html'), '--data-dir', dataDir);
    const size = fs.statSync(path.join(dir, 'r.html')).size;
    check(size > 200000 && size < 5e6, `page size ${size}`);
  }],
  ['a file that is not a result fails, naming it, and writes nothing', async () => {
    fs.writeFileSync(path.join(dir, 'other.json'), '{"hello": 1}');
    let err = null;
    try {
      tess('report', results[0], path.join(dir, 'other.json'), '-o', path.join(dir, 'bad.html'));
    } catch (e) { err = e; }
    check(err && err.status === 2, 'exit status 2');
    check(/other\.json: not a Tessera result/.test(err.stderr), err && err.stderr);
    check(!fs.existsSync(path.join(dir, 'bad.html')), 'no output file');
  }],
  ['the page opens offline and draws every chart', async () => {
    page = await newPage(browser, { offline: true });
    await page.context().route('**/*', (r) => {
      if (r.request().url().startsWith('file:')) return r.continue();
      blocked.push(r.request().url());
      return r.abort();
    });
    await page.goto('file://' + path.join(dir, 'r.html'));
    await page.waitForFunction(() => document.body.dataset.ready !== undefined, null, { timeout: 10000 });
    check(blocked.length === 0, `requests beyond the file: ${blocked.join(', ')}`);
    const charts = await page.evaluate(() => [...document.querySelectorAll('canvas')].map((c) => {
      const chart = Chart.getChart(c);
      const title = c.closest('.figure').querySelector('h3').textContent;
      if (!chart) return { title, chart: false };
      // Drawn pixels: anything not fully transparent (the canvas has no background).
      const ctx = c.getContext('2d');
      const px = ctx.getImageData(0, 0, c.width, c.height).data;
      let drawn = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i] > 0) drawn++;
      return {
        title, chart: true, drawn,
        datasets: chart.data.datasets.map((d) => ({ label: d.label, points: d.data.filter((v) => v !== null && v !== undefined).length })),
      };
    }));
    check(charts.length >= 8, `${charts.length} charts`);
    for (const c of charts) {
      check(c.chart, `"${c.title}" has a Chart`);
      check(c.datasets.length > 0, `"${c.title}" has datasets`);
      for (const d of c.datasets) check(d.points > 0, `"${c.title}" dataset "${d.label}" has points`);
      check(c.drawn > 2000, `"${c.title}" drew ${c.drawn} pixels`);
    }
    const summaryRows = await page.evaluate(() => {
      const h = [...document.querySelectorAll('h2')].find((x) => x.textContent === 'Simulation runs');
      let n = h.nextElementSibling;
      while (n && !n.classList.contains('table-wrap')) n = n.nextElementSibling;
      return [...n.querySelectorAll('tbody tr')].map((tr) => tr.querySelector('td').textContent);
    });
    check(summaryRows.length === 2, `summary rows: ${summaryRows.join(', ')}`);
    for (const [i, p] of policies.entries()) check(summaryRows[i].startsWith(p), `row ${i}: ${summaryRows[i]}`);
    for (const t of ['JCT distribution', 'Queueing delay distribution', 'GPU allocation over time']) {
      const c = charts.find((x) => x.title === t);
      check(c, `chart "${t}"`);
      const names = c.datasets.map((d) => d.label);
      check(names.length === 2 && summaryRows.every((r) => names.includes(r)), `"${t}" lines: ${names.join(', ')}`);
    }
    check(charts.some((c) => c.title.startsWith('Share against entitlement: las')), 'a share chart per run');
    check(charts.some((c) => c.title === 'Preemptions and failures over time'), 'the timeline');
    check(charts.some((c) => c.title === 'Mean JCT per tenant'), 'per-tenant JCT');
    if (results.length > 2) {
      const alloc = charts.find((c) => c.title === 'GPU allocation against arrived demand');
      check(alloc && alloc.datasets.some((d) => d.label.includes('(published)')), 'published FGD curves');
    }
    check(page.errors.length === 0, page.errors.join('\n'));
  }],
  ['screenshot', async () => {
    const out = screenshotDir();
    if (!out) return;
    fs.mkdirSync(out, { recursive: true });
    await page.screenshot({ path: path.join(out, 'report.png'), fullPage: true });
  }],
], async () => { await browser.close(); fs.rmSync(dir, { recursive: true, force: true }); });
