/* heaptrail's HTML page, part 2 of 3: the flame graph of one dump, drawn
 * from the tree heaptrail wrote (render/html.c: each node's parent, name
 * and in-use bytes; the small ones summed per parent into "n more").
 * Click or Enter zooms on a frame, Escape zooms out; a search (a regular
 * expression on function names) marks the frames it matches and says
 * how much of the dump they hold, nested matches counted once. */
HT.Flame = function (box, details, dump, inverted, base) {
  var N = [], kids = [], i;
  dump.nodes.forEach(function (n, k) {
    N.push({ id: k, p: n[0], name: n[1] < 0 ? 'all' : dump.names[n[1]][0],
      where: n[1] < 0 ? '' : dump.names[n[1]][1], v: n[2], more: false });
  });
  dump.more.forEach(function (m) {
    N.push({ id: N.length, p: m[0], name: m[1] + ' more', v: m[2], more: true, count: m[1],
      where: 'frames each under ' + (100 * window.HT_DATA.min_share) + '% of the dump, summed' });
  });
  for (i = 0; i < N.length; i++) kids.push([]);
  for (i = 1; i < N.length; i++) kids[N[i].p].push(N[i]);
  /* siblings by name, "n more" last; x in bytes from the left, depth */
  var order = [N[0]];
  N[0].x = 0; N[0].depth = 0;
  for (var q = 0; q < order.length; q++) {
    var n = order[q], x = n.x;
    kids[n.id].sort(function (a, b) {
      return a.more !== b.more ? (a.more ? 1 : -1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    kids[n.id].forEach(function (c) { c.x = x; x += c.v; c.depth = n.depth + 1; order.push(c); });
  }
  /* against a base dump (differential): each node's bytes there, by its
   * path of names (null when the base's tree has no such node: new, or
   * pruned there into its "n more") */
  if (base) {
    var bpath = {}, bn = [];
    base.nodes.forEach(function (n, k) {
      var path = n[1] < 0 ? '' : bn[n[0]] + '\n' + base.names[n[1]][0];
      bn.push(path);
      bpath[path] = n[2];
    });
    var maxd = 1, path = [''];
    for (i = 1; i < order.length; i++) {
      var m = order[i];
      path[m.id] = path[m.p] + '\n' + m.name;
      m.old = m.more ? null : bpath.hasOwnProperty(path[m.id]) ? bpath[path[m.id]] : null;
      if (!m.more) maxd = Math.max(maxd, Math.abs(m.v - (m.old || 0)));
    }
    N[0].old = base.total;
    this.maxDelta = maxd;
    this.baseName = base.name;
  }
  this.N = N; this.order = order; this.box = box; this.details = details; this.base = base;
  this.dump = dump; this.zoomed = N[0]; this.re = null; this.inverted = !!inverted;
};

HT.Flame.prototype.colour = function (name) {
  var h = 2166136261;
  for (var i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
  return 'hsl(' + (95 + h % 106) + ',' + (42 + (h >>> 12) % 20) + '%,' + (60 + (h >>> 24) % 12) + '%)';
};

/* red for growth, blue for shrinking, paler the smaller the change (as
 * heaptrail flame --base colours them) */
HT.Flame.prototype.diffColour = function (n) {
  var d = n.v - (n.old || 0), t = Math.abs(d) / this.maxDelta, f = Math.round(235 - 170 * t);
  return 'rgb(' + (d > 0 ? 255 : f) + ',' + f + ',' + (d < 0 ? 255 : f) + ')';
};

HT.Flame.prototype.isUnder = function (n, z) {
  while (n && n !== z) n = n.p >= 0 ? this.N[n.p] : null;
  return n === z;
};

HT.Flame.prototype.describe = function (n) {
  var t = this.dump.total, z = this.zoomed;
  var s = n.name + ' \u2014 ' + HT.bytes(n.v) + ' (' + HT.thousands(n.v) + ' bytes, ' +
    (t ? (100 * n.v / t).toFixed(2) : '0') + '% of the dump';
  if (z !== this.N[0] && z.v) s += ', ' + (100 * n.v / z.v).toFixed(2) + '% of ' + z.name;
  s += ')';
  if (this.base && !n.more) {
    var d = n.v - (n.old || 0);
    s += n.old === null ? ' \u2014 not in ' + this.baseName + '\'s graph (new there, or among its "n more")'
      : ' \u2014 change ' + (d > 0 ? '+' : d < 0 ? '-' : '') + HT.bytes(Math.abs(d)) + ' (' +
        (d > 0 ? '+' : '') + HT.thousands(d) + ' bytes) from ' + HT.bytes(n.old);
  }
  return s + (n.where ? ' \u2014 ' + n.where : '');
};

HT.Flame.prototype.render = function () {
  var self = this, box = this.box, W = box.clientWidth || 1200, RH = 18;
  var z = this.zoomed, scale = z.v ? W / z.v : 0, drawn = [], maxd = 0;
  this.order.forEach(function (n) {
    var anc = n !== z && self.isUnder(z, n);
    if (!anc && !self.isUnder(n, z)) return;
    var w = anc ? W : n.v * scale;
    if (w < 0.5) return;
    drawn.push([n, anc ? 0 : (n.x - z.x) * scale, w, anc]);
    if (n.depth > maxd) maxd = n.depth;
  });
  var frag = document.createDocumentFragment();
  drawn.forEach(function (d) {
    var n = d[0], y = self.inverted ? n.depth * RH : (maxd - n.depth) * RH;
    var e = HT.el('div', { class: 'fr' + (d[3] ? ' anc' : '') + (n.more ? ' more' : '') +
      (self.re && !n.more && n.id && self.re.test(n.name) ? ' hit' : ''),
      'data-id': n.id, 'data-name': n.name, 'data-v': n.v,
      'data-old': self.base && n.old !== null && n.old !== undefined ? n.old : null,
      style: 'left:' + d[1].toFixed(1) + 'px;top:' + y + 'px;width:' + d[2].toFixed(1) + 'px;' +
        (n.more ? '' : 'background:' + (self.base ? self.diffColour(n) : self.colour(n.name))) });
    if (d[2] >= 40 && !n.more) {
      e.tabIndex = 0;
      e.setAttribute('role', 'button');
      e.setAttribute('aria-label', self.describe(n) + '. Enter: zoom');
    }
    if (d[2] > 24) e.textContent = n.name;
    frag.appendChild(e);
  });
  box.textContent = '';
  box.style.height = ((maxd + 1) * RH + 2) + 'px';
  box.appendChild(frag);
  this.details.textContent = z === this.N[0] ? 'Click a frame, or focus it and press Enter, to zoom.'
    : 'Zoomed on ' + this.describe(z) + '. Escape or "Reset zoom" zooms out.';
};

HT.Flame.prototype.frameAt = function (ev) {
  var e = ev.target.closest ? ev.target.closest('.fr') : null;
  return e ? this.N[+e.getAttribute('data-id')] : null;
};

HT.Flame.prototype.zoom = function (n) {
  if (!n || n.more) return;
  this.zoomed = n;
  this.render();
};

/* Marks the frames whose name matches q (a regular expression; empty:
 * none) and returns what they hold: {bytes, share, frames}, or
 * {error} for a bad expression. */
HT.Flame.prototype.search = function (q) {
  var re = null;
  if (q) {
    try { re = new RegExp(q); } catch (err) { return { error: 'bad regular expression: ' + q }; }
  }
  this.re = re;
  this.render();
  if (!re) return null;
  var sum = 0, frames = 0, N = this.N;
  var hit = N.map(function (n) { return n.id > 0 && !n.more && re.test(n.name); });
  this.order.forEach(function (n) {
    if (!hit[n.id]) return;
    frames++;
    for (var a = n.p; a > 0; a = N[a].p) if (hit[a]) return;  /* nested: counted once */
    sum += n.v;
  });
  return { bytes: sum, share: this.dump.total ? sum / this.dump.total : 0, frames: frames };
};
