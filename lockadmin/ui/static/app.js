// golocker admin page: polls api/holds and api/stats every 2 seconds,
// keeps the table's rows in place (so focus and clicks survive a refresh),
// and draws the charts as inline SVG. Plain JavaScript, no dependencies.
'use strict';

(() => {
  const POLL_MS = 2000;
  const SVGNS = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);

  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const readOnly = document.body.hasAttribute('data-read-only');
  const hasRecorder = document.body.hasAttribute('data-recorder');
  const lostPushed = document.body.hasAttribute('data-lost-pushed');

  // ---- Holds table ----

  const tbody = document.querySelector('#holds tbody');
  const status = $('status');
  const rows = new Map(); // name -> {tr, cells, hold, at}
  let holdsTimer = 0;
  let holdsSeq = 0;
  let lastNote = '';
  let noteUntil = 0;

  function setStatus(text, bad) {
    if (!bad && Date.now() < noteUntil) {
      text = lastNote; // keep a release's message a few seconds
    }
    status.textContent = text;
    status.classList.toggle('bad', !!bad);
  }

  function note(text) {
    lastNote = text;
    noteUntil = Date.now() + 6000;
    setStatus(text, false);
  }

  function query() {
    const p = new URLSearchParams();
    const prefix = $('f-prefix').value;
    const q = $('f-q').value;
    if (prefix) p.set('prefix', prefix);
    if (q) p.set('q', q);
    return p.toString();
  }

  // fetchJSON fetches url with the page's credentials and returns the
  // response, its JSON body (null when it has none) and, for a failed
  // request, what went wrong.
  async function fetchJSON(url, init) {
    const resp = await fetch(url, Object.assign({ credentials: 'same-origin' }, init));
    let body = null;
    try {
      body = await resp.json();
    } catch (e) {
      body = null;
    }
    const msg = resp.ok ? '' : body && body.error ? body.error : resp.status + ' ' + resp.statusText;
    return { resp, body, msg };
  }

  async function getJSON(url) {
    const { resp, body, msg } = await fetchJSON(url, {
      headers: { Accept: 'application/json' },
      cache: 'no-store',
    });
    if (!resp.ok) {
      const err = new Error(resp.status === 401 ? 'Not signed in any more: reload the page.' : msg);
      err.status = resp.status;
      throw err;
    }
    return body;
  }

  async function refreshHolds() {
    clearTimeout(holdsTimer);
    const seq = ++holdsSeq;
    try {
      const ans = await getJSON('api/holds?' + query());
      if (seq === holdsSeq) renderHolds(ans);
    } catch (e) {
      if (seq === holdsSeq) setStatus(e.message, true);
    }
    if (seq === holdsSeq) holdsTimer = setTimeout(refreshHolds, POLL_MS);
  }

  function formatLeft(ms) {
    if (ms <= 0) return 'expired';
    const s = ms / 1000;
    if (s < 10) return s.toFixed(1) + ' s';
    if (s < 60) return Math.floor(s) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' m ' + String(Math.floor(s % 60)).padStart(2, '0') + ' s';
    return Math.floor(m / 60) + ' h ' + String(m % 60).padStart(2, '0') + ' m';
  }

  function updateLeft(r) {
    const c = r.cells.left;
    if (r.hold.expires_in_ms === undefined) {
      c.textContent = 'session';
      c.title = 'Lives as long as its owner\u2019s session';
      c.classList.remove('expiring');
      return;
    }
    const ms = r.hold.expires_in_ms - (performance.now() - r.at);
    c.textContent = formatLeft(ms);
    c.title = 'Lease ends at ' + new Date(r.hold.expires).toLocaleString();
    c.classList.toggle('expiring', ms < 2000);
  }

  function newRow(name) {
    const tr = document.createElement('tr');
    tr.dataset.name = name;
    const cells = {};
    for (const [key, cls] of [['name', 'name'], ['host', 'host'], ['pid', 'num'], ['token', 'num'], ['left', 'num'], ['waiters', 'num']]) {
      const td = document.createElement(key === 'name' ? 'th' : 'td');
      if (key === 'name') td.scope = 'row';
      td.className = cls;
      td.dataset.col = key;
      tr.appendChild(td);
      cells[key] = td;
    }
    cells.name.textContent = name;
    const act = document.createElement('td');
    if (!readOnly) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = 'Release';
      b.setAttribute('aria-label', 'Release ' + name);
      b.addEventListener('click', () => openConfirm(name));
      act.appendChild(b);
    }
    tr.appendChild(act);
    return { tr, cells };
  }

  function renderHolds(ans) {
    const at = performance.now();
    const seen = new Set();
    for (const h of ans.holds) {
      seen.add(h.name);
      let r = rows.get(h.name);
      if (!r) {
        r = newRow(h.name);
        rows.set(h.name, r);
      }
      r.hold = h;
      r.at = at;
      r.tr.hidden = false;
      const c = r.cells;
      c.host.textContent = h.host || h.owner;
      c.host.title = 'Owner: ' + h.owner;
      c.pid.textContent = h.pid || '';
      c.token.textContent = h.token;
      c.waiters.textContent = h.waiters === undefined ? (ans.waiters_counted ? '?' : '\u2013') : String(h.waiters);
      c.waiters.title = !ans.waiters_counted ? 'This backend does not count waiters'
        : h.waiters === undefined ? 'Counted for the first 100 holds only' : '';
      updateLeft(r);
    }
    for (const [name, r] of rows) {
      if (!seen.has(name)) {
        r.tr.remove();
        rows.delete(name);
      }
    }
    // Keep rows in name order, moving only the ones out of place.
    const names = [...seen].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    names.forEach((name, i) => {
      const tr = rows.get(name).tr;
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    $('empty').hidden = names.length > 0;
    let text = names.length === 1 ? '1 hold' : names.length + ' holds';
    if (ans.truncated) text += ' shown of ' + ans.total + ' (narrow the filter)';
    text += ' \u00b7 updated ' + new Date(ans.time).toLocaleTimeString();
    setStatus(text, false);
  }

  setInterval(() => rows.forEach(updateLeft), 500);

  let filterTimer = 0;
  function onFilter() {
    const q = $('f-q').value;
    // Hide at once what no longer matches; the server confirms.
    for (const [name, r] of rows) r.tr.hidden = !name.includes(q);
    clearTimeout(filterTimer);
    filterTimer = setTimeout(refreshHolds, 250);
  }
  $('f-prefix').addEventListener('input', onFilter);
  $('f-q').addEventListener('input', onFilter);
  $('filter').addEventListener('submit', (e) => {
    e.preventDefault();
    refreshHolds();
  });

  // ---- Release ----

  const dialog = $('confirm');
  const form = $('confirm-form');
  const reason = $('c-reason');
  const cerr = $('c-error');
  const ok = $('c-ok');
  let target = null;

  function openConfirm(name) {
    const r = rows.get(name);
    if (!r) return;
    target = { name: name, owner: r.hold.owner, token: r.hold.token };
    $('c-name').textContent = name;
    $('c-owner').textContent = r.hold.owner;
    $('c-token').textContent = r.hold.token;
    reason.value = '';
    cerr.textContent = '';
    ok.disabled = false;
    dialog.showModal();
    reason.focus();
  }

  $('c-cancel').addEventListener('click', () => dialog.close());

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!target) return;
    if (!reason.value.trim()) {
      cerr.textContent = 'Say why: the reason goes to the audit log.';
      reason.focus();
      return;
    }
    ok.disabled = true;
    cerr.textContent = '';
    try {
      const { resp, body, msg } = await fetchJSON('api/release', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': csrf },
        body: JSON.stringify({ name: target.name, owner: target.owner, token: target.token, reason: reason.value }),
      });
      if (!resp.ok) {
        let why = msg;
        if (resp.status === 409 && body) why += ' It is now held by ' + body.owner + ' (token ' + body.token + ').';
        cerr.textContent = why;
        ok.disabled = false;
        refreshHolds();
        return;
      }
      dialog.close();
      const r = rows.get(target.name);
      if (r) {
        r.tr.remove();
        rows.delete(target.name);
      }
      note('Released ' + body.released + ' (token ' + body.token + '); ' + (lostPushed
        ? 'its holder is told at once.'
        : 'its holder learns it at its next renewal, up to a third of its lease later.'));
      refreshHolds();
    } catch (e3) {
      cerr.textContent = 'The request failed: ' + e3.message;
      ok.disabled = false;
    }
  });

  // ---- Charts ----

  const charts = [];

  function chart(title, unit, series) {
    const fig = document.createElement('figure');
    const id = 'chart-' + charts.length;
    const cap = document.createElement('figcaption');
    cap.id = id;
    cap.textContent = title;
    fig.appendChild(cap);
    const svg = document.createElementNS(SVGNS, 'svg');
    svg.setAttribute('viewBox', '0 0 600 170');
    svg.setAttribute('class', 'chart');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-labelledby', id);
    const grid = document.createElementNS(SVGNS, 'g');
    svg.appendChild(grid);
    const paths = series.map((s, i) => {
      const p = document.createElementNS(SVGNS, 'path');
      p.setAttribute('class', 'series s' + (s.color || i + 1));
      svg.appendChild(p);
      return p;
    });
    fig.appendChild(svg);
    const legend = document.createElement('div');
    legend.className = 'legend';
    const labels = series.map((s, i) => {
      const span = document.createElement('span');
      span.className = 's' + (s.color || i + 1);
      legend.appendChild(span);
      return span;
    });
    fig.appendChild(legend);
    $('charts').appendChild(fig);
    const c = { unit, series, grid, paths, labels };
    charts.push(c);
    return c;
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    const m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function fmt(v) {
    if (v === null || v === undefined) return '\u2013';
    if (v >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return String(Number(v.toPrecision(2)));
  }

  const L = 44, R = 592, T = 8, B = 150;

  function svgEl(name, attrs, text) {
    const e = document.createElementNS(SVGNS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function draw(c, st) {
    const data = c.series.map((s) => s.get(st) || []);
    let top = 0;
    for (const d of data) for (const v of d) if (v !== null && v > top) top = v;
    top = niceMax(top);
    const n = st.seconds;
    const x = (i) => L + ((R - L) * i) / Math.max(n - 1, 1);
    const y = (v) => B - ((B - T) * v) / top;
    c.grid.replaceChildren();
    for (const f of [0, 0.5, 1]) {
      const yy = y(top * f);
      c.grid.appendChild(svgEl('line', { class: 'grid', x1: L, x2: R, y1: yy, y2: yy }));
      c.grid.appendChild(svgEl('text', { x: L - 6, y: yy + 4, 'text-anchor': 'end' }, fmt(top * f)));
    }
    // Time ticks back from the last point: every minute over five
    // minutes, closer while the Recorder is young.
    const step = n > 180 ? 60 : n > 60 ? 30 : n > 20 ? 10 : 5;
    for (let k = Math.floor((n - 1) / step); k >= 0; k--) {
      const label = k === 0 ? 'now' : '\u2212' + (step === 60 ? k + ' min' : k * step + ' s');
      c.grid.appendChild(svgEl('text', { x: x(n - 1 - k * step), y: 166, 'text-anchor': k === 0 ? 'end' : 'middle' }, label));
    }
    data.forEach((d, k) => {
      // A series that only matters when it happens (a rare reason of
      // loss) stays out of the way while it is all zero.
      const quiet = c.series[k].optional && !d.some((v) => v > 0);
      c.labels[k].hidden = quiet;
      if (quiet) {
        c.paths[k].setAttribute('d', '');
        return;
      }
      let path = '';
      let pen = false;
      for (let i = 0; i < d.length; i++) {
        const v = d[i];
        if (v === null || v === undefined) {
          pen = false;
          continue;
        }
        path += (pen ? 'L' : 'M') + x(i).toFixed(1) + ' ' + y(v).toFixed(1);
        pen = true;
      }
      c.paths[k].setAttribute('d', path);
      const last = d.length ? d[d.length - 1] : null;
      c.labels[k].textContent = c.series[k].name + ' ' + fmt(last) + c.unit;
    });
  }

  const reasonColors = { renewal_failed: 4, refused: 2, store: 3, lease_ended: 1, found_at_release: 6, closed: 6, other: 3 };

  function setupCharts() {
    chart('Acquisitions per second, by outcome', '/s', [
      { name: 'acquired', get: (s) => s.acquired, color: 1 },
      { name: 'busy', get: (s) => s.busy, color: 2 },
      { name: 'timed out', get: (s) => s.timed_out, color: 3 },
      { name: 'cancelled', get: (s) => s.cancelled, color: 5 },
      { name: 'failed', get: (s) => s.failed, color: 4 },
    ]);
    chart('Wait for the lock (ms)', ' ms', [
      { name: 'p50', get: (s) => s.wait_p50_ms, color: 1 },
      { name: 'p99', get: (s) => s.wait_p99_ms, color: 2 },
    ]);
    chart('Holds lost per second, by reason', '/s', [{ name: 'all reasons', get: (s) => s.lost, color: 5 }].concat(
      Object.keys(reasonColors).map((r) => ({
        name: r.replace(/_/g, ' '),
        get: (s) => (s.lost_by_reason && s.lost_by_reason[r]) || [],
        color: reasonColors[r],
        optional: true,
      }))));
    chart('Active holds and waiters', '', [
      { name: 'holds', get: (s) => s.active, color: 1 },
      { name: 'waiters', get: (s) => s.waiters, color: 2 },
    ]);
  }

  function renderTotals(st) {
    const t = st.totals;
    const a = t.acquisitions || {};
    const parts = [
      (a.acquired || 0) + ' acquired',
      (a.busy || 0) + ' busy',
      (a.timed_out || 0) + ' timed out',
      (a.cancelled || 0) + ' cancelled',
      (a.failed || 0) + ' failed',
      'wait p50 ' + fmt(t.wait_p50_ms) + ' ms, p99 ' + fmt(t.wait_p99_ms) + ' ms',
      t.lost + ' lost',
    ];
    const span = st.seconds >= 120 ? Math.round(st.seconds / 60) + ' minutes' : st.seconds + ' seconds';
    $('totals').textContent = 'In the last ' + span + ': ' + parts.join(' \u00b7 ') + '. Now: ' + t.active_now + ' held, ' + t.waiters_now + ' waiting.';
  }

  let statsTimer = 0;
  async function refreshStats() {
    clearTimeout(statsTimer);
    try {
      const st = await getJSON('api/stats');
      if (st.enabled) {
        if (!charts.length) setupCharts();
        charts.forEach((c) => draw(c, st));
        renderTotals(st);
      }
    } catch (e) {
      $('totals').textContent = 'Statistics unavailable: ' + e.message;
    }
    statsTimer = setTimeout(refreshStats, POLL_MS);
  }

  refreshHolds();
  if (hasRecorder) refreshStats();
})();
