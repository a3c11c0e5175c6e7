/* heaptrail's HTML page, part 1 of 3 (charts.js, flame.js, app.js are
 * embedded in this order, one script): small DOM helpers, the display
 * formats, and the charts (a site's sparkline, the timeline). Figures
 * come from the page's data, computed by heaptrail itself; this only
 * draws them. */
'use strict';
var HT = {};

/* el('td', {class: 'num'}, 'text', child...) */
HT.el = function (tag, attrs) {
  var e = document.createElement(tag);
  for (var k in attrs || {})
    if (attrs[k] !== null && attrs[k] !== undefined) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
  for (var i = 2; i < arguments.length; i++) {
    var c = arguments[i];
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === 'string' || typeof c === 'number'
      ? document.createTextNode(String(c)) : c);
  }
  return e;
};

HT.svg = function (tag, attrs) {
  var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  return e;
};

/* As heaptrail prints bytes (render_bytes): "512 B", "1.50 MiB". */
HT.bytes = function (v) {
  var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], a = Math.abs(v), x = v, u = 0;
  while (a >= 1024 && u < 5) { a /= 1024; x /= 1024; u++; }
  return u ? x.toFixed(2) + ' ' + units[u] : v + ' B';
};

HT.thousands = function (v) {
  return String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
};

HT.secs = function (ms) {
  return ms < 0 ? 'unknown' : ms < 10000 ? (ms / 1000).toFixed(2) + ' s'
    : ms < 600000 ? (ms / 1000).toFixed(1) + ' s' : (ms / 60000).toFixed(1) + ' min';
};

/* A site's values over the dumps, as a small line (w x h pixels). */
HT.sparkline = function (values, grow, label) {
  var w = 120, h = 26, s = HT.svg('svg', { width: w, height: h, role: 'img',
    'aria-label': label });
  var max = Math.max.apply(null, values.concat([1])), min = Math.min.apply(null, values.concat([0]));
  var pts = values.map(function (v, i) {
    var x = values.length > 1 ? 2 + (w - 4) * i / (values.length - 1) : w / 2;
    var y = h - 2 - (h - 4) * (v - min) / (max - min || 1);
    return x.toFixed(1) + ',' + y.toFixed(1);
  });
  s.appendChild(HT.svg('polyline', { points: pts.join(' '), class: grow ? 'spark grow' : 'spark' }));
  return s;
};

/* The sites that held the most, stacked over the dumps (massif's
 * picture: a cache flattening, a leak rising). area: {sites: [{name,
 * trend, values}], other: [...], others: n} from the page's data; x:
 * the dumps' times in seconds (or their numbers when !timed). Each band
 * has a title; the legend names the bands in the same order. */
