// The dashboard of `tessera kube --read-auth kubernetes`, in a real browser, on a real control
// plane (tools/testcluster: etcd, kube-apiserver, KWOK): the sign-in asks for a Kubernetes
// token; a forged one is refused; a ServiceAccount token from `kubectl create token` signs in
// and the badge names its user; the jobs table shows the namespaces RBAC lets that user list
// and nothing of the others; signing out forgets the token.
// alice has `view` in team-a and the shipped tessera-viewer (the cluster-wide views the
// overview draws); team-b's job must never reach her page.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  run, launchBrowser, newPage, check, tesseraBinary, tempDir, sleep, repo,
} from './harness.mjs';

const dir = tempDir('tessera-kube-signin-');
const tc = path.join(repo, 'tools', 'testcluster', 'bin', 'testcluster');
const procs = [];
const state = {};

function kubectl(...args) {
  return execFileSync(tc, ['kubectl', '--kubeconfig', path.join(dir, 'cluster', 'admin.kubeconfig'), ...args],
    { stdio: 'pipe', timeout: 30000 }).toString();
}

// Retried: a namespace takes pods only once its default ServiceAccount exists, and the view
// role gets its rules from the aggregation controller a moment after the cluster starts.
async function until(what, fn, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${what}: ${e.message}`);
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await sleep(200);
  }
}

const pod = (ns, name) => ({
  apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: ns },
  spec: { schedulerName: 'tessera', containers: [{ name: 'main', image: 'trainer', resources: { limits: { 'nvidia.com/gpu': '2' } } }] },
});

const browserReady = launchBrowser();
let browser = null;

await run([
  ['a real control plane, two namespaces, alice with view in team-a, tessera kube', async () => {
    check(fs.existsSync(tc), `${tc} missing: scripts/setup.sh builds it`);
    execFileSync(tc, ['up', '--dir', path.join(dir, 'cluster'), '--background', '--gpu-nodes', '2'],
      { stdio: 'pipe', timeout: 120000 });
    for (const f of ['00-namespace.yaml', '02-rbac.yaml']) kubectl('apply', '-f', path.join(repo, 'deploy', 'kubernetes', f));
    for (const ns of ['team-a', 'team-b']) kubectl('create', 'namespace', ns);
    kubectl('create', 'serviceaccount', 'alice', '-n', 'team-a');
    kubectl('create', 'rolebinding', 'alice-view', '--clusterrole=view', '--serviceaccount=team-a:alice', '-n', 'team-a');
    kubectl('create', 'clusterrolebinding', 'alice-viewer', '--clusterrole=tessera-viewer', '--serviceaccount=team-a:alice');
    await until('view aggregated', () => kubectl('auth', 'can-i', 'list', 'pods', '-n', 'team-a',
      '--as=system:serviceaccount:team-a:alice').startsWith('yes'));
    state.token = kubectl('create', 'token', 'alice', '-n', 'team-a').trim();
    const manifest = path.join(dir, 'pods.json');
    fs.writeFileSync(manifest, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [pod('team-a', 'mine'), pod('team-b', 'theirs')] }));
    await until('pods created', () => kubectl('apply', '-f', manifest));
    const log = fs.openSync(path.join(dir, 'kube.log'), 'a');
    const addrFile = path.join(dir, 'addr');
    const kube = spawn(tesseraBinary(), ['kube', '--kubeconfig', path.join(dir, 'cluster', 'admin.kubeconfig'),
      '--listen', '127.0.0.1:0', '--addr-file', addrFile, '--read-auth', 'kubernetes', '--history-interval', '1'],
    { stdio: ['ignore', log, log] });
    procs.push(kube);
    state.addr = await until('tessera kube listening', () => fs.existsSync(addrFile) && fs.readFileSync(addrFile, 'utf8').trim());
    state.url = `http://${state.addr}`;
    await until('both pods bound', () => kubectl('get', 'pods', '-A', '-o', 'jsonpath={.items[*].spec.nodeName}').split(' ').filter(Boolean).length === 2);
    browser = await browserReady;
  }],

  ['the sign-in asks for a Kubernetes token and refuses a forged one', async () => {
    const page = await newPage(browser);
    page.setDefaultTimeout(10000);
    state.page = page;
    page.failed = [];
    page.on('response', (r) => { if (r.status() >= 400) page.failed.push(`${r.status()} ${new URL(r.url()).pathname}`); });
    await page.goto(`${state.url}/ui/`);
    await page.waitForSelector('#signin:not([hidden])');
    check(await page.textContent('#signin-label') === 'Kubernetes token', `label: ${await page.textContent('#signin-label')}`);
    check((await page.textContent('#signin-hint')).includes('kubectl create token'), 'the hint says where a token comes from');
    await page.fill('#signin-token', 'forged-token');
    await page.click('#signin-submit');
    await page.waitForSelector('#signin-error:not([hidden])');
    check((await page.textContent('#signin-error')).includes('does not accept this token'), await page.textContent('#signin-error'));
  }],

  ["alice's token: her name on the badge, team-a's job and nothing of team-b's", async () => {
    const page = state.page;
    await page.fill('#signin-token', state.token);
    await page.click('#signin-submit');
    await page.waitForSelector('#shell:not([hidden])');
    const who = await page.textContent('#who');
    check(who === 'system:serviceaccount:team-a:alice · read-only', `badge: ${who}`);
    check(await page.isVisible('#signout'), 'a sign-out for the token');
    await page.evaluate(() => { location.hash = '#/jobs'; });
    await page.waitForSelector('table.jobs tbody tr[data-tenant="team-a"]');
    await sleep(1500); // another poll: still nothing of team-b
    const tenants = await page.$$eval('table.jobs tbody tr[data-id]', (rs) => rs.map((r) => r.dataset.tenant));
    check(tenants.length === 1 && tenants[0] === 'team-a', `rows: ${tenants}`);
    check(!(await page.textContent('#page')).includes('team-b/'), 'no team-b job anywhere on the page');
    await page.evaluate(() => { location.hash = '#/queues'; });
    await page.waitForSelector('table.queues tbody tr[data-path="team-a"]');
  }],

  ['signing out forgets the token; the only refusals were the forged sign-in', async () => {
    const page = state.page;
    await page.click('#signout');
    await page.waitForSelector('#signin:not([hidden])');
    check(await page.evaluate(() => sessionStorage.getItem('tessera.token')) === null, 'token forgotten');
    const unexpected = page.failed.filter((f) => f !== '401 /v1/whoami');
    check(unexpected.length === 0, unexpected.join('\n'));
    check(page.errors.filter((e) => !/401/.test(e)).length === 0, page.errors.join('\n'));
  }],
], async () => {
  if (browser) await browser.close(); else await browserReady.then((b) => b.close()).catch(() => {});
  for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
  try { execFileSync(tc, ['down', '--dir', path.join(dir, 'cluster')], { stdio: 'pipe', timeout: 60000 }); } catch {}
});
