// bench/html/tti.js PAGE.html RUNS [VIEW]: opens the page RUNS times in
// Debian's chromium (playwright-core from tests/browser's lockfile; run
// with NODE_PATH pointing at its node_modules) and prints one JSON line:
// per run, the ms from navigation to the first view drawn (the page's
// data-ready-ms: its data parsed, the view built), the load event, and
// the ms until VIEW (e.g. flame) has been drawn after a click on its tab.
'use strict';
const { chromium } = require('playwright-core');
const path = require('path');

(async () => {
  const page_path = path.resolve(process.argv[2]);
  const runs = +(process.argv[3] || 5), view = process.argv[4] || 'flame';
  const browser = await chromium.launch({
    executablePath: process.env.HEAPTRAIL_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
  const out = { ready: [], load: [], view: [], errors: [] };
  try {
    for (let i = 0; i < runs; i++) {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await ctx.newPage();
      page.on('pageerror', (e) => out.errors.push(e.message));
      await page.goto('file://' + page_path, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready-ms]');
      out.ready.push(+(await page.getAttribute('html', 'data-ready-ms')));
      out.load.push(await page.evaluate(() => {
        const n = performance.getEntriesByType('navigation')[0];
        return n ? n.loadEventEnd : -1;
      }));
      const t = await page.evaluate((v) => {
        const t0 = performance.now();
        document.getElementById('tab-' + v).click();
        return performance.now() - t0;
      }, view);
      out.view.push(t);
      await ctx.close();
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
