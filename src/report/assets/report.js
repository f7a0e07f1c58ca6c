// The chorus report viewer (docs/report.md): draws the data `chorus report`
// computed (the element #chorus-data) as SVG. Everything is computed by
// chorus; this script only lays out, draws and filters. No dependencies.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('chorus-data').textContent);
  const NS = 'http://www.w3.org/2000/svg';
  // ir::StepType order, and how each is coloured.
  const TYPES = ['s', 'r', 'rcs', 'rrs', 'rrc', 'rrcs', 'cpy', 're', 'nop'];
  const TYPE_CLASS = ['t-send', 't-recv', 't-fwd', 't-reduce', 't-reduce', 't-reduce', 't-local',
    't-reduce', 't-local'];
  const SENDS = [true, false, true, true, false, true, false, false, false];
  const BUFS = ['i', 'o', 's'];
  const WAITED = ['start', 'order', 'dependency', 'data', 'slot'];

  // ---- small helpers -------------------------------------------------------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    return e;
  }
  function title(node, text) { node.append(sv('title', {}, text)); return node; }
  function bytesText(b) {
    const u = ['B', 'K', 'M', 'G', 'T'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1 && b % 1024 === 0) { b /= 1024; i++; }
    return b + (i ? u[i] : ' B');
  }
  function timeText(ns) {
    if (ns >= 1e6) return (ns / 1e6).toPrecision(4) + ' ms';
    if (ns >= 1e3) return (ns / 1e3).toPrecision(4) + ' us';
    return ns.toFixed(0) + ' ns';
  }
  function gb(x) { return x >= 100 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toPrecision(3); }
  function range(buf, off, cnt) {
    if (off < 0) return '-';
    return BUFS[buf] + '[' + off + (cnt > 1 ? '..' + (off + cnt - 1) : '') + ']';
  }
  // "0-3,7" -> Set, or null for empty / all.
  function parseRanks(text) {
    text = text.trim();
    if (!text) return null;
    const s = new Set();
    for (const part of text.split(',')) {
      const m = part.trim().match(/^(\d+)(?:-(\d+))?$/);
      if (!m) return undefined;
      const a = +m[1], b = m[2] === undefined ? a : +m[2];
      for (let r = a; r <= b && s.size < 100000; r++) s.add(r);
    }
    return s;
  }
  // Utilization 0..1 -> colour (grey when idle, then viridis-like magma).
  const STOPS = [[0xfd, 0xe7, 0x25], [0xf9, 0x8e, 0x09], [0xbc, 0x37, 0x54], [0x57, 0x10, 0x6e]];
  function heat(u) {
    if (!(u > 0)) return '#d4d8df';
    u = Math.min(1, u);
    const x = u * (STOPS.length - 1), i = Math.min(STOPS.length - 2, Math.floor(x)), f = x - i;
    const c = STOPS[i].map((v, k) => Math.round(v + (STOPS[i + 1][k] - v) * f));
    return 'rgb(' + c.join(',') + ')';
  }
  function treeColour(i) { return 'hsl(' + ((i * 137.508) % 360).toFixed(1) + ',70%,45%)'; }
  const SERIES = ['#3b7dd8', '#e08a1e', '#2e9e5b', '#d21f3c', '#7a5cc4', '#8c564b', '#17becf',
    '#bcbd22'];

  // ---- page ----------------------------------------------------------------
  const app = document.getElementById('app');
  const nav = el('nav');
  app.append(el('header', {class: 'top'}, el('h1', {text: D.title || 'chorus report'}), nav));
  const main = el('main');
  app.append(main);
  function card(id, heading) {
    const s = el('section', {class: 'card', id: id}, el('h2', {text: heading}));
    main.append(s);
    nav.append(el('a', {href: '#' + id, text: heading.length > 40 ? heading.slice(0, 40) + '…' :
      heading}));
    return s;
  }

  const algos = D.algorithms || [];
  algos.forEach((a, i) => algorithmCard(a, i));
  if (D.topology) topologyCard();
  if (D.topology && algos.some(a => a.sim && a.sim.curve)) predictedCard();
  if ((D.perf || []).length) measuredCard();

  // ---- one algorithm -------------------------------------------------------
  function algorithmCard(a, index) {
    const s = card('algo-' + index, a.label);
    s.classList.add('algorithm');
    if (a.verdict !== 'unreadable') {
      const forms = (a.forms || []).map(f => (f.inplace ? 'in place' : 'out of place') +
        (f.proven ? ' (proven)' : ''));
      const t = el('table', {class: 'facts'});
      const rows = [['name', a.name], ['collective', a.collective + (a.root !== undefined ?
        ', root ' + a.root : '')], ['ranks', a.ranks], ['forms', forms.join(', ')],
        ['protocol', a.protocol], ['channels', a.nchannels], ['chunks per loop', a.nchunksperloop],
        ['threadblocks', a.tbs], ['steps', a.steps],
        ['sizes', a.minBytes || a.maxBytes ? bytesText(a.minBytes) + ' – ' +
          (a.maxBytes ? bytesText(a.maxBytes) : 'unlimited') : 'any']];
      for (const [k, v] of rows) t.append(el('tr', {}, el('th', {text: k}), el('td', {text: v})));
      s.append(t);
    }
    const words = {correct: 'correct: proven to implement ' + a.collective,
      wrong: 'wrong: the verifier found errors', unproven:
        'no errors found; the result is not proven (a custom collective without a spec)',
      unreadable: 'the file cannot be read'};
    s.append(el('div', {class: 'verdict verdict-' + a.verdict, 'data-verdict': a.verdict,
      text: words[a.verdict]}));
    const flow = a.flow ? new FlowView(a, s) : null;
    if ((a.diagnostics || []).length) {
      const ul = el('ul', {class: 'diagnostics'});
      for (const d of a.diagnostics) {
        const li = el('li', {class: d.severity}, d.text + ' ');
        if (flow && d.rank !== undefined && d.tb !== undefined && d.step !== undefined) {
          li.append(el('a', {class: 'goto', text: '[show step]',
            onclick: () => flow.focusSite(d.rank, d.tb, d.step)}));
        }
        ul.append(li);
      }
      s.insertBefore(ul, flow ? flow.root : null);
    }
    if (a.flow_error) s.append(el('p', {class: 'note', text: a.flow_error}));
    if (a.sim) simSummary(a, s, flow);
  }

  function simSummary(a, s, flow) {
    const m = a.sim;
    s.append(el('h3', {text: 'On ' + D.topology.name + ' at ' + bytesText(m.bytes)}));
    if (m.error) { s.append(el('p', {class: 'note', text: 'not simulated: ' + m.error})); return; }
    let share = '';
    if (m.bound && m.bound.busbw > 0)
      share = ' — ' + (100 * m.busbw / m.bound.busbw).toFixed(1) + ' % of the optimum (' +
        gb(m.bound.busbw) + ' GB/s busbw)';
    s.append(el('p', {class: 'sim-summary', text: 'predicted ' + timeText(m.time_ns) + ', algbw ' +
      gb(m.algbw) + ' GB/s, busbw ' + gb(m.busbw) + ' GB/s' + share + '; ' + m.iterations +
      ' slice iteration(s), ' + m.transfers + ' messages.'}));
    if (m.critical && m.critical.length) {
      const det = el('details', {class: 'critical-path'});
      det.append(el('summary', {text: 'critical path: ' + m.critical.length + ' steps ' +
        '(highlighted in red in the flow above)'}));
      const ol = el('ol');
      const shown = m.critical.slice(Math.max(0, m.critical.length - 200));
      if (shown.length < m.critical.length)
        ol.append(el('li', {text: '… ' + (m.critical.length - shown.length) + ' earlier steps'}));
      for (const [node, iter, start, end, waited] of shown)
        ol.append(el('li', {text: (flow ? flow.describeNode(node) : 'step ' + node) +
          ', iteration ' + iter + ': ' + timeText(start) + ' – ' + timeText(end) +
          ', waited for ' + WAITED[waited]}));
      det.append(ol);
      s.append(det);
    }
  }

  // The chunk flow: ranks as lanes (a row per threadblock), steps as boxes
  // at their level in the happens-before order (or their simulated time),
  // messages as arrows from a send to its receive.
  function FlowView(a, parent) {
    const f = a.flow;
    this.a = a;
    const tbs = f.tbs;  // [rank, id, send, recv, channel, firstNode, nsteps]
    const tbOfNode = new Map();
    const steps = new Map();  // node -> step record
    const times = a.sim && a.sim.steps && a.sim.steps.length ? a.sim.steps : null;
    const crit = new Set((a.sim && a.sim.critical || []).map(c => c[0]));
    f.steps.forEach((r, i) => {
      steps.set(r[0], {node: r[0], type: r[1], srcBuf: r[2], srcOff: r[3], dstBuf: r[4],
        dstOff: r[5], cnt: r[6], dep: r[7], level: r[8], recv: r[9], time: times ? times[i] : null});
    });
    tbs.forEach((t, i) => {
      for (let k = 0; k < t[6]; k++) {
        const st = steps.get(t[5] + k);
        if (st) { st.tb = i; st.step = k; }
      }
    });
    for (const st of steps.values()) tbOfNode.set(st.node, st.tb);
    const sendOf = new Map();  // recv node -> send node
    for (const st of steps.values()) if (st.recv >= 0) sendOf.set(st.recv, st.node);
    const ranksShown = [...new Set(f.steps.map(r => tbs[tbOfNode.get(r[0])][0]))]
      .sort((x, y) => x - y);
    this.root = el('div', {class: 'flow'});
    this.root.append(el('h3', {text: 'Chunk flow' + (f.detailed ? '' : ' (ranks ' +
      ranksShown.join(', ') + ' of ' + a.ranks + ' drawn; the matrix below shows all)')}));
    parent.append(this.root);
    const channels = [...new Set(tbs.map(t => t[4]))].sort((x, y) => x - y);
    const ctl = el('div', {class: 'controls'});
    const rankIn = el('input', {type: 'text', class: 'filter-rank', placeholder: 'all'});
    const chunkIn = el('input', {type: 'text', class: 'filter-chunk', placeholder: 'any'});
    const chanSel = el('select', {class: 'filter-channel'}, el('option', {value: '', text: 'all'}),
      ...channels.map(c => el('option', {value: c, text: c})));
    const axisSel = el('select', {class: 'axis-mode'}, el('option', {value: 'level',
      text: 'steps (happens-before order)'}));
    if (times) axisSel.append(el('option', {value: 'time', text: 'simulated time (first slice)'}));
    const zoom = el('input', {type: 'range', min: '0.25', max: '4', step: '0.25', value: '1',
      class: 'zoom'});
    const critBox = el('input', {type: 'checkbox', class: 'show-critical'});
    critBox.checked = crit.size > 0;
    ctl.append(el('label', {}, 'ranks ', rankIn), el('label', {}, 'chunk ', chunkIn),
      el('label', {}, 'channel ', chanSel), el('label', {}, 'x axis ', axisSel),
      el('label', {}, 'zoom ', zoom));
    if (crit.size) ctl.append(el('label', {}, critBox, ' critical path'));
    const count = el('span', {class: 'note flow-count'});
    ctl.append(count);
    this.root.append(ctl);
    const scroll = el('div', {class: 'scroll'});
    this.root.append(scroll);
    const details = el('div', {class: 'details', text: 'Hover over a step: what it does, what it ' +
      'depends on' + (times ? ' and what it waited for in the simulation.' : '.')});
    this.root.append(details);
    if (f.note) this.root.append(el('p', {class: 'note', text: f.note}));
    const self = this;

    this.describeNode = function (node) {
      const st = steps.get(node);
      if (st === undefined) {
        for (const t of tbs)
          if (node >= t[5] && node < t[5] + t[6])
            return 'rank ' + t[0] + ' tb ' + t[1] + ' step ' + (node - t[5]);
        return 'step ' + node;
      }
      const t = tbs[st.tb];
      return 'rank ' + t[0] + ' tb ' + t[1] + ' step ' + st.step + ' (' + TYPES[st.type] + ')';
    };
    function predecessors(st) {
      const out = [];
      if (st.step > 0) out.push([st.node - 1, 'order']);
      if (st.dep >= 0) out.push([st.dep, 'dependency']);
      if (sendOf.has(st.node)) out.push([sendOf.get(st.node), 'message']);
      return out;
    }
    function explain(st) {
      const t = tbs[st.tb];
      const lines = [self.describeNode(st.node) + '  channel ' + t[4] + '  cnt ' + st.cnt,
        '  src ' + range(st.srcBuf, st.srcOff, st.cnt) + '  dst ' + range(st.dstBuf, st.dstOff,
          st.cnt) + (t[2] >= 0 ? '  sends to rank ' + t[2] : '') +
          (t[3] >= 0 ? '  receives from rank ' + t[3] : '')];
      for (const [p, why] of predecessors(st))
        lines.push('  after ' + self.describeNode(p) + ' (' + why + ')');
      if (st.recv >= 0) lines.push('  its message is received by ' + self.describeNode(st.recv));
      if (st.time) {
        const [start, end, waited, by, byIter] = st.time;
        lines.push('  simulated (first slice): ' + timeText(start) + ' – ' + timeText(end) +
          ', waited for ' + WAITED[waited] + (by >= 0 ? ': ' + self.describeNode(by) +
          (byIter > 0 ? ' of iteration ' + byIter : '') : ''));
      }
      if (crit.has(st.node)) lines.push('  on the critical path');
      return lines.join('\n');
    }

    let svg = null, rectOf = new Map(), arrowsInto = new Map();
    function chunkTest(text) {
      text = text.trim();
      if (!text) return null;
      const m = text.match(/^([ios])?\s*(\d+)$/);
      if (!m) return undefined;
      const buf = m[1] === undefined ? -1 : BUFS.indexOf(m[1]), c = +m[2];
      return st => (st.srcOff >= 0 && (buf < 0 || buf === st.srcBuf) && c >= st.srcOff &&
        c < st.srcOff + st.cnt) || (st.dstOff >= 0 && (buf < 0 || buf === st.dstBuf) &&
        c >= st.dstOff && c < st.dstOff + st.cnt);
    }
    function render() {
      const rankSet = parseRanks(rankIn.value);
      const chunk = chunkTest(chunkIn.value);
      rankIn.style.background = rankSet === undefined ? '#fbdada' : '';
      chunkIn.style.background = chunk === undefined ? '#fbdada' : '';
      const chan = chanSel.value === '' ? null : +chanSel.value;
      const mode = axisSel.value, z = +zoom.value;
      const ranks = ranksShown.filter(r => !rankSet || rankSet.has(r));
      // Rows: a lane per rank, a row per threadblock in it.
      // A row per threadblock: thinner where ranks have many.
      const most = Math.max(1, ...ranks.map(r => tbs.filter(t => t[0] === r).length));
      const rowH = Math.max(6, Math.min(12, Math.floor(96 / most))), pad = 6, left = 70;
      const rowOf = new Map();
      const lanes = [];
      let y = 4;
      for (const r of ranks) {
        const mine = tbs.map((t, i) => i).filter(i => tbs[i][0] === r &&
          (chan === null || tbs[i][4] === chan));
        if (!mine.length) continue;
        lanes.push([r, y, mine.length * rowH + 2 * pad]);
        mine.forEach((i, k) => rowOf.set(i, y + pad + k * rowH));
        y += mine.length * rowH + 2 * pad + 2;
      }
      const height = y + 24;
      let xOf, wOf, width, room = 0;
      if (mode === 'time') {
        let tmax = 1;
        for (const st of steps.values()) if (st.time) tmax = Math.max(tmax, st.time[1]);
        const span = 1100 * z;
        xOf = st => left + st.time[0] / tmax * span;
        wOf = st => Math.max(2, (st.time[1] - st.time[0]) / tmax * span);
        width = left + span + 40;
        room = span / Math.max(1, steps.size / Math.max(1, lanes.length));
      } else {
        let levels = f.levels || 1;
        for (const st of steps.values()) levels = Math.max(levels, st.level + 1);
        // Few levels get wide columns, room for the arrows' labels.
        const col = Math.max(18, Math.min(140, 1100 / levels)) * z;
        xOf = st => left + st.level * col;
        // Wide columns leave the arrows room to slant apart.
        wOf = () => col > 40 ? col * 0.55 : Math.max(2, col - 4);
        room = col;
        width = left + levels * col + 40;
      }
      svg = sv('svg', {width: width, height: height, class: 'flow-svg'});
      const markerId = 'arrow' + Math.random().toString(36).slice(2);
      const marker = sv('marker', {id: markerId, viewBox: '0 0 6 6', refX: '6', refY: '3',
        markerWidth: '6', markerHeight: '6', orient: 'auto-start-reverse'});
      svg.append(sv('defs', {}));
      svg.firstChild.append(marker);
      marker.append(sv('path', {d: 'M0,0 L6,3 L0,6 z', fill: '#6c7789'}));
      lanes.forEach(([r, ly, lh], k) => {
        svg.append(sv('rect', {class: 'lane' + (k % 2 ? ' odd' : ''), x: 0, y: ly, width: width,
          height: lh, 'data-rank': r}));
        svg.append(sv('text', {class: 'lane-label', x: 6, y: ly + lh / 2 + 4}, 'rank ' + r));
      });
      const visible = st => rowOf.has(st.tb) && (!chunk || chunk(st)) &&
        (mode !== 'time' || st.time);
      rectOf = new Map();
      arrowsInto = new Map();
      const gSteps = sv('g', {class: 'steps'}), gMsgs = sv('g', {class: 'messages'});
      let nSteps = 0, nMsgs = 0;
      for (const st of steps.values()) {
        if (!visible(st)) continue;
        const cls = 'step ' + TYPE_CLASS[st.type] + (critBox.checked && crit.has(st.node) ?
          ' critical' : '');
        const rect = sv('rect', {class: cls, x: xOf(st), y: rowOf.get(st.tb) + 1, width: wOf(st),
          height: rowH - 2, 'data-node': st.node});
        rectOf.set(st.node, rect);
        gSteps.append(rect);
        nSteps++;
      }
      const allArrows = [];
      for (const st of steps.values()) {
        if (!SENDS[st.type] || !rectOf.has(st.node)) continue;
        const to = st.recv >= 0 ? steps.get(st.recv) : undefined;
        const x1 = xOf(st) + wOf(st), y1 = rowOf.get(st.tb) + rowH / 2;
        if (to && rectOf.has(to.node)) {
          allArrows.push([st, to, x1, y1, xOf(to), rowOf.get(to.tb) + rowH / 2]);
        } else {
          // Its receive is not drawn (filtered out, or not among the ranks shown).
          allArrows.push([st, null, x1, y1, x1 + 14, y1 - 8]);
        }
      }
      // Labels where they fit (zoom in for more); every arrow has a tooltip.
      const labels = allArrows.length <= 400 && room >= 70;
      for (const [from, to, x1, y1, x2, y2] of allArrows) {
        const line = sv('path', {class: 'msg' + (to ? '' : ' stub'), d: 'M' + x1 + ',' + y1 +
          ' L' + x2 + ',' + y2, 'marker-end': 'url(#' + markerId + ')', 'data-from': from.node,
          'data-to': to ? to.node : -1});
        const t = tbs[from.tb];
        const text = TYPES[from.type] + ' ' + range(from.srcBuf, from.srcOff, from.cnt) + ' → ' +
          (to ? TYPES[to.type] + ' ' + range(to.dstBuf, to.dstOff, to.cnt) : 'rank ' + t[2]);
        title(line, self.describeNode(from.node) + ' → ' + (to ? self.describeNode(to.node) :
          'rank ' + t[2] + ' (not drawn)') + ': ' + text);
        gMsgs.append(line);
        nMsgs++;
        if (to) arrowsInto.set(to.node, line);
        if (labels)
          gMsgs.append(sv('text', {class: 'msg-label', x: (x1 + x2) / 2 + 2, y: (y1 + y2) / 2 - 2},
            text));
      }
      svg.append(gMsgs, gSteps);
      svg.append(sv('text', {x: left, y: height - 8}, mode === 'time' ?
        'time →  (0 – ' + timeText(Math.max(...[...steps.values()].filter(s => s.time)
          .map(s => s.time[1]), 0)) + ')' : 'happens-before level →'));
      count.textContent = lanes.length + ' lanes, ' + nSteps + ' steps, ' + nMsgs + ' messages';
      svg.setAttribute('data-lanes', lanes.length);
      svg.setAttribute('data-steps', nSteps);
      svg.setAttribute('data-messages', nMsgs);
      scroll.replaceChildren(svg);
    }
    let marked = [];
    function unmark() { for (const m of marked) m.classList.remove('pred', 'focus'); marked = []; }
    function mark(st, focus) {
      unmark();
      const r = rectOf.get(st.node);
      if (r && focus) { r.classList.add('focus'); marked.push(r); }
      for (const [p] of predecessors(st)) {
        const pr = rectOf.get(p);
        if (pr) { pr.classList.add('pred'); marked.push(pr); }
      }
      const ar = arrowsInto.get(st.node);
      if (ar) { ar.classList.add('pred'); marked.push(ar); }
      details.textContent = explain(st);
    }
    scroll.addEventListener('mouseover', e => {
      const n = e.target.getAttribute && e.target.getAttribute('data-node');
      if (n !== null && n !== undefined && steps.has(+n)) mark(steps.get(+n), false);
    });
    this.focusSite = function (rank, tb, step) {
      const i = tbs.findIndex(t => t[0] === rank && t[1] === tb);
      if (i < 0) return;
      const st = steps.get(tbs[i][5] + step);
      if (!st) { details.textContent = 'rank ' + rank + ' is not drawn (--detail-ranks)'; return; }
      if (!rectOf.has(st.node)) { rankIn.value = ''; chunkIn.value = ''; chanSel.value = '';
        render(); }
      mark(st, true);
      const r = rectOf.get(st.node);
      if (r) {
        const box = r.getBBox();
        scroll.scrollLeft = Math.max(0, box.x - scroll.clientWidth / 2);
        scroll.scrollTop = Math.max(0, box.y - scroll.clientHeight / 2);
      }
    };
    for (const c of [rankIn, chunkIn]) c.addEventListener('input', render);
    for (const c of [chanSel, axisSel, zoom, critBox]) c.addEventListener('change', render);
    render();
    if (!f.detailed) matrixView(a, parent);
  }

  // A rank by rank traffic matrix (messages per pair), drawn on a canvas so
  // that thousands of ranks stay cheap.
  function matrixView(a, parent) {
    const n = a.ranks, cells = a.flow.matrix;
    const scale = Math.max(1, Math.floor(512 / n));
    const c = el('canvas', {class: 'matrix', width: n, height: n});
    c.style.width = c.style.height = n * scale + 'px';
    const ctx = c.getContext('2d');
    const img = ctx.createImageData(n, n);
    let max = 1;
    for (const m of cells) max = Math.max(max, m[3]);
    img.data.fill(255);
    for (const [from, to, , elems] of cells) {
      const col = heat(0.15 + 0.85 * elems / max).match(/\d+/g).map(Number);
      img.data.set([...col, 255], (from * n + to) * 4);
    }
    ctx.putImageData(img, 0, 0);
    parent.append(el('h3', {text: 'Traffic matrix (row: sender, column: receiver; colour: ' +
      'chunks sent)'}), c, el('p', {class: 'note', text: cells.length + ' rank pairs exchange ' +
      'messages; ' + a.steps + ' steps in all. Pass --detail-ranks to draw other lanes.'}));
  }

  // ---- the topology --------------------------------------------------------
  function topologyCard() {
    const T = D.topology;
    const s = card('topology', 'Topology: ' + T.name);
    const nodes = T.nodes.map(([name, kind, rank, box], id) => ({id, name, kind, rank, box}));
    const links = T.links.map(([from, to, bw, kind, lat], id) => ({id, from, to, bw, kind, lat}));
    const ranks = nodes.filter(n => n.kind === 'rank');
    const aggregated = ranks.length > 128;
    const simmed = algos.map((a, i) => [a, i]).filter(([a]) => a.sim && a.sim.link_bytes);
    const ctl = el('div', {class: 'controls'});
    const algoSel = el('select', {class: 'topo-algo'},
      ...simmed.map(([a, i]) => el('option', {value: i, text: a.label})));
    const slider = el('input', {type: 'range', min: '0', max: '0', value: '0', class: 'time-slider'});
    const when = el('span', {class: 'note slider-label'});
    if (simmed.length) ctl.append(el('label', {}, 'link loads of ', algoSel),
      el('label', {}, 'time ', slider), when);
    const treeSel = el('select', {class: 'tree-select'});
    const SY = D.synth && D.synth.forest ? D.synth : null;
    if (SY && !aggregated) {
      treeSel.append(el('option', {value: 'none', text: 'no trees'}),
        el('option', {value: 'all', text: 'all ' + SY.forest.length + ' trees'}),
        ...SY.forest.map((t, i) => el('option', {value: i, text: t.forest + ' tree ' + i +
          ' (root ' + t.root + ', ' + t.weight + ' of ' + SY.pieces + ' pieces)'})));
      treeSel.value = 'all';
      ctl.append(el('label', {}, 'synthesized ', treeSel));
    }
    s.append(ctl);
    s.append(el('div', {class: 'note'}, 'link colour: utilization ', el('span',
      {class: 'legend-bar'}), ' 0 → 100 %; grey: idle. Width: bandwidth.' +
      (aggregated ? ' ' + ranks.length + ' ranks: drawn box by box.' : '')));
    // Layout: boxes side by side, ranks in rows inside, the box's switches
    // above them and its NICs below; network switches (those joining
    // boxes) in a row under all boxes.
    const adj = nodes.map(() => new Set());
    for (const l of links) { adj[l.from].add(l.to); adj[l.to].add(l.from); }
    const boxOf = n => n.kind === 'rank' ? n.box : null;
    for (const n of nodes) {
      if (n.kind === 'rank') continue;
      const boxes = new Set([...adj[n.id]].map(m => nodes[m]).filter(m => m.kind === 'rank' ||
        m.kind === 'nic').map(m => m.box));
      n.network = boxes.size > 1 || ![...adj[n.id]].some(m => nodes[m].kind === 'rank' ||
        nodes[m].kind === 'nic');
    }
    const boxIds = [...new Set(ranks.map(boxOf))].sort((x, y) => x - y);
    const pos = new Map();
    let W = 0, H = 0;
    const boxRects = [];
    if (aggregated) {
      // A node per box; the network below.
      const cols = Math.ceil(Math.sqrt(boxIds.length * 3));
      boxIds.forEach((b, i) => {
        pos.set('box' + b, [40 + (i % cols) * 60, 40 + Math.floor(i / cols) * 50]);
      });
      W = 40 + cols * 60;
      H = 40 + Math.ceil(boxIds.length / cols) * 50 + 20;
    } else {
      // A box: its ranks on a circle (a torus: on its grid), its switches
      // in the middle, each NIC outside its rank. Boxes in rows.
      const dims = T.name.match(/(\d+)x(\d+)/);
      const grid = /torus/i.test(T.name) && boxIds.length === 1 && dims;
      const cols = Math.max(1, Math.ceil(Math.sqrt(boxIds.length)));
      let x = 10, y = 10, rowH = 0;
      boxIds.forEach((b, bi) => {
        const mine = ranks.filter(n => n.box === b);
        const inner = nodes.filter(n => n.kind !== 'rank' && !n.network && n.box === b);
        const sw = inner.filter(n => n.kind === 'switch'), nics = inner.filter(n => n.kind === 'nic');
        let size;
        if (grid) {
          const w = +dims[2], gap = 48;
          mine.forEach((n, i) => pos.set(n.id, [x + 40 + (i % w) * gap,
            y + 40 + Math.floor(i / w) * gap]));
          size = [w * gap + 40, Math.ceil(mine.length / w) * gap + 40];
        } else {
          const r = Math.max(60, mine.length * 11), c = [x + r + 50, y + r + 50];
          const at = (i, m, rad) => [c[0] + rad * Math.cos(-Math.PI / 2 + 2 * Math.PI * i / m),
            c[1] + rad * Math.sin(-Math.PI / 2 + 2 * Math.PI * i / m)];
          mine.forEach((n, i) => pos.set(n.id, at(i, mine.length, r)));
          sw.forEach((n, i) => pos.set(n.id, sw.length === 1 ? c : at(i, sw.length, r * 0.35)));
          nics.forEach((n, i) => {
            const rk = [...adj[n.id]].map(m => nodes[m]).find(m => m.kind === 'rank');
            const k = rk ? mine.indexOf(rk) : -1;
            pos.set(n.id, k >= 0 ? at(k, mine.length, r + 30) : at(i, nics.length, r + 30));
          });
          size = [2 * r + 100, 2 * r + 100];
        }
        boxRects.push([x, y, size[0], size[1], b]);
        rowH = Math.max(rowH, size[1]);
        W = Math.max(W, x + size[0] + 10);
        if ((bi + 1) % cols === 0) { x = 10; y += rowH + 20; rowH = 0; } else { x += size[0] + 20; }
      });
      H = y + rowH;
    }
    const net = nodes.filter(n => n.kind !== 'rank' && n.network);
    net.forEach((n, i) => pos.set(n.id,
      [20 + (i + 0.5) * ((W - 40) / Math.max(1, net.length)), H + 50]));
    if (net.length) H += 80;
    const keyOf = n => aggregated && !n.network ? 'box' + n.box : n.id;
    const svg = sv('svg', {width: Math.max(W, 300), height: H + 10, class: 'topo-svg'});
    for (const [x, y, w, h, b] of boxRects) {
      svg.append(sv('rect', {class: 'node-box', x, y, width: w, height: h, rx: 8}));
      svg.append(sv('text', {x: x + 6, y: y + 12}, boxIds.length > 1 ? 'box ' + b : ''));
    }
    // Links: one line per pair of drawn nodes, both directions together.
    const pairs = new Map();
    for (const l of links) {
      const a = keyOf(nodes[l.from]), b = keyOf(nodes[l.to]);
      if (a === b) continue;
      const k = a < b ? a + '|' + b : b + '|' + a;
      if (!pairs.has(k)) pairs.set(k, {a: a, b: b, links: []});
      pairs.get(k).links.push(l);
    }
    const bottleneck = new Set(D.synth && D.synth.bottleneck ? D.synth.bottleneck : []);
    const gLinks = sv('g', {class: 'links'});
    const lineOf = [];
    for (const p of pairs.values()) {
      const pa = pos.get(p.a), pb = pos.get(p.b);
      if (!pa || !pb) continue;
      const bw = Math.max(...p.links.map(l => l.bw));
      const line = sv('line', {class: 'link', x1: pa[0], y1: pa[1], x2: pb[0], y2: pb[1],
        'stroke-width': Math.max(1.5, Math.min(7, Math.log2(1 + bw) * 0.9)),
        'data-links': p.links.map(l => l.id).join(',')});
      // Alltoall's optimum: the links its LP keeps at capacity.
      if (bottleneck.size && p.links.some(l => bottleneck.has(nodes[l.from].name + ' -> ' +
        nodes[l.to].name))) line.classList.add('cut');
      gLinks.append(line);
      lineOf.push([line, p]);
    }
    svg.append(gLinks);
    const gTrees = sv('g', {class: 'trees'});
    svg.append(gTrees);
    const gNodes = sv('g', {class: 'nodes'});
    const cutNames = new Set(SY && SY.cut ? SY.cut.inside : []);
    const drawn = new Set();
    for (const n of nodes) {
      const k = keyOf(n);
      if (drawn.has(k) || !pos.has(k)) continue;
      drawn.add(k);
      const [x, y] = pos.get(k);
      let shape;
      if (typeof k === 'string') {
        shape = sv('rect', {class: 'node-switch', x: x - 14, y: y - 10, width: 28, height: 20,
          rx: 4, 'data-box': n.box});
        gNodes.append(title(shape, 'box ' + n.box));
        gNodes.append(sv('text', {class: 'node-label', x, y}, n.box));
        continue;
      }
      if (n.kind === 'rank') {
        shape = sv('circle', {class: 'node-rank', cx: x, cy: y, r: 12, 'data-rank': n.rank});
      } else if (n.kind === 'switch') {
        shape = sv('rect', {class: 'node-switch', x: x - 16, y: y - 9, width: 32, height: 18,
          rx: 3});
      } else {
        shape = sv('rect', {class: 'node-nic', x: x - 6, y: y - 6, width: 12, height: 12});
      }
      shape.setAttribute('data-node', n.id);
      if (cutNames.has(n.name)) shape.classList.add('cut');
      gNodes.append(title(shape, n.name + (n.kind === 'rank' ? ' (rank ' + n.rank + ')' : '')));
      if (n.kind === 'rank') gNodes.append(sv('text', {class: 'node-label', x, y}, n.rank));
      else if (n.kind === 'switch') gNodes.append(sv('text', {class: 'node-name', x, y: y - 12},
        n.name));
    }
    svg.append(gNodes);
    const scroll = el('div', {class: 'scroll'});
    scroll.append(svg);
    s.append(scroll);
    const info = el('div', {class: 'details', text: 'Hover over a link: its bandwidth and load.'});
    s.append(info);
    if (bottleneck.size) s.append(el('p', {class: 'note', text: 'The alltoall optimum\'s ' +
      'bottleneck (red dashed): ' + bottleneck.size + ' link(s) at capacity in its LP; the ' +
      'optimum is ' + gb(D.synth.algbw) + ' GB/s algbw (' + gb(D.synth.busbw) + ' GB/s busbw).'}));
    if (SY && SY.cut) s.append(el('p', {class: 'note', text: 'Binding cut (red dashed outline): ' +
      SY.cut.ranks_inside + ' rank(s) inside, ' + gb(SY.cut.capacity) + ' GB/s crossing it; ' +
      'the optimum is ' + gb(SY.algbw) + ' GB/s algbw (' + gb(SY.busbw) + ' GB/s busbw).'}));

    function loads() {
      if (!simmed.length) return null;
      const a = algos[+algoSel.value], m = a.sim;
      const k = +slider.value, tl = m.timeline;
      slider.max = tl ? tl.buckets : 0;
      if (k > 0 && tl) {
        when.textContent = 'interval ' + k + ' of ' + tl.buckets + ': ' +
          timeText((k - 1) * tl.step_ns) + ' – ' + timeText(k * tl.step_ns);
        return l => (tl.links[l.id] || [])[k - 1] || 0;
      }
      when.textContent = 'the whole run (' + timeText(m.time_ns) + ' at ' + bytesText(m.bytes) +
        '); slide to see it over time';
      return l => m.link_bytes[l.id] / (l.bw * m.time_ns);  // bytes / (GB/s x ns)
    }
    function paint() {
      const u = loads();
      let busy = 0;
      for (const [line, p] of lineOf) {
        const us = u ? p.links.map(u) : [0];
        // Aggregated pairs: their loads summed over their capacity.
        const util = aggregated && u ? p.links.reduce((s, l) => s + u(l) * l.bw, 0) /
          p.links.reduce((s, l) => s + l.bw, 0) : Math.max(...us);
        line.setAttribute('stroke', heat(util));
        line.setAttribute('data-util', util.toFixed(3));
        if (util > 0) busy++;
        const names = p.links.slice(0, 4).map(l => nodes[l.from].name + ' → ' + nodes[l.to].name +
          ' ' + gb(l.bw) + ' GB/s' + (u ? ', ' + (100 * u(l)).toFixed(1) + ' % busy' : ''));
        if (p.links.length > 4) names.push('… ' + (p.links.length - 4) + ' more links');
        line.replaceChildren(sv('title', {}, names.join('\n')));
        line.dataset.info = names.join('\n');
      }
      svg.setAttribute('data-busy-links', busy);
    }
    svg.addEventListener('mouseover', e => {
      if (e.target.dataset && e.target.dataset.info) info.textContent = e.target.dataset.info;
    });
    function drawTrees() {
      gTrees.replaceChildren();
      if (!SY || aggregated) return;
      const which = treeSel.value;
      const rankNode = new Map(ranks.map(n => [n.rank, n.id]));
      let drawnEdges = 0;
      SY.forest.forEach((t, i) => {
        if (which !== 'all' && which !== String(i)) return;
        for (const [u, v] of t.edges) {
          const pu = pos.get(rankNode.get(u)), pv = pos.get(rankNode.get(v));
          if (!pu || !pv) continue;
          // Curved, offset per tree, so parallel trees stay apart.
          const mx = (pu[0] + pv[0]) / 2, my = (pu[1] + pv[1]) / 2;
          const dx = pv[0] - pu[0], dy = pv[1] - pu[1], len = Math.hypot(dx, dy) || 1;
          const bend = 10 + (i % 6) * 5;
          const path = sv('path', {class: 'tree-edge', stroke: treeColour(i), 'data-tree': i,
            d: 'M' + pu[0] + ',' + pu[1] + ' Q' + (mx - dy / len * bend) + ',' +
              (my + dx / len * bend) + ' ' + pv[0] + ',' + pv[1]});
          gTrees.append(title(path, t.forest + ' tree ' + i + ' (root ' + t.root + '): ' +
            (t.forest === 'scatter' ? v + ' → ' + u : u + ' → ' + v)));
          drawnEdges++;
        }
      });
      svg.setAttribute('data-tree-edges', drawnEdges);
    }
    algoSel.addEventListener('change', () => { slider.value = 0; paint(); });
    slider.addEventListener('input', paint);
    treeSel.addEventListener('change', drawTrees);
    paint();
    drawTrees();
  }

  // ---- charts --------------------------------------------------------------
  // series: [{name, points: [[bytes, gbps]], colour}]; lines: [{name, y, colour}].
  function chart(parent, heading, series, lines, cls) {
    const wrap = el('div', {class: 'chart ' + (cls || '')});
    wrap.append(el('h3', {text: heading}));
    const logSel = el('input', {type: 'checkbox', class: 'log-y'});
    wrap.append(el('div', {class: 'controls'}, el('label', {}, logSel, ' log busbw axis')));
    const holder = el('div');
    wrap.append(holder);
    parent.append(wrap);
    const W = 900, H = 340, L = 60, R = 300, Tp = 10, B = 40;
    function draw() {
      const xs = series.flatMap(s => s.points.map(p => p[0]));
      const ys = series.flatMap(s => s.points.map(p => p[1])).concat(lines.map(l => l.y));
      if (!xs.length) { holder.replaceChildren(el('p', {class: 'note', text: 'no points'})); return; }
      const pos = ys.filter(y => y > 0), xpos = xs.filter(x => x > 0);
      if (!xpos.length) { holder.replaceChildren(el('p', {class: 'note', text: 'no sizes'})); return; }
      const x0 = Math.log2(Math.min(...xpos)), x1 = Math.max(x0 + 1, Math.log2(Math.max(...xpos)));
      // A log axis needs a positive value.
      const log = logSel.checked && pos.length > 0;
      let y0 = log ? Math.log10(Math.min(...pos)) : 0;
      let y1 = log ? Math.log10(Math.max(...pos)) : Math.max(...ys, 1e-9) * 1.05;
      let step = 0;
      if (log) {
        y0 = Math.floor(y0);
        y1 = Math.ceil(y1 + 0.01);
      } else {
        // Ticks at 1, 2 or 5 times a power of ten.
        const raw = y1 / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
        step = [1, 2, 5, 10].find(m => m * mag >= raw) * mag;
        y1 = Math.ceil(y1 / step) * step;
      }
      const X = x => L + (Math.log2(x) - x0) / (x1 - x0) * (W - L - R);
      const Y = y => H - B - ((log ? Math.log10(Math.max(y, Math.pow(10, y0))) : y) - y0) /
        (y1 - y0) * (H - B - Tp);
      const svg = sv('svg', {width: W, height: H, class: 'chart-svg'});
      for (let e = Math.ceil(x0); e <= Math.floor(x1); e += 2) {
        const x = X(Math.pow(2, e));
        svg.append(sv('line', {class: 'grid', x1: x, x2: x, y1: Tp, y2: H - B}));
        svg.append(sv('text', {x: x, y: H - B + 14, 'text-anchor': 'middle'},
          bytesText(Math.pow(2, e))));
      }
      const ticks = [];
      if (log) for (let e = y0; e <= y1; e++) ticks.push(Math.pow(10, e));
      else for (let t = 0; t <= y1 + step / 2; t += step) ticks.push(t);
      for (const t of ticks) {
        const y = Y(t);
        svg.append(sv('line', {class: 'grid', x1: L, x2: W - R, y1: y, y2: y}));
        svg.append(sv('text', {x: L - 6, y: y + 3, 'text-anchor': 'end'}, gb(t)));
      }
      svg.append(sv('line', {class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B}));
      svg.append(sv('line', {class: 'axis', x1: L, x2: L, y1: Tp, y2: H - B}));
      svg.append(sv('text', {x: (L + W - R) / 2, y: H - 6, 'text-anchor': 'middle'}, 'size'));
      svg.append(sv('text', {x: 12, y: H / 2, transform: 'rotate(-90 12 ' + H / 2 + ')',
        'text-anchor': 'middle'}, 'busbw GB/s'));
      const legend = sv('g', {class: 'legend'});
      let ly = Tp + 6;
      for (const l of lines) {
        const y = Y(l.y);
        svg.append(title(sv('line', {class: 'bound', x1: L, x2: W - R, y1: y, y2: y,
          stroke: l.colour, 'data-name': l.name}), l.name + ': ' + gb(l.y) + ' GB/s'));
        legend.append(sv('line', {class: 'legend-line bound', x1: W - R + 10, x2: W - R + 30, y1: ly, y2: ly,
          stroke: l.colour}));
        legend.append(sv('text', {x: W - R + 34, y: ly + 4}, l.name));
        ly += 16;
      }
      for (const s of series) {
        const pts = s.points.slice().sort((p, q) => p[0] - q[0]);
        const d = pts.map((p, i) => (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ',' +
          Y(p[1]).toFixed(1)).join(' ');
        svg.append(sv('path', {class: 'curve', d, stroke: s.colour, 'data-name': s.name,
          'data-points': pts.length}));
        for (const p of pts)
          svg.append(title(sv('circle', {cx: X(p[0]), cy: Y(p[1]), r: 2.5, fill: s.colour}),
            s.name + ': ' + bytesText(p[0]) + ', ' + gb(p[1]) + ' GB/s'));
        legend.append(sv('line', {x1: W - R + 10, x2: W - R + 30, y1: ly, y2: ly, stroke: s.colour,
          'stroke-width': 2}));
        legend.append(sv('text', {x: W - R + 34, y: ly + 4}, s.name.length > 44 ?
          s.name.slice(0, 43) + '…' : s.name));
        ly += 16;
      }
      svg.append(legend);
      holder.replaceChildren(svg);
    }
    logSel.addEventListener('change', draw);
    draw();
  }

  function predictedCard() {
    const s = card('predicted', 'Predicted busbw on ' + D.topology.name);
    const series = [], lines = [], seen = new Set();
    algos.forEach((a, i) => {
      if (!a.sim || !a.sim.curve) return;
      series.push({name: a.label.split('/').pop(), colour: SERIES[i % SERIES.length],
        points: a.sim.curve.map(p => [p[0], p[1]])});
      const b = a.sim.bound;
      const key = a.collective + '/' + a.ranks;
      if (b && b.busbw > 0 && !seen.has(key)) {
        seen.add(key);
        lines.push({name: 'optimum ' + a.collective + ' (' + a.ranks + ')', y: b.busbw,
          colour: '#d21f3c'});
      }
    });
    chart(s, 'Simulated busbw over sizes; dashed: the topology\'s optimum (the synthesizer\'s ' +
      'bound)', series, lines, 'predicted');
  }

  function measuredCard() {
    const s = card('measured', 'Measured');
    const groups = new Map();
    const many = D.perf.length > 1;
    D.perf.forEach((f, fi) => {
      for (const se of f.series) {
        const key = se.collective + ' on ' + se.ranks + ' ranks';
        if (!groups.has(key)) groups.set(key, {series: [], lines: []});
        const g = groups.get(key);
        g.series.push({name: se.implementation + (many ? ' (' + f.path.split('/').pop()
          .replace(/\.csv$/, '') + ')' : ''), points: se.points});
        if (f.memcpy_gbs && !g.lines.some(l => l.file === fi))
          g.lines.push({name: 'memcpy' + (many ? ' (' + (fi + 1) + ')' : ''), y: f.memcpy_gbs,
            colour: '#555', file: fi});
        if (f.socket_gbs && !g.lines.some(l => l.file === fi && l.socket))
          g.lines.push({name: 'sockets', y: f.socket_gbs, colour: '#999', file: fi, socket: true});
      }
    });
    const colours = new Map();
    for (const [key, g] of groups) {
      for (const se of g.series) {
        if (!colours.has(se.name)) colours.set(se.name, SERIES[colours.size % SERIES.length]);
        se.colour = colours.get(se.name);
      }
      chart(s, key, g.series, g.lines, 'measured');
    }
    s.append(el('p', {class: 'note', text: 'From ' + D.perf.map(f => f.path).join(', ') +
      ' (chorus perf --csv, bench/peer_compare.sh).'}));
  }
  // When the page was drawn, from navigation start (docs/report.md's timings).
  document.body.setAttribute('data-render-ms', String(Math.round(performance.now())));
  document.body.setAttribute('data-ready', '1');
})();
