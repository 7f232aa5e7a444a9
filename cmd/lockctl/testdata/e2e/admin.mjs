// admin.mjs drives Debian's Chromium through the lockadmin page, for
// cmd/lockctl/e2e_test.go. It takes one JSON argument:
//
//   {"mode": "release", "url": ..., "user": ..., "password": ..., "name": ...,
//    "keep": ..., "reason": ..., "screenshot": ..., "dialogScreenshot": ...}
//     opens the page, checks the rows of `name` and `keep`, filters, releases
//     `name` with `reason` through the confirmation dialog, waits for the row
//     to go, and saves screenshots (the dialog open, then the page after).
//   {"mode": "charts", "url": ..., "screenshot": ..., "minSeconds": ...}
//     opens the page and waits until the charts are drawn over minSeconds.
//
// It prints one JSON line with what it saw, and exits 1 on any failure,
// including a script error or a request to another origin. Playwright
// never downloads a browser here: it launches /usr/bin/chromium.
import { chromium } from 'playwright-core';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const cfg = JSON.parse(process.argv[2] || '{}');
const TIMEOUT = 30000;

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function release(page, out) {
  const row = (name) => page.locator(`tbody tr[data-name="${name}"]`);
  await row(cfg.name).waitFor();
  await row(cfg.keep).waitFor();
  const cell = async (name, col) => (await row(name).locator(`[data-col="${col}"]`).textContent()).trim();
  out.pid = await cell(cfg.name, 'pid');
  out.host = await cell(cfg.name, 'host');
  out.owner = (await row(cfg.name).locator('[data-col="host"]').getAttribute('title')).replace(/^Owner: /, '');
  out.token = await cell(cfg.name, 'token');
  out.left = await cell(cfg.name, 'left');
  out.waiters = await cell(cfg.name, 'waiters');
  out.rows = await page.locator('tbody tr').count();

  // The filter: a substring hides the other row at once.
  await page.getByLabel('Name contains').fill(cfg.keep.slice(-5));
  await row(cfg.name).waitFor({ state: 'hidden' });
  check(await row(cfg.keep).isVisible(), 'the filter hid the row that matches');
  await page.getByLabel('Name contains').fill('');
  await row(cfg.name).waitFor({ state: 'visible' });

  // The dialog does not release without a reason.
  await page.getByRole('button', { name: 'Release ' + cfg.name, exact: true }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  check((await dialog.textContent()).includes(cfg.name), 'the dialog does not name the lock');
  await dialog.getByRole('button', { name: 'Release', exact: true }).click();
  check(await dialog.isVisible(), 'the dialog closed without a reason');
  check(await row(cfg.name).isVisible(), 'the row went without a reason');
  await dialog.getByLabel('Reason').fill(cfg.reason);
  if (cfg.dialogScreenshot) await page.screenshot({ path: cfg.dialogScreenshot });
  await dialog.getByRole('button', { name: 'Release', exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
  await row(cfg.name).waitFor({ state: 'detached' });
  await page.getByRole('status').filter({ hasText: 'Released ' + cfg.name }).waitFor();
  out.status = (await page.getByRole('status').textContent()).trim();
  check(await row(cfg.keep).isVisible(), 'the other hold went too');
  await page.screenshot({ path: cfg.screenshot, fullPage: true });
}

async function charts(page, out) {
  // Four charts, each with at least one series drawn, over at least
  // cfg.minSeconds seconds.
  await page.waitForFunction((min) => {
    const figs = document.querySelectorAll('#charts figure');
    const m = /In the last (\d+) (seconds|minutes)/.exec(document.getElementById('totals').textContent);
    return figs.length === 4 && [...figs].every((f) => f.querySelector('path.series[d^="M"]')) &&
      m && (m[2] === 'minutes' || Number(m[1]) >= min);
  }, cfg.minSeconds || 0, { timeout: TIMEOUT + 1000 * (cfg.minSeconds || 0) });
  out.charts = await page.locator('#charts figure').count();
  out.totals = (await page.locator('#totals').textContent()).trim();
  out.legend = await page.locator('#charts .legend span:visible').allTextContents();
  await page.screenshot({ path: cfg.screenshot, fullPage: true });
}

async function main() {
  const out = { mode: cfg.mode };
  const userDataDir = await mkdtemp(join(tmpdir(), 'golocker-e2e-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
      ],
      httpCredentials: cfg.user ? { username: cfg.user, password: cfg.password, send: 'always' } : undefined,
      viewport: { width: 1100, height: 640 },
      deviceScaleFactor: 1,
      colorScheme: 'light',
      timeout: TIMEOUT,
    });
    context.setDefaultTimeout(TIMEOUT);
    const page = context.pages()[0] || (await context.newPage());
    const problems = [];
    const origin = new URL(cfg.url).origin;
    page.on('pageerror', (e) => problems.push('script error: ' + e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push('console error: ' + m.text());
    });
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.protocol !== 'data:' && u.origin !== origin) problems.push('request to another origin: ' + r.url());
    });
    const resp = await page.goto(cfg.url);
    check(resp && resp.ok(), 'GET ' + cfg.url + ': ' + (resp && resp.status()));
    out.csp = resp.headers()['content-security-policy'];
    if (cfg.mode === 'release') await release(page, out);
    else if (cfg.mode === 'charts') await charts(page, out);
    else throw new Error('unknown mode ' + cfg.mode);
    check(problems.length === 0, problems.join('; '));
    out.ok = true;
  } finally {
    if (context) await context.close();
    await rm(userDataDir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error('admin.mjs: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