HT.areaChart = function (box, area, x, timed) {
  var W = Math.max(600, box.clientWidth || 1000), H = 200, L = 80, R = 20, T = 10, B = 34;
  var bands = area.sites.map(function (s) { return { name: s.name, trend: s.trend, values: s.values }; });
  if (area.others) bands.push({ name: area.others + ' other site' + (area.others === 1 ? '' : 's'),
    other: true, values: area.other });
  var n = x.length, tmax = n ? Math.max(x[n - 1], 1e-9) : 1, vmax = 1;
  for (var i = 0; i < n; i++) {
    var sum = 0;
    bands.forEach(function (b) { sum += b.values[i]; });
    vmax = Math.max(vmax, sum);
  }
  var X = function (t) { return L + (W - L - R) * t / tmax; };
  var Y = function (v) { return H - B - (H - T - B) * v / vmax; };
  var s = HT.svg('svg', { width: W, height: H, role: 'img', id: 'area-svg',
    'aria-label': 'the ' + area.sites.length + ' sites that held the most, stacked over the dumps' });
  HT.bytesAxis(s, vmax, Y, L, W - R);
  var xs = HT.niceStep(tmax, 8);
  for (var sec = 0; sec <= tmax + 1e-9; sec += xs) {
    var tx = HT.svg('text', { x: X(sec), y: H - B + 16, 'text-anchor': 'middle' });
    tx.textContent = timed ? (+sec.toFixed(3)) + ' s' : 'dump ' + (+sec.toFixed(0));
    s.appendChild(tx);
  }
  var base = x.map(function () { return 0; });
  var legend = HT.el('ul', { class: 'legend', id: 'area-legend' });
  bands.forEach(function (b, k) {
    var top = base.map(function (v, i) { return v + b.values[i]; });
    var d = '';
    for (var i = 0; i < n; i++) d += (i ? ' L' : 'M') + X(x[i]).toFixed(1) + ',' + Y(top[i]).toFixed(1);
    for (i = n - 1; i >= 0; i--) d += ' L' + X(x[i]).toFixed(1) + ',' + Y(base[i]).toFixed(1);
    var cls = b.other ? 'band-other' : 'band-' + (k % 8);
    var path = HT.svg('path', { d: d + ' Z', class: 'area ' + cls, 'data-site': b.other ? '' : b.name,
      'data-values': b.values.join(',') });
    var ti = HT.svg('title');
    ti.textContent = b.name + ': ' + HT.bytes(b.values[n - 1]) + ' at the last dump, at most ' +
      HT.bytes(Math.max.apply(null, b.values));
    path.appendChild(ti);
    s.appendChild(path);
    legend.appendChild(HT.el('li', null, HT.el('span', { class: 'swatch ' + cls, 'aria-hidden': 'true' }),
      HT.el('span', { class: b.other ? '' : 'mono' }, b.name), b.trend === 'growing'
        ? HT.el('span', { class: 'trend-growing' }, ' growing') : null));
    base = top;
  });
  box.textContent = '';
  box.appendChild(s);
  box.appendChild(legend);
};

/* A chart's axis of bytes up to vmax: a line and a label at each round
 * step, in the unit the labels use (KiB, MiB...); Y(v) is v's height,
 * the lines run from x0 to x1. */
HT.bytesAxis = function (s, vmax, Y, x0, x1) {
  var unit = 1;
  while (vmax / unit >= 1024) unit *= 1024;
  var ys = HT.niceStep(vmax / unit, 5) * unit;
  for (var v = 0; v <= vmax; v += ys) {
    s.appendChild(HT.svg('line', { x1: x0, x2: x1, y1: Y(v), y2: Y(v), class: 'axis' }));
    var t = HT.svg('text', { x: x0 - 6, y: Y(v) + 4, 'text-anchor': 'end' });
    t.textContent = HT.bytes(v);
    s.appendChild(t);
  }
};

/* A round step for an axis spanning max. */
HT.niceStep = function (max, n) {
  var raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  var m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
};

/* The timeline: live heap (area) and RSS (dashed) over time, the peak and
 * every dump marked. points: [ms, live, rss, allocated]; dumps: [{ms, name}].
 * onDump(i) is called when a dump's mark is clicked. */
