// The dashboard's files are served at /ui/ by the server itself, with the chart library.
import { run, launchBrowser, newPage, startServer, check } from './harness.mjs';

const server = await startServer(['--virtual-gpus', '4']);
const browser = await launchBrowser();
const page = await newPage(browser);
await run([
  ['the page loads with the chart library and no console error', async () => {
    await page.goto(server.url + '/ui/');
    check(await page.evaluate(() => typeof Chart === 'function'), 'Chart is defined');
    check(page.errors.length === 0, page.errors.join('\n'));
  }],
], async () => { await browser.close(); await server.stop(); });
