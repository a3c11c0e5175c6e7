// Drives the live page (`heaptrail run --http ADDR`, GET /) in Debian's
// chromium while the program runs, for tests/views/test_html.py:
//
//   node live_page.js http://127.0.0.1:PORT/
//
// Opens the growth view, waits for the page to fetch new data with a
// new last dump (up to 20 s), and prints one JSON object: whether the page was
// reloaded (a mark set on window survives only without a reload), the
// view and the flame graph's search still as the reader left them, the
// growth rows before and after, and every console error, page error and
// request other than the page and its data.
'use strict';
const { chromium } = require('playwright-core');

async function main() {
  const url = process.argv[2];
  const browser = await chromium.launch({
    executablePath: process.env.HEAPTRAIL_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
  const out = { errors: [], requests: [] };
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
    page.on('pageerror', (e) => out.errors.push('page error: ' + e.message));
    page.on('requestfailed', (r) => out.errors.push('failed request: ' + r.url()));
    page.on('request', (r) => {
      const u = r.url();
      if (u !== url && u !== new URL('/debug/heaptrail/page.json', url).href) out.requests.push(u);
    });
    await page.goto(url);
    await page.waitForSelector('#live-status');
    await page.evaluate(() => { window.__mark = 'not reloaded'; });
    const rows = () => page.$$eval('#view-growth tbody tr[data-site]', (r) => r.map((x) => ({
      site: x.dataset.site, rank: x.dataset.rank, trend: x.dataset.trend })));
    const dumps = () => page.$eval('#live-status', (e) => +e.dataset.dumps);
    const last = () => page.$eval('#live-status', (e) => e.dataset.last);
    // the flame graph, searched; then the growth view
    await page.click('#tab-flame');
    await page.fill('#flame-search', 'grow_site');
    out.matched_before = await page.$eval('#flame-matched', (e) => +e.dataset.bytes).catch(() => null);
    await page.click('#tab-growth');
    out.dumps_before = await dumps();
    out.last_before = await last();
    out.rows_before = await rows();
    const t0 = Date.now();
    while (Date.now() - t0 < 20000) {
      await page.waitForTimeout(250);
      if (await last() !== out.last_before &&
          await page.$eval('#live-status', (e) => +e.dataset.updates) > 0) break;
    }
    out.dumps_after = await dumps();
    out.last_after = await last();
    out.updates = await page.$eval('#live-status', (e) => +e.dataset.updates);
    out.mark = await page.evaluate(() => window.__mark);
    out.view = await page.$eval('[role=tab][aria-selected=true]', (e) => e.id);
    out.rows_after = await rows();
    out.head = await page.$eval('#growth-head', (e) => e.textContent).catch(() => null);
    await page.click('#tab-flame');
    out.search_after = await page.$eval('#flame-search', (e) => e.value);
    out.matched_after = await page.$eval('#flame-matched', (e) => +e.dataset.bytes).catch(() => null);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