HT.timelineChart = function (box, tl, dumps, onDump, onRange) {
  var W = Math.max(600, box.clientWidth || 1000), H = 320, L = 80, R = 20, T = 14, B = 36;
  var pts = tl.points, tmax = 1, vmax = 1;
  pts.forEach(function (p) { tmax = Math.max(tmax, p[0]); vmax = Math.max(vmax, p[1], p[2]); });
  dumps.forEach(function (d) { if (d.ms > tmax) tmax = d.ms; });
  var X = function (ms) { return L + (W - L - R) * ms / tmax; };
  var Y = function (v) { return H - B - (H - T - B) * v / vmax; };
  var s = HT.svg('svg', { width: W, height: H, role: 'img', id: 'timeline-svg',
    'aria-label': 'live heap and RSS over time, peak ' + (tl.peak ? tl.peak.text : 'unknown') });
  HT.bytesAxis(s, vmax, Y, L, W - R);
  var xs = HT.niceStep(tmax / 1000, 8);
  for (var sec = 0; sec * 1000 <= tmax; sec += xs) {
    var tx = HT.svg('text', { x: X(sec * 1000), y: H - B + 16, 'text-anchor': 'middle' });
    tx.textContent = (+sec.toFixed(3)) + ' s';
    s.appendChild(tx);
  }
  if (pts.length) {
    var d = 'M' + X(pts[0][0]) + ',' + Y(0), r = '';
    pts.forEach(function (p, i) {
      d += ' L' + X(p[0]).toFixed(1) + ',' + Y(p[1]).toFixed(1);
      r += (i ? ' L' : 'M') + X(p[0]).toFixed(1) + ',' + Y(p[2]).toFixed(1);
    });
    d += ' L' + X(pts[pts.length - 1][0]) + ',' + Y(0) + ' Z';
    s.appendChild(HT.svg('path', { d: d, class: 'live' }));
    s.appendChild(HT.svg('path', { d: r, class: 'rss' }));
  }
  dumps.forEach(function (dp, i) {
    if (dp.ms < 0) return;
    var g = HT.svg('g', { class: 'dumpmark-g', style: 'cursor:pointer' });
    g.appendChild(HT.svg('line', { x1: X(dp.ms), x2: X(dp.ms), y1: T, y2: H - B, class: 'dumpmark' }));
    g.appendChild(HT.svg('rect', { x: X(dp.ms) - 4, y: T, width: 8, height: H - T - B,
      fill: 'transparent' }));
    var ti = HT.svg('title');
    ti.textContent = dp.name + ' at ' + HT.secs(dp.ms) + ': ' + dp.inuse_text + ' (click: its flame graph)';
    g.appendChild(ti);
    g.addEventListener('click', function () { onDump(i); });
    s.appendChild(g);
  });
  if (tl.peak) {
    var c = HT.svg('circle', { cx: X(tl.peak.ms), cy: Y(tl.peak.live), r: 5, class: 'peak',
      id: 'timeline-peak' });
    var pt = HT.svg('title');
    pt.textContent = 'peak: ' + tl.peak.text + ' at ' + HT.secs(tl.peak.ms);
    c.appendChild(pt);
    s.appendChild(c);
    var lab = HT.svg('text', { x: Math.min(X(tl.peak.ms) + 8, W - R - 120), y: Y(tl.peak.live) - 6 });
    lab.textContent = 'peak ' + tl.peak.text;
    s.appendChild(lab);
  }
  /* a drag across the chart picks a time range: onRange(ms0, ms1) */
  var band = HT.svg('rect', { y: T, height: H - T - B, width: 0, class: 'band', id: 'timeline-band' });
  s.appendChild(band);
  var from = null, toMs = function (ev) {
    var r = s.getBoundingClientRect(), x = ev.clientX - r.left;
    return Math.max(0, Math.min(tmax, (x - L) / (W - L - R) * tmax));
  };
  s.addEventListener('mousedown', function (ev) { from = toMs(ev); ev.preventDefault(); });
  s.addEventListener('mousemove', function (ev) {
    if (from === null) return;
    var a = Math.min(from, toMs(ev)), b = Math.max(from, toMs(ev));
    band.setAttribute('x', X(a));
    band.setAttribute('width', X(b) - X(a));
  });
  s.addEventListener('mouseup', function (ev) {
    if (from === null) return;
    var a = Math.min(from, toMs(ev)), b = Math.max(from, toMs(ev));
    from = null;
    if (X(b) - X(a) > 4 && onRange) onRange(a, b);
  });
  HT.timelineBand = function (ms0, ms1) {
    band.setAttribute('x', X(ms0));
    band.setAttribute('width', Math.max(0, X(ms1) - X(ms0)));
  };
  box.textContent = '';
  box.appendChild(s);
};
