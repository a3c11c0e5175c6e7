/* heaptrail's HTML page, part 3 of 3: the page itself. Reads the data
 * heaptrail wrote into #ht-data and draws five views of the process
 * chosen: summary, leaks, growth, timeline, flame graph. Tabs follow
 * the ARIA tabs pattern (arrow keys move between them); the view shown
 * is in the address's #fragment, so a link can name it. */
(function () {
  var D = window.HT_DATA = JSON.parse(document.getElementById('ht-data').textContent);
  var el = HT.el, VIEWS = [['summary', 'Summary'], ['leaks', 'Leaks'], ['growth', 'Growth'],
    ['timeline', 'Timeline'], ['flame', 'Flame graph']];
  var KINDS = [['definitely_lost', 'definitely lost'], ['indirectly_lost', 'indirectly lost'],
    ['possibly_lost', 'possibly lost'], ['still_reachable', 'still reachable'],
    ['in_use', 'in use'], ['suppressed', 'suppressed']];
  /* what the reader chose; kept when new data comes (live page). dumpName:
   * the flame graph's dump, null for the latest; zoom: the zoomed frame's
   * path of names */
  var state = { proc: 0, view: 'summary', dump: -1, dumpName: null, search: '', inverted: false,
    leakKind: '', leakModule: '', zoom: null };
  var panels = {}, tabs = {}, flame = null;

  function P() { return D.procs[state.proc]; }
  function kindName(k) {
    for (var i = 0; i < KINDS.length; i++) if (KINDS[i][0] === k) return KINDS[i][1];
    return k.replace(/_/g, ' ');
  }
  function cmd(p) { return p.command.length ? p.command.join(' ') : '(command unknown)'; }

  /* ---------- the frame of the page ---------- */
  var procSel = el('select', { id: 'proc', onchange: function () {
    state.proc = +procSel.value; state.dumpName = null; state.zoom = null; show(state.view);
  } });
  D.procs.forEach(function (p, i) {
    procSel.appendChild(el('option', { value: i }, 'pid ' + p.pid + ': ' + cmd(p).slice(0, 80)));
  });
  var nav = el('nav', { role: 'tablist', 'aria-label': 'Views' });
  var main = el('main');
  VIEWS.forEach(function (v, i) {
    var b = el('button', { role: 'tab', id: 'tab-' + v[0], 'aria-controls': 'view-' + v[0],
      'aria-selected': 'false', tabindex: '-1', onclick: function () { show(v[0], true); } }, v[1]);
    b.addEventListener('keydown', function (ev) {
      var d = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
      if (!d) return;
      var next = VIEWS[(i + d + VIEWS.length) % VIEWS.length][0];
      show(next, true);
      tabs[next].focus();
      ev.preventDefault();
    });
    tabs[v[0]] = b;
    nav.appendChild(b);
    panels[v[0]] = el('section', { role: 'tabpanel', id: 'view-' + v[0],
      'aria-labelledby': 'tab-' + v[0], hidden: '' });
    main.appendChild(panels[v[0]]);
  });
  document.body.appendChild(el('header', null, el('h1', null, 'heaptrail report'),
    el('span', { class: 'sub' }, D.dir || ''),
    D.procs.length > 1 ? el('label', null, 'Process ', procSel)
      : el('span', { class: 'muted' }, 'pid ' + D.procs[0].pid + ': ' + cmd(D.procs[0]))));
  document.body.appendChild(nav);
  document.body.appendChild(main);

  function show(view, push) {
    state.view = view;
    VIEWS.forEach(function (v) {
      var on = v[0] === view;
      tabs[v[0]].setAttribute('aria-selected', on ? 'true' : 'false');
      tabs[v[0]].tabIndex = on ? 0 : -1;
      panels[v[0]].hidden = !on;
    });
    panels[view].textContent = '';
    ({ summary: summary, leaks: leaks, growth: growth, timeline: timeline, flame: flameView })[view](panels[view]);
    if (push && location.hash !== '#' + view) history.replaceState(null, '', '#' + view);
  }

  /* ---------- summary ---------- */
  function summary(box) {
    var p = P(), r = p.report, facts = el('dl', { class: 'facts' });
    function fact(k, v, id) { facts.appendChild(el('dt', null, k)); facts.appendChild(el('dd', { id: id }, v)); }
    if (D.procs.length > 1) {
      /* every process at a glance; a click on one shows it */
      var all = el('table', { id: 'all-procs' }, el('caption', { class: 'sr-only' }, 'processes of the run'),
        el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'pid'), el('th', { scope: 'col' }, 'command'),
          el('th', { scope: 'col' }, 'exit'), el('th', { scope: 'col', class: 'num' }, 'in use at the end'),
          el('th', { scope: 'col', class: 'num' }, 'definitely lost'), el('th', { scope: 'col', class: 'num' }, 'dumps'))));
      var ab = el('tbody');
      D.procs.forEach(function (q, i) {
        var rq = q.report, dl = rq && rq.summary.definitely_lost;
        ab.appendChild(el('tr', { 'aria-current': i === state.proc ? 'true' : null },
          el('td', null, el('button', { type: 'button', class: 'link', onclick: function () {
            procSel.value = i; state.proc = i; state.dumpName = null; state.zoom = null; show('summary');
          } }, String(q.pid))),
          el('td', { class: 'mono' }, cmd(q).slice(0, 60)),
          el('td', null, rq && rq.exit ? (rq.exit.signal !== undefined ? 'signal ' + rq.exit.signal : 'status ' + rq.exit.status) : ''),
          el('td', { class: 'num' }, q.final_text || ''),
          el('td', { class: 'num' }, dl ? HT.thousands(dl.bytes) + ' bytes' : ''),
          el('td', { class: 'num' }, String(q.dumps.length))));
      });
      all.appendChild(ab);
      box.appendChild(el('h2', null, 'Processes'));
      box.appendChild(all);
    }
    box.appendChild(el('h2', { 'data-pid': p.pid }, 'Process ' + p.pid));
    fact('Command', el('span', { class: 'mono' }, cmd(p)), 'sum-command');
    if (r && r.exit) fact('Exit', r.exit.signal !== undefined ? 'killed by signal ' + r.exit.signal
      : 'status ' + r.exit.status, 'sum-exit');
    fact('Duration', p.duration_ms >= 0 ? HT.secs(p.duration_ms) + ' (to the last tick or dump)' : 'unknown', 'sum-duration');
    fact('Peak live heap', p.peak_text ? p.peak_text + ' (' + (p.peak_from === 'timeline'
      ? 'the timeline' : 'the largest dump') + ')' : 'unknown', 'sum-peak');
    fact('Final live heap', p.final_text ? p.final_text + ' (' + ({ exit: 'at exit',
      check: 'at the leak check', dump: 'the last dump' })[p.final_from] + ')' : 'unknown', 'sum-final');
    if (p.allocs_text) fact('Allocations', (p.sample > 1 ? 'about ' : '') + p.allocs_text, 'sum-allocs');
    fact('Recorded', p.sample > 1 ? 'sampled every ' + HT.thousands(p.sample) +
      ' bytes on average: figures are estimates' : p.sample === 1 ? 'exact (every allocation)'
      : 'unknown', 'sum-mode');
    if (p.since) fact('Attached', p.since, 'sum-since');
    fact('Dumps', p.dumps.length ? p.dumps.length + ' (' + p.dumps[0].name +
      (p.dumps.length > 1 ? ' \u2026 ' + p.dumps[p.dumps.length - 1].name : '') + ')' : 'none', 'sum-dumps');
    box.appendChild(facts);
    shape(box, p);
    box.appendChild(el('h3', null, 'Leak summary'));
    if (!r) {
      box.appendChild(el('p', { class: 'note' }, 'No leak report of this process (it has not exited, or was not run exact).'));
    } else {
      var t = el('table', { id: 'leak-summary', 'aria-label': 'leak summary by kind' },
        el('thead', null, el('tr', null, el('th', null, 'kind'), el('th', { class: 'num' }, 'bytes'),
          el('th', { class: 'num' }, 'blocks'))));
      var tb = el('tbody');
      KINDS.forEach(function (k) {
        var s = r.summary[k[0]];
        if (!s) return;
        tb.appendChild(el('tr', { 'data-kind': k[0] }, el('td', { class: s.bytes && k[0] === 'definitely_lost' ? 'kind-definitely' : '' }, k[1]),
          el('td', { class: 'num', 'data-bytes': s.bytes }, HT.thousands(s.bytes)),
          el('td', { class: 'num', 'data-blocks': s.blocks }, HT.thousands(s.blocks))));
      });
      t.appendChild(tb);
      box.appendChild(t);
      if (r.sampling) box.appendChild(el('p', { class: 'note' }, 'Sampled: leak kinds need an exact run (--sample 1); in use is an estimate.'));
      if (r.pools && r.pools.length) {
        box.appendChild(el('h3', null, 'Memory pools'));
        var pt = el('table', { id: 'pools' }, el('caption', { class: 'sr-only' }, 'memory pools'),
          el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'pool'), el('th', { scope: 'col' }, 'alive'),
            el('th', { scope: 'col', class: 'num' }, 'bytes'), el('th', { scope: 'col', class: 'num' }, 'blocks'),
            el('th', { scope: 'col', class: 'num' }, 'with the pools under it'),
            el('th', { scope: 'col', class: 'num' }, 'lost (bytes)'))));
        var pb = el('tbody'), depth = {};
        r.pools.forEach(function (q) {
          depth[q.id] = q.parent === null ? 0 : (depth[q.parent] || 0) + 1;
          pb.appendChild(el('tr', { 'data-pool': q.name, 'data-lost': q.lost_bytes },
            el('td', { class: 'mono', style: 'padding-left:' + (depth[q.id] * 16) + 'px' }, q.name),
            el('td', null, q.alive ? 'yes' : 'no'), el('td', { class: 'num' }, HT.thousands(q.bytes)),
            el('td', { class: 'num' }, HT.thousands(q.blocks)), el('td', { class: 'num' }, HT.thousands(q.tree_bytes)),
            el('td', { class: 'num' }, HT.thousands(q.lost_bytes))));
        });
        pt.appendChild(pb);
        box.appendChild(pt);
      }
      box.appendChild(el('h3', null, 'As heaptrail report prints it'));
      box.appendChild(el('pre', { id: 'summary-text' }, p.summary_text));
    }
  }

  /* The allocations by size class and the temporary ones, as the agent
   * counted them (exact runs only: a sampled run counts samples). */
  function shape(box, p) {
    var s = p.shape;
    box.appendChild(el('h3', null, 'Allocations by size, and temporary allocations'));
    if (!s) {
      box.appendChild(el('p', { class: 'note', id: 'shape-none' }, p.sample > 1
        ? 'Not available: this run was sampled (every ' + HT.thousands(p.sample) + ' bytes on average), and the ' +
          'sizes and temporaries of the allocations not sampled are unknown. Run with --sample 1 to count them.'
        : 'Not recorded: the files of this process carry no counts of sizes or temporaries.'));
      return;
    }
    var share = s.allocs ? ' (' + (100 * s.temporary / s.allocs).toFixed(1) + '% of ' + HT.thousands(s.allocs) + ')' : '';
    box.appendChild(el('p', null, 'Temporary allocations: ',
      el('strong', { id: 'shape-temporary', 'data-count': s.temporary }, HT.thousands(s.temporary)), share + '.'));
    box.appendChild(el('p', { class: 'note' }, 'A temporary allocation is one freed by the thread that made it before that ' +
      'thread allocated anything else (heaptrack\'s definition, counted per thread; frees in between do not count). ' +
      'Counts of every allocation from the start' + (p.since ? ' (here: from the attach)' : '') + ' to ' + s.from + '.'));
    var max = Math.max.apply(null, s.sizes) || 1, tb = el('tbody');
    s.sizes.forEach(function (n, k) {
      if (!n) return;
      var lo = k ? Math.pow(2, k) : 0, hi = Math.pow(2, k + 1) - 1;
      var label = k === s.sizes.length - 1 ? '\u2265 ' + HT.bytes(lo) : HT.bytes(lo) + ' \u2013 ' + HT.bytes(hi);
      tb.appendChild(el('tr', { 'data-class': k, 'data-count': n },
        el('td', { class: 'num' }, label), el('td', { class: 'num' }, HT.thousands(n)),
        el('td', { class: 'num' }, (100 * n / s.allocs).toFixed(1) + '%'),
        el('td', { class: 'barcell', 'aria-hidden': 'true' }, el('span', { class: 'bar', style: 'width:' + (100 * n / max).toFixed(1) + '%' }))));
    });
    box.appendChild(el('table', { id: 'shape-sizes' }, el('caption', { class: 'sr-only' }, 'allocations by size class'),
      el('thead', null, el('tr', null, el('th', { scope: 'col', class: 'num' }, 'size'),
        el('th', { scope: 'col', class: 'num' }, 'allocations'), el('th', { scope: 'col', class: 'num' }, 'share'),
        el('th', { scope: 'col' }, el('span', { class: 'sr-only' }, 'bar')))), tb));
  }

  /* ---------- leaks ---------- */
  function modulesOf(rec) {
    var m = {};
    rec.stack.forEach(function (f) { if (f.module) m[f.module] = 1; });
    return m;
  }
  function leaks(box) {
    var p = P(), r = p.report;
    box.appendChild(el('h2', null, 'Leak records'));
    if (!r) {
      box.appendChild(el('p', { class: 'note' }, 'No leak report of this process.'));
      return;
    }
    var kinds = {}, mods = {};
    r.records.forEach(function (rec) {
      kinds[rec.kind] = 1;
      for (var m in modulesOf(rec)) mods[m] = 1;
    });
    var kindSel = el('select', { id: 'leak-kind' }, el('option', { value: '' }, 'all kinds'));
    KINDS.forEach(function (k) { if (kinds[k[0]]) kindSel.appendChild(el('option', { value: k[0] }, k[1])); });
    var modSel = el('select', { id: 'leak-module' }, el('option', { value: '' }, 'all modules'));
    Object.keys(mods).sort().forEach(function (m) {
      modSel.appendChild(el('option', { value: m, title: m }, m.replace(/^.*\//, '')));
    });
    var pools = {};
    r.records.forEach(function (rec) { pools[rec.pool || ''] = 1; });
    var poolSel = el('select', { id: 'leak-pool' }, el('option', { value: '*' }, 'all'));
    Object.keys(pools).sort().forEach(function (q) {
      poolSel.appendChild(el('option', { value: q }, q || "malloc's (no pool)"));
    });
    var count = el('span', { class: 'muted', id: 'leak-count', 'aria-live': 'polite' });
    box.appendChild(el('div', { class: 'controls' }, el('label', null, 'Kind ', kindSel),
      el('label', null, 'Module ', modSel), Object.keys(pools).length > 1 || !pools[''] ?
        el('label', null, 'Pool ', poolSel) : null, count));
    var list = el('div', { id: 'leak-list' });
    box.appendChild(list);
    if (r.records_more)
      box.appendChild(el('p', { class: 'note', id: 'leak-more' }, r.records_more.records +
        ' more records (' + HT.thousands(r.records_more.bytes) + ' bytes), the smallest, are not in this page: heaptrail report lists them all.'));
    function draw() {
      list.textContent = '';
      var n = 0, bytes = 0;
      r.records.forEach(function (rec, i) {
        if (kindSel.value && rec.kind !== kindSel.value) return;
        if (modSel.value && !modulesOf(rec)[modSel.value]) return;
        if (poolSel.value !== '*' && (rec.pool || '') !== poolSel.value) return;
        n++; bytes += rec.bytes;
        list.appendChild(record(rec, i));
      });
      count.textContent = n + ' of ' + r.records.length + ' records, ' + HT.thousands(bytes) + ' bytes';
    }
    if (kinds[state.leakKind]) kindSel.value = state.leakKind;
    if (mods[state.leakModule]) modSel.value = state.leakModule;
    kindSel.addEventListener('change', function () { state.leakKind = kindSel.value; draw(); });
    modSel.addEventListener('change', function () { state.leakModule = modSel.value; draw(); });
    if (state.leakPool && pools[state.leakPool === '*' ? '' : state.leakPool] !== undefined) poolSel.value = state.leakPool;
    poolSel.addEventListener('change', function () { state.leakPool = poolSel.value; draw(); });
    draw();
  }
  function record(rec, i) {
    var first = rec.stack.filter(function (f) { return f.function && f.function !== '??'; })[0];
    var d = el('details', { class: 'record', 'data-kind': rec.kind, 'data-bytes': rec.bytes },
      el('summary', null, el('span', { class: rec.kind === 'definitely_lost' ? 'kind-definitely' : '' },
        HT.thousands(rec.bytes) + ' bytes in ' + HT.thousands(rec.blocks) + ' blocks ' + kindName(rec.kind)),
        rec.bytes_90 ? ' (90%: ' + HT.thousands(rec.bytes_90[0]) + '\u2013' + HT.thousands(rec.bytes_90[1]) + ')' : '',
        ' \u2014 ', el('span', { class: 'mono' }, first ? first.function : '??'),
        rec.pool ? ' (pool ' + rec.pool + ')' : ''));
    var t = el('table', { 'aria-label': 'stack of record ' + (i + 1) },
      el('thead', null, el('tr', null, el('th', null, '#'), el('th', null, 'function'),
        el('th', null, 'file:line'), el('th', null, 'module'))));
    var tb = el('tbody');
    tb.appendChild(el('tr', null, el('td'), el('td', { class: 'name' }, rec.allocator), el('td', { class: 'muted' }, 'allocator'), el('td')));
    rec.stack.forEach(function (f, j) {
      tb.appendChild(el('tr', null, el('td', { class: 'num' }, j),
        el('td', { class: 'name' }, f.function, f.inlined ? el('span', { class: 'inl' }, ' (inlined)') : null),
        el('td', { class: 'name' }, f.file ? f.file + (f.line ? ':' + f.line : '') : f.pc),
        el('td', { class: 'name' }, f.module || '')));
    });
    t.appendChild(tb);
    d.appendChild(t);
    if (rec.suppression) {
      var code = el('code', null, rec.suppression);
      d.appendChild(el('div', { class: 'supp' }, 'Suppression: ', code, el('button', { type: 'button',
        'aria-label': 'copy the suppression ' + rec.suppression, onclick: function (ev) {
          var b = ev.target;
          var done = function () { b.textContent = 'Copied'; };
          if (navigator.clipboard && window.isSecureContext)
            navigator.clipboard.writeText(rec.suppression).then(done, function () { selectText(code); });
          else selectText(code);
        } }, 'Copy')));
    }
    return d;
  }
  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var s = window.getSelection();
    s.removeAllRanges();
    s.addRange(range);
    try { document.execCommand('copy'); } catch (e) { /* selected: the user copies */ }
  }

  /* ---------- growth ---------- */
  function growth(box) {
    var p = P(), g = p.growth;
    box.appendChild(el('h2', null, 'Growth'));
    if (!g) {
      box.appendChild(el('p', { class: 'note' }, 'No growth ranking: ' + (p.growth_why || 'no dumps') + '.'));
      return;
    }
    box.appendChild(el('p', { id: 'growth-head' }, g.head));
    if (g.area && g.area.sites.length) {
      box.appendChild(el('h3', null, 'The largest sites over the dumps'));
      box.appendChild(el('p', { class: 'note' }, 'In-use bytes of the ' + g.area.sites.length +
        ' site' + (g.area.sites.length === 1 ? '' : 's') + ' that held the most at any dump, stacked' +
        (g.area.others ? ', and of the ' + g.area.others + ' others together' : '') +
        ': the bands add up to the whole heap at each dump.'));
      var ab = el('div', { class: 'chart', id: 'area-box' });
      box.appendChild(ab);
      HT.areaChart(ab, g.area, g.x, g.timed);
    }
    box.appendChild(el('h3', null, 'Ranking'));
    box.appendChild(el('p', { class: 'note' }, 'A site is growing when a line fitted to its in-use bytes rises steadily (r2 near 1) and still rises in the later half of the run; heaptrail growth prints the same table. Click a site to see its stacks in the flame graph.'));
    /* one table, so the columns line up: growing, not growing, all */
    var head = ['rank', 'trend', 'slope'].concat(g.sampled ? ['\u00b190%'] : [],
      ['later half', 'r2', 'first \u2192 last', 'site', 'over the dumps']);
    var hr = el('tr');
    head.forEach(function (h) {
      hr.appendChild(el('th', { scope: 'col', class: /slope|half|r2|90|first/.test(h) ? 'num' : '' }, h));
    });
    var t = el('table', { id: 'growth-table' }, el('caption', { class: 'sr-only' },
      'growth ranking of pid ' + p.pid), el('thead', null, hr));
    function part(sites, title, id, empty) {
      var tb = el('tbody', { id: id }, el('tr', null, el('th', { scope: 'rowgroup', colspan: head.length },
        el('h3', null, title))));
      sites.forEach(function (s) {
        var grow = s.trend === 'growing', total = id === 'growth-total';
        var link = total ? el('span', { class: 'mono' }, s.name) : el('button', { type: 'button',
          class: 'mono link', 'data-site': s.name, 'aria-label': 'show ' + s.name + ' in the flame graph',
          onclick: function () { openFlame(-1, '^' + s.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'); } }, s.name);
        var tr = el('tr', { 'data-site': s.name, 'data-rank': s.rank || '', 'data-trend': s.trend },
          el('td', { class: 'num' }, s.rank ? String(s.rank) : total ? 'all' : '-'),
          el('td', { class: grow ? 'trend-growing' : '' }, s.trend),
          el('td', { class: 'num slope' }, s.slope));
        if (g.sampled) tr.appendChild(el('td', { class: 'num' }, s.pm));
        tr.appendChild(el('td', { class: 'num' }, s.late));
        tr.appendChild(el('td', { class: 'num' }, s.r2));
        tr.appendChild(el('td', { class: 'num' }, s.first + ' \u2192 ' + s.last));
        tr.appendChild(el('td', null, link));
        tr.appendChild(el('td', null, HT.sparkline(s.values, grow, s.name + ' over the dumps: ' + s.first + ' to ' + s.last)));
        tb.appendChild(tr);
      });
      if (!sites.length) tb.appendChild(el('tr', null, el('td', { colspan: head.length, class: 'muted' }, empty)));
      t.appendChild(tb);
    }
    part(g.sites.filter(function (s) { return s.rank; }), 'Growing', 'growth-growing', '(no site grows steadily)');
    part(g.sites.filter(function (s) { return !s.rank; }), 'Not growing', 'growth-others', '(none)');
    part([g.total], 'The whole heap', 'growth-total', '');
    box.appendChild(t);
    if (g.more.sites) box.appendChild(el('p', { class: 'note', id: 'growth-more' }, g.more.sites +
      ' more sites not growing (' + HT.bytes(g.more.last) + ' at the last dump): heaptrail growth -n lists them.'));
    if (g.note) box.appendChild(el('p', { class: 'note', id: 'growth-note' }, g.note));
    if (g.wrappers) box.appendChild(el('p', { class: 'note', id: 'growth-wrappers' }, g.wrappers));
  }

  /* ---------- timeline ---------- */
  function timeline(box) {
    var p = P(), tl = p.timeline;
    box.appendChild(el('h2', null, 'Timeline'));
    if (!tl) {
      box.appendChild(el('p', { class: 'note' }, 'No timeline of this process (heaptrail run writes one when it profiles: --every, --timeline).'));
    } else {
      box.appendChild(el('p', { class: 'legend' }, el('span', null, el('i', { style: 'background:var(--live)' }), 'live heap'),
        el('span', null, el('i', { style: 'background:var(--rss)' }), 'RSS'),
        el('span', null, el('i', { style: 'background:var(--peak);height:8px;width:8px;border-radius:4px' }), 'peak ' + (tl.peak ? tl.peak.text + ' at ' + HT.secs(tl.peak.ms) : '')),
        el('span', null, el('i', { style: 'background:var(--dump);width:2px;height:12px' }), 'dumps (click: flame graph)')));
      var c = el('div', { id: 'timeline-chart' });
      box.appendChild(c);
      HT.timelineChart(c, tl, p.dumps, function (i) { openFlame(i, ''); }, function (a, b) {
        pickRange(a, b);
      });
      box.appendChild(el('p', { class: 'note' }, tl.ticks + ' ticks' + (tl.step > 1 ? ', drawn as the highest of every ' + tl.step : '') +
        (tl.sample > 1 ? '; live bytes are estimates (sampled every ' + HT.thousands(tl.sample) + ' bytes)' : '') + '.'));
    }
    /* a time range: what grew between the dumps at its ends */
    var rangeNote = el('p', { class: 'note', id: 'range-note', 'aria-live': 'polite' });
    var fromSel = el('select', { id: 'range-from' }), toSel = el('select', { id: 'range-to' });
    p.dumps.forEach(function (d, i) {
      fromSel.appendChild(el('option', { value: i }, d.name + ' (' + HT.secs(d.ms) + ')'));
      toSel.appendChild(el('option', { value: i }, d.name + ' (' + HT.secs(d.ms) + ')'));
    });
    function pickRange(a, b) {
      /* the last dump at or before each end (the first when none is) */
      var lo = 0, hi = 0;
      p.dumps.forEach(function (d, i) { if (d.ms <= a) lo = i; if (d.ms <= b) hi = i; });
      fromSel.value = lo; toSel.value = hi;
      rangeNote.textContent = 'The range ' + HT.secs(a) + ' to ' + HT.secs(b) + (lo === hi
        ? ': no dump was taken inside it, so what it allocated cannot be told; choose a wider range.'
        : ' is taken as the dumps ' + p.dumps[lo].name + ' and ' + p.dumps[hi].name + '.');
      if (HT.timelineBand) HT.timelineBand(p.dumps[lo].ms, p.dumps[hi].ms);
    }
    if (p.dumps.length > 1) {
      box.appendChild(el('h3', null, 'What grew in a time range'));
      toSel.value = p.dumps.length - 1;
      box.appendChild(el('div', { class: 'controls' }, el('label', null, 'From ', fromSel),
        el('label', null, 'to ', toSel), el('button', { type: 'button', id: 'range-show', onclick: function () {
          var lo = +fromSel.value, hi = +toSel.value;
          if (lo === hi) { rangeNote.textContent = 'Choose two different dumps.'; return; }
          if (lo > hi) { var t = lo; lo = hi; hi = t; }
          state.baseName = p.dumps[lo].name;
          openFlame(hi, '');
        } }, 'Show in the flame graph')));
      box.appendChild(rangeNote);
      box.appendChild(el('p', { class: 'note' }, 'Drag across the chart to pick a range, or choose its dumps. ' +
        'The flame graph then shows the later dump coloured by its change from the earlier, stack by stack: ' +
        'what was allocated in between and is still live at the end, less what was live at the start and was ' +
        'freed since. The dumps do not say when each block was allocated, so a block allocated and freed ' +
        'in between does not show, nor does a block freed and replaced on the same stack.'));
    } else if (p.dumps.length) {
      box.appendChild(el('p', { class: 'note' }, 'One dump: what was allocated in a time range needs two.'));
    }
    if (p.dumps.length) {
      box.appendChild(el('h3', null, 'Dumps'));
      var t = el('table', { id: 'dump-list' }, el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'dump'),
        el('th', { scope: 'col', class: 'num' }, 'taken at'), el('th', { scope: 'col', class: 'num' }, 'in use'),
        el('th', { scope: 'col', class: 'num' }, 'stacks'), el('th'))));
      var tb = el('tbody');
      p.dumps.forEach(function (d, i) {
        tb.appendChild(el('tr', null, el('td', { class: 'name' }, d.name), el('td', { class: 'num' }, HT.secs(d.ms)),
          el('td', { class: 'num' }, d.inuse_text), el('td', { class: 'num' }, HT.thousands(d.stacks)),
          el('td', null, el('button', { type: 'button', onclick: function () { openFlame(i, ''); },
            'aria-label': 'flame graph of ' + d.name }, 'Flame graph'))));
      });
      t.appendChild(tb);
      box.appendChild(t);
    }
  }

  /* ---------- flame graph ---------- */
  function openFlame(dump, search) {
    state.dumpName = dump >= 0 ? P().dumps[dump].name : null;
    state.zoom = null;
    state.search = search;
    show('flame', true);
  }
  /* A dump's functions, flat and cum as `heaptrail top` gives them,
   * sortable by each column (a header's button); a click on a function
   * selects it: its callers and callees with the bytes of the stacks
   * through each pair (d.peek, heaptrail's), and the flame graph
   * searched for it. */
  function topTable(box, d, onPick) {
    var cols = [['name', 'function', 0], ['flat', 'flat', 1], ['cum', 'cum', 2]];
    var sortBy = state.topSort || 'flat', t = d.total || 1;
    function draw() {
      box.textContent = '';
      /* by flat: heaptrail top's own order */
      var rows = sortBy === 'flat' ? d.top : d.top.slice().sort(function (a, b) {
        return sortBy === 'name' ? (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0) : b[2] - a[2] || b[1] - a[1];
      });
      var hr = el('tr');
      cols.forEach(function (c) {
        hr.appendChild(el('th', { scope: 'col', class: c[0] === 'name' ? '' : 'num',
          'aria-sort': c[0] === sortBy ? (c[0] === 'name' ? 'ascending' : 'descending') : 'none' },
          el('button', { type: 'button', class: 'link', 'data-sort': c[0], onclick: function () {
            sortBy = state.topSort = c[0]; draw();
            box.querySelector('[data-sort=' + c[0] + ']').focus();
          } }, c[1])));
        if (c[0] !== 'name') hr.appendChild(el('th', { scope: 'col', class: 'num' }, c[1] + '%'));
      });
      var tb = el('tbody');
      rows.forEach(function (r) {
        var picked = r[0] === state.peekName;
        tb.appendChild(el('tr', { 'data-name': r[0], 'data-flat': r[1], 'data-cum': r[2],
          class: picked ? 'picked' : '' },
          el('td', null, el('button', { type: 'button', class: 'link mono', 'aria-pressed': String(picked),
            onclick: function () { pick(r[0]); } }, r[0])),
          el('td', { class: 'num' }, HT.bytes(r[1])), el('td', { class: 'num' }, (100 * r[1] / t).toFixed(1) + '%'),
          el('td', { class: 'num' }, HT.bytes(r[2])), el('td', { class: 'num' }, (100 * r[2] / t).toFixed(1) + '%')));
      });
      box.appendChild(el('table', { id: 'top-table' }, el('caption', { class: 'sr-only' },
        'functions of ' + d.name + ' by in-use bytes'), el('thead', null, hr), tb));
      if (d.top_more.rows) box.appendChild(el('p', { class: 'note', id: 'top-more' }, d.top_more.rows +
        ' more functions (' + HT.bytes(d.top_more.flat) + ' flat): heaptrail top -n lists them.'));
      peek();
    }
    function pick(name) {
      state.peekName = name;
      draw();
      var b = box.querySelector('#top-table tr[data-name="' + CSS.escape(name) + '"] button');
      if (b) b.focus();
      onPick(name);
    }
    /* the selected function's callers and callees */
    function peek() {
      var i = -1;
      d.top.forEach(function (r, j) { if (r[0] === state.peekName) i = j; });
      if (i < 0 || !d.peek) return;
      var r = d.top[i], pk = d.peek[i], sec = el('section', { id: 'peek', 'aria-label': 'callers and callees of ' + r[0] });
      sec.appendChild(el('h4', null, 'Callers and callees of ', el('span', { class: 'mono' }, r[0])));
      sec.appendChild(el('p', { class: 'note' }, 'Bytes in use of the stacks in which the caller calls it, or it calls the callee ' +
        '(each stack counted once); ' + r[0] + ' holds ' + HT.bytes(r[2]) + ' in all (cum), ' + HT.bytes(r[1]) + ' itself (flat).'));
      function side(id, title, list, more, self) {
        var tb = el('tbody');
        list.forEach(function (e) {
          var inTop = d.top.some(function (x) { return x[0] === e[0]; });
          tb.appendChild(el('tr', { 'data-name': e[0], 'data-bytes': e[1] },
            el('td', null, inTop ? el('button', { type: 'button', class: 'link mono',
              onclick: function () { pick(e[0]); } }, e[0]) : el('span', { class: 'mono' }, e[0])),
            el('td', { class: 'num' }, HT.bytes(e[1])),
            el('td', { class: 'num' }, r[2] ? (100 * e[1] / r[2]).toFixed(1) + '%' : '')));
        });
        if (self) tb.appendChild(el('tr', { 'data-self': self },
          el('td', null, '(itself)'), el('td', { class: 'num' }, HT.bytes(self)),
          el('td', { class: 'num' }, r[2] ? (100 * self / r[2]).toFixed(1) + '%' : '')));
        if (more[0]) tb.appendChild(el('tr', { class: 'more' }, el('td', null, more[0] + ' more'),
          el('td', { class: 'num' }, HT.bytes(more[1])), el('td')));
        if (!tb.firstChild) tb.appendChild(el('tr', null, el('td', { colspan: 3 }, '(none)')));
        return el('table', { id: id, class: 'peek' }, el('caption', null, title),
          el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'function'),
            el('th', { scope: 'col', class: 'num' }, 'bytes'), el('th', { scope: 'col', class: 'num' }, 'of its cum'))), tb);
      }
      sec.appendChild(el('div', { class: 'peek-pair' },
        side('peek-callers', 'Callers (who calls it)', pk[0], pk[1], 0),
        side('peek-callees', 'Callees (what it calls)', pk[2], pk[3], r[1])));
      box.appendChild(sec);
    }
    draw();
  }

  /* The flame graph's trees as tables (heaptrack's top-down and
   * bottom-up views): a row per node, its bytes (total) and the bytes of
   * the stacks that end there (self), children shown when a row is
   * opened, siblings sorted by the column chosen. The nodes are
   * heaptrail's (d.nodes, d.rev.nodes), pruned as the graph's are. */
  function treeTable(box, d) {
    var dir = state.treeDir || 'top-down', t = dir === 'top-down' ? d : d.rev;
    var N = [], kids = [], open = state.treeOpen || (state.treeOpen = {});
    t.nodes.forEach(function (n, k) {
      N.push({ id: k, name: n[1] < 0 ? 'all' : t.names[n[1]][0], v: n[2], self: n[3] });
      kids.push([]);
      if (k) kids[n[0]].push(k);
    });
    t.more.forEach(function (m) {
      N.push({ id: N.length, name: m[1] + ' more', v: m[2], self: 0, more: true });
      kids.push([]);
      kids[m[0]].push(N.length - 1);
    });
    function path(k) { var s = []; for (var i = k; i > 0; i = t.nodes[i][0]) s.unshift(N[i].name); return dir + ':' + s.join(';'); }
    var sortBy = state.treeSort || 'v';
    function order(list) {
      return list.slice().sort(function (a, b) {
        a = N[a]; b = N[b];
        if (a.more !== b.more) return a.more ? 1 : -1;
        return sortBy === 'name' ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : b[sortBy] - a[sortBy] || b.v - a.v;
      });
    }
    function draw(focusId) {
      box.textContent = '';
      var dirSel = el('select', { id: 'tree-dir', onchange: function () { state.treeDir = dirSel.value; treeTable(box, d); } },
        el('option', { value: 'top-down' }, 'top-down (callers first)'), el('option', { value: 'bottom-up' }, 'bottom-up (allocation sites first)'));
      dirSel.value = dir;
      box.appendChild(el('div', { class: 'controls' }, el('label', null, 'Tree ', dirSel)));
      var hr = el('tr');
      /* self: the stacks that end at the node: allocated by it itself
       * top-down, started by it (the outermost caller) bottom-up */
      [['name', 'function'], ['v', 'total'], ['self', dir === 'top-down' ? 'self' : 'outermost']].forEach(function (c) {
        hr.appendChild(el('th', { scope: 'col', class: c[0] === 'name' ? '' : 'num',
          'aria-sort': c[0] === sortBy ? (c[0] === 'name' ? 'ascending' : 'descending') : 'none' },
          el('button', { type: 'button', class: 'link', 'data-tsort': c[0], onclick: function () {
            sortBy = state.treeSort = c[0]; draw(); box.querySelector('[data-tsort=' + c[0] + ']').focus();
          } }, c[1])));
        if (c[0] === 'v') hr.appendChild(el('th', { scope: 'col', class: 'num' }, 'total%'));
      });
      var tb = el('tbody'), total = N[0].v || 1;
      function row(k, depth) {
        var n = N[k], key = path(k), has = kids[k].length > 0, isOpen = !!open[key] || k === 0;
        var tog = has && k ? el('button', { type: 'button', class: 'tog', 'aria-expanded': String(isOpen),
          'aria-label': (isOpen ? 'close ' : 'open ') + n.name, 'data-node': k, onclick: function () {
            open[key] = !isOpen; draw(k);
          } }, isOpen ? '\u25be' : '\u25b8') : el('span', { class: 'tog' });
        tb.appendChild(el('tr', { 'data-name': n.name, 'data-v': n.v, 'data-self': n.self, 'data-depth': depth,
          'data-node': k, class: n.more ? 'more' : null },
          el('td', { style: 'padding-left:' + (depth * 14) + 'px' }, tog, el('span', { class: 'mono' }, n.name)),
          el('td', { class: 'num' }, HT.bytes(n.v)), el('td', { class: 'num' }, (100 * n.v / total).toFixed(1) + '%'),
          el('td', { class: 'num' }, HT.bytes(n.self))));
        if (isOpen) order(kids[k]).forEach(function (c) { row(c, depth + 1); });
      }
      row(0, 0);
      box.appendChild(el('table', { id: 'tree-table' }, el('caption', { class: 'sr-only' },
        dir + ' tree of ' + d.name + ' by in-use bytes'), el('thead', null, hr), tb));
      if (focusId !== undefined) {
        var b = box.querySelector('button.tog[data-node="' + focusId + '"]');
        if (b) b.focus();
      }
    }
    draw();
  }

  /* zooms the flame graph on n and remembers it by its path of names */
  function zoom(n) {
    if (!n || n.more) return;
    flame.zoom(n);
    var path = [];
    for (var a = n; a && a.id; a = flame.N[a.p]) path.unshift(a.name);
    state.zoom = path.length ? path : null;
  }
  function zoomPath(path) {
    var n = flame.N[0];
    for (var i = 0; n && i < path.length; i++)
      n = flame.N.filter(function (c) { return c.p === n.id && c.name === path[i] && !c.more; })[0];
    if (n) flame.zoom(n);
  }
  function flameView(box) {
    var p = P();
    box.appendChild(el('h2', null, 'Flame graph'));
    if (!p.dumps.length) {
      box.appendChild(el('p', { class: 'note' }, 'No heap dumps of this process.'));
      return;
    }
    state.dump = p.dumps.length - 1;
    p.dumps.forEach(function (d, i) { if (d.name === state.dumpName) state.dump = i; });
    var sel = el('select', { id: 'flame-dump' });
    p.dumps.forEach(function (d, i) {
      sel.appendChild(el('option', { value: i }, d.name + ' (' + HT.secs(d.ms) + ', ' + d.inuse_text + ')'));
    });
    sel.value = state.dump;
    var baseSel = el('select', { id: 'flame-base' }, el('option', { value: '' }, 'nothing'));
    p.dumps.forEach(function (d, i) {
      baseSel.appendChild(el('option', { value: d.name }, d.name + ' (' + HT.secs(d.ms) + ', ' + d.inuse_text + ')'));
    });
    baseSel.value = state.baseName && p.dumps.some(function (d) { return d.name === state.baseName; }) ? state.baseName : '';
    var search = el('input', { type: 'search', id: 'flame-search', placeholder: 'regular expression',
      value: state.search || '' });
    var inv = el('input', { type: 'checkbox', id: 'flame-inverted' });
    inv.checked = state.inverted;
    var rev = el('input', { type: 'checkbox', id: 'flame-reversed' });
    rev.checked = !!state.reversed;
    var matched = el('span', { id: 'flame-matched', 'aria-live': 'polite' });
    var reset = el('button', { type: 'button', id: 'flame-reset' }, 'Reset zoom');
    box.appendChild(el('div', { class: 'controls' }, el('label', null, 'Dump ', sel),
      el('label', null, 'Compared with ', baseSel),
      el('label', null, 'Search ', search), matched, reset,
      el('label', null, inv, ' Root at the top'),
      el('label', null, rev, ' Reversed (allocation sites at the root)')));
    var details = el('div', { id: 'flame-details', 'aria-live': 'polite' });
    var fb = el('div', { id: 'flame-box' });
    box.appendChild(details);
    box.appendChild(fb);
    var note = el('p', { class: 'note', id: 'flame-note' });
    box.appendChild(note);
    box.appendChild(el('h3', null, 'Top-down and bottom-up'));
    var treeBox = el('div', { id: 'tree-box' });
    box.appendChild(treeBox);
    box.appendChild(el('h3', null, 'Functions, as heaptrail top lists them'));
    var topBox = el('div', { id: 'top-box' });
    box.appendChild(topBox);
    function build() {
      var d = p.dumps[state.dump];
      note.textContent = 'In-use bytes of ' + d.name + ' (' + d.inuse_text + ', ' +
        HT.thousands(d.stacks) + ' stacks) by stack, ' + (state.reversed ? 'allocation sites at the root, their callers beyond'
        : 'callers at the root, callees beyond') + ' (the root at the bottom, or the top when asked)' + (baseSel.value ? '; compared with ' +
        baseSel.value + ': red grew, blue shrank, the paler the smaller the change (widths are this dump\'s)' : '') +
        '; frames under ' +
        (100 * D.min_share) + '% of the dump are summed per caller into one "n more" frame.';
      var b = null;
      p.dumps.forEach(function (x) { if (x.name === baseSel.value) b = x; });
      var bt = b && (state.reversed ? b.rev : b);
      if (bt) bt.name = b.name;
      flame = new HT.Flame(fb, details, state.reversed ? d.rev : d, state.inverted, bt);
      treeTable(treeBox, d);
      topTable(topBox, d, function (name) {
        search.value = '^' + name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
        doSearch();
        fb.scrollIntoView({ block: 'nearest' });
      });
      doSearch();
      if (state.zoom) zoomPath(state.zoom);
    }
    function doSearch() {
      state.search = search.value;
      var r = flame.search(search.value);
      matched.textContent = !r ? '' : r.error ? r.error : 'Matched: ' + HT.bytes(r.bytes) + ' (' +
        (100 * r.share).toFixed(1) + '% of the dump, ' + r.frames + (r.frames === 1 ? ' frame)' : ' frames)');
      if (r && !r.error) matched.setAttribute('data-bytes', r.bytes);
      else matched.removeAttribute('data-bytes');
    }
    sel.addEventListener('change', function () {
      state.dump = +sel.value; state.dumpName = p.dumps[state.dump].name; state.zoom = null; build();
    });
    search.addEventListener('input', doSearch);
    baseSel.addEventListener('change', function () { state.baseName = baseSel.value || null; build(); });
    rev.addEventListener('change', function () { state.reversed = rev.checked; state.zoom = null; build(); });
    inv.addEventListener('change', function () { state.inverted = inv.checked; flame.inverted = inv.checked; flame.render(); });
    reset.addEventListener('click', function () { zoom(flame.N[0]); });
    fb.addEventListener('click', function (ev) { zoom(flame.frameAt(ev)); });
    fb.addEventListener('mouseover', function (ev) {
      var n = flame.frameAt(ev);
      if (n) details.textContent = flame.describe(n);
    });
    fb.addEventListener('focusin', function (ev) {
      var n = flame.frameAt(ev);
      if (n) details.textContent = flame.describe(n);
    });
    fb.addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter' || ev.key === ' ') {
        var n = flame.frameAt(ev);
        if (n) { zoom(n); ev.preventDefault(); }
      }
    });
    build();
  }

  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape' && state.view === 'flame' && flame) zoom(flame.N[0]);
  });

  /* ---------- the live page: new data without a reload ---------- */
  var live = el('span', { id: 'live-status', class: 'muted', 'aria-live': 'polite', 'data-updates': 0 });
  var lastText = null, updates = 0;
  function fillProcs() {
    procSel.textContent = '';
    D.procs.forEach(function (p, i) {
      procSel.appendChild(el('option', { value: i }, 'pid ' + p.pid + ': ' + cmd(p).slice(0, 80)));
    });
    procSel.value = state.proc;
  }
  function update(text) {
    if (text === lastText) return;
    lastText = text;
    var pid = P().pid, focus = document.activeElement && document.activeElement.id;
    var scroll = window.scrollY;
    D = window.HT_DATA = JSON.parse(text);
    state.proc = 0;
    D.procs.forEach(function (p, i) { if (p.pid === pid) state.proc = i; });
    fillProcs();
    show(state.view);
    if (focus && document.getElementById(focus)) document.getElementById(focus).focus();
    window.scrollTo(0, scroll);
    live.setAttribute('data-updates', ++updates);
  }
  function poll() {
    fetch(D.live.url, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error('status ' + r.status);
      return r.text();
    }).then(function (text) {
      update(text);
      var p = P();
      live.setAttribute('data-dumps', p.dumps.length);
      live.setAttribute('data-last', p.dumps.length ? p.dumps[p.dumps.length - 1].name : '');
      live.textContent = 'live: ' + p.dumps.length + ' dumps, checked ' + new Date().toLocaleTimeString();
      setTimeout(poll, D.live.every_ms);
    }, function (e) {
      live.textContent = 'live: no answer (' + e.message + '); the page shows the last data, trying again';
      setTimeout(poll, 2 * D.live.every_ms);
    });
  }
  if (D.live) {
    document.querySelector('header').appendChild(live);
    live.setAttribute('data-dumps', P().dumps.length);
    live.setAttribute('data-last', P().dumps.length ? P().dumps[P().dumps.length - 1].name : '');
    live.textContent = 'live: ' + P().dumps.length + ' dumps';
    setTimeout(poll, D.live.every_ms);
  }

  var start = location.hash.slice(1);
  show(panels[start] ? start : 'summary', false);
  /* when the first view was drawn, for bench/html (ms since navigation) */
  document.documentElement.setAttribute('data-ready-ms', performance.now().toFixed(1));
})();
