// Shared by the browser tests: a real Chromium (Debian's) driven by playwright-core (web/'s
// lock file), a real `tessera serve` on a free loopback port, and tiny assertion helpers.
// Every test runs under ctest (tests/CMakeLists.txt) with the tessera binary as argv[2].
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '..', '..');
const require = createRequire(import.meta.url);
const { chromium } = require(path.join(repo, 'web', 'node_modules', 'playwright-core'));

// The tessera binary: --tessera PATH (ctest passes it), else $TESSERA_BINARY.
export function tesseraBinary() {
  const i = process.argv.indexOf('--tessera');
  const bin = i > 0 ? process.argv[i + 1] : process.env.TESSERA_BINARY;
  if (!bin || !fs.existsSync(bin)) throw new Error(`no tessera binary (--tessera PATH): ${bin}`);
  return bin;
}

// The API-server emulator's binary: --emulator PATH (ctest passes it), else
// $TESSERA_KUBE_EMULATOR.
export function emulatorBinary() {
  const i = process.argv.indexOf('--emulator');
  const bin = i > 0 ? process.argv[i + 1] : process.env.TESSERA_KUBE_EMULATOR;
  if (!bin || !fs.existsSync(bin)) throw new Error(`no emulator binary (--emulator PATH): ${bin}`);
  return bin;
}

// Where screenshots go when the test is asked for them (--screenshots DIR), else null.
export function screenshotDir() {
  const i = process.argv.indexOf('--screenshots');
  return i > 0 ? process.argv[i + 1] : null;
}

// Chromium as the machine allows it: headless, no sandbox (root), no background traffic (the
// network is closed; Chromium's own connections would be refused and logged).
export async function launchBrowser() {
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// A page that records console errors and uncaught exceptions; `errors` must stay empty.
export async function newPage(browser, opts = {}) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, ...opts });
  const page = await context.newPage();
  page.errors = [];
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  return page;
}

export function tempDir(prefix = 'tessera-browser-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// Starts `tessera serve` with `args` (added to a fresh database and --addr-file) and waits
// until it listens. Returns {url, addr, proc, dir, stop()}.
export async function startServer(args = [], { adminToken = 's3cret', dir = tempDir() } = {}) {
  const addrFile = path.join(dir, 'addr');
  const log = fs.openSync(path.join(dir, 'serve.log'), 'a');
  const proc = spawn(tesseraBinary(), ['serve', '--listen', '127.0.0.1:0', '--addr-file', addrFile,
    '--admin-token', adminToken, '--db', path.join(dir, 'tessera.db'), ...args],
  { stdio: ['ignore', log, log] });
  const deadline = Date.now() + 15000;
  while (!fs.existsSync(addrFile) || fs.readFileSync(addrFile, 'utf8').trim() === '') {
    if (proc.exitCode !== null) throw new Error(`tessera serve exited: ${fs.readFileSync(path.join(dir, 'serve.log'), 'utf8')}`);
    if (Date.now() > deadline) throw new Error('tessera serve did not start in 15 s');
    await sleep(50);
  }
  const addr = fs.readFileSync(addrFile, 'utf8').trim();
  return {
    addr, dir, proc, url: `http://${addr}`,
    async stop() {
      if (proc.exitCode !== null) return;
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    },
  };
}

// A call to the server's API as `token`: the parsed JSON answer, or throws with its status.
export async function api(server, token, method, pathname, body) {
  const res = await fetch(server.url + pathname, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// Waits until every chart on the page (`want` canvases under #page) has data and has drawn it:
// each has a Chart with at least `minPoints` points, laid out, and coloured pixels in its plot
// area. Polled each frame (the cheap checks first) so that a benchmark's time is not rounded to
// a polling interval; the page's own time of success goes to window.__chartsAt.
export async function chartsDrawn(page, want, { timeout = 20000, minPoints = 1 } = {}) {
  try {
    await page.waitForFunction(({ n, minPoints }) => {
      const canvases = [...document.querySelectorAll('#page canvas')];
      const fail = (why) => { window.__chartCheck = why; return false; };
      if (canvases.length !== n) return fail(`${canvases.length} canvases, want ${n}`);
      const charts = [];
      for (const c of canvases) {
        const chart = window.Chart && Chart.getChart(c);
        const name = c.getAttribute('aria-label');
        if (!chart) return fail(`${name}: no chart`);
        if (c.style.visibility === 'hidden') return fail(`${name}: hidden (no history)`);
        const points = chart.data.datasets.reduce((a, d) => a + d.data.filter((p) => p && p.y !== null).length, 0);
        if (points < minPoints) return fail(`${name}: ${points} points`);
        if (!chart.chartArea) return fail(`${name}: not laid out`);
        charts.push([c, chart, name]);
      }
      for (const [c, chart, name] of charts) {
        const a = chart.chartArea;
        const r = chart.currentDevicePixelRatio || 1;
        const x = Math.floor(a.left * r);
        const y = Math.floor(a.top * r);
        const w = Math.max(1, Math.floor((a.right - a.left) * r));
        const hgt = Math.max(1, Math.floor((a.bottom - a.top) * r) + 2);
        const px = c.getContext('2d').getImageData(x, y, w, hgt).data;
        let coloured = 0;
        for (let i = 0; i < px.length && coloured < 8; i += 4) {
          const mx = Math.max(px[i], px[i + 1], px[i + 2]);
          const mn = Math.min(px[i], px[i + 1], px[i + 2]);
          if (px[i + 3] > 64 && mx - mn > 40) coloured++;
        }
        if (coloured < 8) return fail(`${name}: blank (${coloured} coloured pixels)`);
      }
      window.__chartsAt = performance.now();
      return true;
    }, { n: want, minPoints }, { timeout, polling: 'raf' });
  } catch (e) {
    throw new Error(`charts not drawn: ${await page.evaluate(() => window.__chartCheck).catch(() => e.message)}`);
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// Runs named steps in order and reports each; exits 1 on the first failure (after `cleanup`).
export async function run(steps, cleanup = async () => {}) {
  let failed = false;
  for (const [name, fn] of steps) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      console.log(`FAIL ${name}: ${e.stack || e}`);
      failed = true;
      break;
    }
  }
  await cleanup();
  process.exit(failed ? 1 : 0);
}
