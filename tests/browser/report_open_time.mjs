// How long a `tessera report` page takes to open in Chromium (not a ctest test: a measurement).
// usage: node tests/browser/report_open_time.mjs REPORT.html [RUNS]
// Prints, per run and as the median, the milliseconds from navigation start to the load event
// and to every chart drawn (report.js stamps body[data-drawn-ms]), offline.
import path from 'node:path';
import { launchBrowser, newPage } from './harness.mjs';

const file = path.resolve(process.argv[2]);
const runs = Number(process.argv[3] || 5);
const browser = await launchBrowser();
const load = [], drawn = [];
for (let i = 0; i < runs; i++) {
  const page = await newPage(browser, { offline: true });
  await page.goto('file://' + file, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.ready !== undefined);
  const t = await page.evaluate(() => ({
    load: performance.getEntriesByType('navigation')[0].loadEventEnd,
    drawn: Number(document.body.dataset.drawnMs),
    charts: Number(document.body.dataset.ready),
  }));
  if (page.errors.length) throw new Error(page.errors.join('\n'));
  load.push(t.load);
  drawn.push(t.drawn);
  console.log(`run ${i + 1}: load event ${t.load.toFixed(0)} ms, ${t.charts} charts drawn at ${t.drawn} ms`);
  await page.context().close();
}
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
console.log(`median: load event ${median(load).toFixed(0)} ms, charts drawn ${median(drawn)} ms`);
await browser.close();
