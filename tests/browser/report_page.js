// Drives heaptrail's HTML page in Debian's chromium through Playwright
// (playwright-core, pinned in package-lock.json; no browser download) and
// prints what it read from every view as one JSON object, for
// tests/views/test_html.py to check against the CLI's own output.
//
//   node report_page.js PAGE.html '{"search": RE, "zoom": NAME, "peek": [NAME...], "shots": DIR}'
//
// It clicks through every view, filters the leak records by each kind,
// searches the flame graph and zooms on a frame (by mouse, then by
// keyboard), and records every console error, page error and request
// that is not the page itself (the page must make none).
'use strict';
const { chromium } = require('playwright-core');
const path = require('path');

async function main() {
  const page_path = path.resolve(process.argv[2]);
  const opt = JSON.parse(process.argv[3] || '{}');
  const browser = await chromium.launch({
    executablePath: process.env.HEAPTRAIL_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
  const out = { errors: [], requests: [], views: {} };
  try {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await ctx.newPage();
    const url = 'file://' + page_path;
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') out.errors.push(m.type() + ': ' + m.text()); });
    page.on('pageerror', (e) => out.errors.push('page error: ' + e.message));
    page.on('requestfailed', (r) => out.errors.push('failed request: ' + r.url()));
    page.on('request', (r) => { if (r.url().split('#')[0] !== url) out.requests.push(r.url()); });
    const t0 = Date.now();
    await page.goto(url);
    await page.waitForSelector('#tab-summary[aria-selected=true]');
    out.interactive_ms = Date.now() - t0;
    const shot = async (name) => {
      if (opt.shots) await page.screenshot({ path: path.join(opt.shots, name + '.png') });
    };
    const text = (sel) => page.$eval(sel, (e) => e.textContent).catch(() => null);

    // summary
    const v = out.views;
    v.summary = {
      pools: await page.$$eval('#pools tbody tr', (r) => r.map((x) => [x.dataset.pool, +x.dataset.lost])),
      kinds: await page.$$eval('#leak-summary tbody tr', (rows) => rows.map((r) => ({
        kind: r.dataset.kind, bytes: +r.cells[1].dataset.bytes, blocks: +r.cells[2].dataset.blocks,
        shown: r.cells[1].textContent }))).catch(() => []),
      peak: await text('#sum-peak'), final: await text('#sum-final'), mode: await text('#sum-mode'),
      command: await text('#sum-command'), text: await text('#summary-text'),
      shape: {
        temporary: await page.$eval('#shape-temporary', (e) => +e.dataset.count).catch(() => null),
        sizes: await page.$$eval('#shape-sizes tbody tr', (r) => r.map((x) => [+x.dataset.class, +x.dataset.count])),
        none: await text('#shape-none'),
      },
    };
    await shot('summary');

    // keyboard: from the first tab, the right arrow opens the next view
    await page.focus('#tab-summary');
    await page.keyboard.press('ArrowRight');
    v.keyboard_tab = await page.$eval('#tab-leaks', (e) => e.getAttribute('aria-selected') === 'true' && document.activeElement === e);

    // leaks, filtered by each kind
    await page.click('#tab-leaks');
    v.leaks = { records: await page.$$eval('#leak-list details', (d) => d.length), by_kind: {} };
    const kinds = await page.$$eval('#leak-kind option', (o) => o.map((x) => x.value).filter((x) => x));
    for (const k of kinds) {
      await page.selectOption('#leak-kind', k);
      v.leaks.by_kind[k] = await page.$$eval('#leak-list details', (d) => d.map((x) => +x.dataset.bytes));
    }
    if (kinds.length) await page.selectOption('#leak-kind', '');
    const mods = await page.$$eval('#leak-module option', (o) => o.map((x) => x.value).filter((x) => x));
    v.leaks.modules = {};
    for (const m of mods) {
      await page.selectOption('#leak-module', m);
      v.leaks.modules[m] = await page.$$eval('#leak-list details', (d) => d.length);
    }
    if (mods.length) await page.selectOption('#leak-module', '');
    v.leaks.pools = {};
    for (const q of await page.$$eval('#leak-pool option', (o) => o.map((x) => x.value).filter((x) => x !== '*'))) {
      await page.selectOption('#leak-pool', q);
      v.leaks.pools[q] = await page.$$eval('#leak-list details', (d) => d.map((x) => +x.dataset.bytes));
    }
    if (Object.keys(v.leaks.pools).length) await page.selectOption('#leak-pool', '*');
    if (v.leaks.records) {
      await page.click('#leak-list details summary');
      v.leaks.first = await page.$eval('#leak-list details', (d) => ({
        summary: d.querySelector('summary').textContent,
        frames: [...d.querySelectorAll('tbody tr')].map((r) => [...r.cells].map((c) => c.textContent)),
        suppression: (d.querySelector('.supp code') || {}).textContent || null,
      }));
      await page.click('#leak-list details .supp button').catch(() => {});
    }
    await shot('leaks');

    // growth
    await page.click('#tab-growth');
    v.growth = {
      head: await text('#growth-head'), note: await text('#growth-note'), more: await text('#growth-more'),
      rows: await page.$$eval('#view-growth tbody tr[data-site]', (rows) => rows.map((r) => ({
        site: r.dataset.site, rank: r.dataset.rank, trend: r.dataset.trend,
        cells: [...r.cells].map((c) => c.textContent), spark: !!r.querySelector('svg polyline') }))),
      why: await text('#view-growth .note'),
      wrappers: await text('#growth-wrappers'),
      // the chart of the largest sites: each band's site (null: the
      // others) and the values it was drawn from; the legend's names
      area: await page.$$eval('#area-svg path.area', (ps) => ps.map((p) => ({
        site: p.dataset.site || null, values: p.dataset.values.split(',').map(Number) }))),
      legend: await page.$$eval('#area-legend li', (li) => li.map((x) => x.textContent)),
    };
    await shot('growth');

    // timeline
    await page.click('#tab-timeline');
    v.timeline = {
      svg: !!(await page.$('#timeline-svg')),
      peak: await page.$eval('#timeline-peak title', (t) => t.textContent).catch(() => null),
      marks: await page.$$eval('.dumpmark-g', (g) => g.length),
      dumps: await page.$$eval('#dump-list tbody tr', (r) => r.length).catch(() => 0),
    };
    await shot('timeline');
    // a time range: dragged across the chart, then the dumps chosen
    if (await page.$('#range-show')) {
      const r = await page.$eval('#timeline-svg', (e) => { const b = e.getBoundingClientRect(); return [b.x, b.y, b.width, b.height]; });
      await page.mouse.move(r[0] + 80 + (r[2] - 100) * 0.3, r[1] + r[3] / 2);
      await page.mouse.down();
      await page.mouse.move(r[0] + 80 + (r[2] - 100) * 0.8, r[1] + r[3] / 2, { steps: 5 });
      await page.mouse.up();
      v.range = {
        dragged: [await page.$eval('#range-from', (e) => +e.value), await page.$eval('#range-to', (e) => +e.value)],
        note: await text('#range-note'),
        band: await page.$eval('#timeline-band', (e) => +e.getAttribute('width')),
      };
      await shot('timeline-range');
      const n = await page.$$eval('#range-to option', (o) => o.length);
      await page.selectOption('#range-from', '0');
      await page.selectOption('#range-to', String(n - 1));
      await page.click('#range-show');
      v.range.view = await page.$eval('[role=tab][aria-selected=true]', (e) => e.id);
      v.range.dump = await page.$eval('#flame-dump', (e) => +e.value);
      v.range.base = await page.$eval('#flame-base', (e) => e.selectedIndex);
      v.range.dumps = n;
      await page.selectOption('#flame-base', '');
      await page.click('#tab-timeline');
    }

    // flame graph: from a dump mark of the timeline, then the last dump
    if (v.timeline.marks) {
      await page.click('.dumpmark-g >> nth=0', { force: true });  // marks of dumps a moment apart overlap
      v.flame_from_mark = await page.$eval('#flame-dump', (s) => +s.value).catch(() => null);
    }
    await page.click('#tab-flame');
    const flame = v.flame = {};
    if (await page.$('#flame-dump')) {
      const n = await page.$$eval('#flame-dump option', (o) => o.length);
      await page.selectOption('#flame-dump', String(n - 1));
      flame.dump = await page.$eval('#flame-dump', (e) => e.options[e.selectedIndex].textContent.split(' ')[0]);
      flame.root = await page.$eval('#flame-box .fr[data-id="0"]', (e) => +e.dataset.v);
      flame.frames = await page.$$eval('#flame-box .fr', (f) => f.length);
      flame.more = await page.$$eval('#flame-box .fr.more', (f) => f.map((x) => [x.dataset.name, +x.dataset.v]));
      if (opt.search) {
        await page.fill('#flame-search', opt.search);
        flame.matched = await page.$eval('#flame-matched', (e) => ({ text: e.textContent, bytes: +e.dataset.bytes }));
        flame.hits = await page.$$eval('#flame-box .fr.hit', (f) => f.map((x) => x.dataset.name));
      }
      await shot('flame');
      const topRows = () => page.$$eval('#top-table tbody tr', (r) => r.map((x) => [x.dataset.name, +x.dataset.flat, +x.dataset.cum]));
      flame.top = await topRows();
      await page.click('#top-table [data-sort=cum]');
      flame.top_by_cum = await topRows();
      // the top-down and bottom-up tables, every node opened
      if (opt.tree) {
        flame.tree = {};
        const rows = () => page.$$eval('#tree-table tbody tr', (r) => r.map((x) => [+x.dataset.depth, x.dataset.name, +x.dataset.v, +x.dataset.self]));
        for (const dir of ['top-down', 'bottom-up']) {
          await page.selectOption('#tree-dir', dir);
          for (let i = 0; i < 500; i++) {
            const b = await page.$('#tree-table button.tog[aria-expanded=false]');
            if (!b) break;
            await b.click();
          }
          flame.tree[dir] = await rows();
          await page.$eval('#tree-table', (e) => e.scrollIntoView());
          await shot('tree-' + dir);
        }
        await page.click('#tree-table [data-tsort=name]');
        flame.tree.by_name = await rows();
        await page.click('#tree-table [data-tsort=v]');
        await page.evaluate(() => window.scrollTo(0, 0));
      }
      // caller/callee of a function picked in the functions table
      if (opt.peek) {
        flame.peek = {};
        const side = (id) => page.$$eval('#' + id + ' tbody tr[data-name]', (r) => r.map((x) => [x.dataset.name, +x.dataset.bytes]));
        for (const name of opt.peek) {
          await page.click('#top-table tr[data-name="' + name + '"] button');
          flame.peek[name] = { callers: await side('peek-callers'), callees: await side('peek-callees'),
            self: await page.$eval('#peek-callees tr[data-self]', (x) => +x.dataset.self).catch(() => 0),
            search: await page.$eval('#flame-search', (e) => e.value) };
        }
        await page.$eval('#peek', (e) => e.scrollIntoView());
        await shot('callers-callees');
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.fill('#flame-search', opt.search || '');
      }
      if (opt.zoom) {
        const sel = '#flame-box .fr[data-name="' + opt.zoom + '"]';
        await page.click(sel + ' >> nth=0');
        flame.zoomed = await page.$eval(sel, (e) => ({ v: +e.dataset.v, width: parseFloat(e.style.width),
          box: document.getElementById('flame-box').clientWidth }));
        flame.details = await text('#flame-details');
        flame.after_zoom_matched = await page.$eval('#flame-matched', (e) => +e.dataset.bytes).catch(() => null);
        await shot('flame-zoomed');
        await page.keyboard.press('Escape');
        flame.reset = await text('#flame-details');
        // by keyboard: focus the frame, Enter
        await page.focus(sel);
        await page.keyboard.press('Enter');
        flame.keyboard_zoom = await page.$eval(sel, (e) => parseFloat(e.style.width) / document.getElementById('flame-box').clientWidth);
        // reversed: the allocation site next to the root, the same bytes
        await page.check('#flame-reversed');
        flame.reversed = {
          matched: await page.$eval('#flame-matched', (e) => +e.dataset.bytes).catch(() => null),
          first_row: await page.$$eval('#flame-box .fr', (f) => {
            const root = f.find((x) => x.dataset.id === '0');
            return f.filter((x) => x.style.top === String(parseFloat(root.style.top) - 18) + 'px')
              .map((x) => [x.dataset.name, +x.dataset.v]);
          }),
        };
        await shot('flame-reversed');
        // differential: the last dump against the first
        await page.uncheck('#flame-reversed');
        await page.fill('#flame-search', '');
        const first = await page.$eval('#flame-base option:nth-child(2)', (o) => o.value);
        await page.selectOption('#flame-base', first);
        flame.diff = await page.$eval(sel, (e) => ({ v: +e.dataset.v, old: +e.dataset.old,
          colour: getComputedStyle(e).backgroundColor }));
        flame.diff.base = first;
        await page.hover(sel);
        flame.diff.details = await text('#flame-details');
        await shot('flame-diff');
        await page.selectOption('#flame-base', '');
      }
    }

    // each process (the select in the header when there are several):
    // its leak summary, and its records filtered by each kind
    const nproc = await page.$$eval('#proc option', (o) => o.length);
    v.procs = [];
    for (let i = 0; i < Math.max(nproc, 1); i++) {
      if (nproc) await page.selectOption('#proc', String(i));
      await page.click('#tab-summary');
      const p = {
        pid: await page.$eval('#view-summary h2[data-pid]', (h) => +h.dataset.pid),
        kinds: await page.$$eval('#leak-summary tbody tr', (rows) => rows.map((r) => ({
          kind: r.dataset.kind, bytes: +r.cells[1].dataset.bytes, blocks: +r.cells[2].dataset.blocks })))
          .catch(() => []),
        by_kind: {},
      };
      await page.click('#tab-leaks');
      p.records = await page.$$eval('#leak-list details', (d) => d.length);
      for (const k of await page.$$eval('#leak-kind option', (o) => o.map((x) => x.value).filter((x) => x))) {
        await page.selectOption('#leak-kind', k);
        p.by_kind[k] = await page.$$eval('#leak-list details', (d) => d.map((x) => +x.dataset.bytes));
      }
      v.procs.push(p);
    }

    // the dark scheme
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.click('#tab-growth');
    v.dark_bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await shot('growth-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    v.light_bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
