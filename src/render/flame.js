(function (C) {
'use strict';
function $(id) { return document.getElementById(id); }
var box = $('htf-frames');
if (!box) return;
var details = $('htf-details'), matched = $('htf-matched'), resetB = $('htf-reset'),
    searchB = $('htf-search'), searchL = $('htf-search-label');
var hint = details.textContent, F = [], query = null;
var gs = box.getElementsByTagName('g');
for (var i = 0; i < gs.length; i++) {
  var g = gs[i], r = g.getElementsByTagName('rect')[0];
  var tip = g.getElementsByTagName('title')[0].textContent;
  var row = Math.round((+r.getAttribute('y') - C.y0) / C.fh);
  g.setAttribute('data-i', i);
  F.push({ g: g, r: r, t: g.getElementsByTagName('text')[0], tip: tip,
    name: tip.split('\n')[0], x: +r.getAttribute('x') - C.pad,
    w: +r.getAttribute('width'), d: C.inv ? row : C.maxd - row,
    fill: r.getAttribute('fill') });
}
function label(name, w) {
  var n = Math.floor((w - 6) / C.cw);
  if (n >= name.length) return name;
  return n < 4 ? '' : name.slice(0, n - 2) + '..';
}
function place(e, x, w, how) {
  e.g.style.display = how === 'hide' ? 'none' : '';
  if (how === 'anc') e.g.classList.add('htf-anc'); else e.g.classList.remove('htf-anc');
  if (how === 'hide') return;
  e.r.setAttribute('x', (C.pad + x).toFixed(3));
  e.r.setAttribute('width', w.toFixed(3));
  e.t.setAttribute('x', (C.pad + x + 3).toFixed(3));
  e.t.textContent = label(e.name, w);
}
function reset() {
  for (var i = 0; i < F.length; i++) place(F[i], F[i].x, F[i].w, '');
  resetB.style.display = 'none';
}
function zoom(z) {
  if (z.d === 0) { reset(); return; }
  var k = C.pw / z.w, eps = 0.002;
  for (var i = 0; i < F.length; i++) {
    var e = F[i];
    if (e.d >= z.d && e.x >= z.x - eps && e.x + e.w <= z.x + z.w + eps)
      place(e, (e.x - z.x) * k, e.w * k, '');
    else if (e.d < z.d && e.x <= z.x + eps && e.x + e.w >= z.x + z.w - eps)
      place(e, 0, C.pw, 'anc');
    else
      place(e, 0, 0, 'hide');
  }
  resetB.style.display = '';
}
function search(q) {
  var re = null, spans = [];
  if (q) {
    try { re = new RegExp(q); }
    catch (err) { matched.textContent = 'bad regular expression: ' + q; return; }
  }
  for (var i = 0; i < F.length; i++) {
    var e = F[i], hit = re !== null && re.test(e.name);
    e.r.setAttribute('fill', hit ? C.hit : e.fill);
    if (hit) spans.push([e.x, e.x + e.w]);
  }
  query = re ? q : null;
  searchL.textContent = re ? 'Clear search' : 'Search';
  if (!re) { matched.textContent = ''; return; }
  /* nested matches cover the same memory: count each span once */
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var sum = 0, end = 0;
  for (var j = 0; j < spans.length; j++) {
    var s = Math.max(spans[j][0], end);
    if (spans[j][1] > s) { sum += spans[j][1] - s; end = spans[j][1]; }
  }
  matched.textContent = 'Matched: ' + (100 * sum / C.pw).toFixed(1) + '% (' +
    spans.length + (spans.length === 1 ? ' frame)' : ' frames)');
}
function frameOf(ev) {
  var n = ev.target;
  while (n && n !== box && !(n.getAttribute && n.getAttribute('data-i') !== null))
    n = n.parentNode;
  return n && n !== box ? F[+n.getAttribute('data-i')] : null;
}
function ask() {
  if (query !== null) { search(null); return; }
  var q = window.prompt('Highlight the frames whose name matches (a regular expression):', '');
  if (q) search(q);
}
box.addEventListener('click', function (ev) { var e = frameOf(ev); if (e) zoom(e); });
box.addEventListener('mouseover', function (ev) {
  var e = frameOf(ev);
  if (!e) return;
  var s = e.tip.split('\n').join('  |  ');
  details.textContent = s.length > C.cols ? s.slice(0, C.cols - 2) + '..' : s;
});
box.addEventListener('mouseout', function () { details.textContent = hint; });
resetB.addEventListener('click', reset);
searchB.addEventListener('click', ask);
document.addEventListener('keydown', function (ev) {
  if (ev.key === 'Escape') { reset(); search(null); }
  else if (ev.key === '/' || ((ev.ctrlKey || ev.metaKey) && ev.key === 'f')) {
    ev.preventDefault(); ask();
  }
});
window.heaptrailFlame = { zoom: function (i) { zoom(F[i]); }, reset: reset, search: search,
  frames: F };
})
