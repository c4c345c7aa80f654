// tern console: a plain ES module, no build step and no third-party code.
// It reads the node's JSON API (/api/v1/...) and tails topics through
// Pulsar's WebSocket API (/ws/v2/reader/...). Data from the node only ever
// reaches the page as text (textContent), never as markup.
//
// Layout: a hash router picks a view; a view draws into <main> and returns
// a function that stops its timers and sockets. A later view (replication,
// a region's detail) is one more entry in `routes` and one more tab in
// index.html.

const REFRESH_MS = 2000;
const NODE_REFRESH_MS = 5000;
const FETCH_TIMEOUT_MS = 8000;
const TAIL_MAX_ROWS = 200;
const SPARK_POINTS = 30;

// ---------------------------------------------------------------- DOM

// h builds an element. props: class, text, dataset, on (event handlers),
// and attributes; children are nodes or strings (as text), falsy skipped.
function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

function setProps(el, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- formats

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const nf1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

function fmtCount(n) {
  if (n === undefined || n === null) return '—';
  return Math.abs(n) >= 1e7 ? compact.format(n) : nf.format(n);
}

function fmtRate(v) {
  if (v === undefined || v === null) return '—';
  if (v === 0) return '0';
  if (v < 10) return nf1.format(v);
  return v >= 1e6 ? compact.format(v) : nf.format(v);
}

function fmtBytes(n) {
  if (n === undefined || n === null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? nf.format(n) : nf1.format(n)) + ' ' + units[i];
}

function fmtByteRate(v) {
  return v === undefined || v === null ? '—' : fmtBytes(v) + '/s';
}

// The node's clock minus ours, so ages are measured on the node's clock.
let clockSkew = 0;

function fmtAge(ms) {
  if (!ms) return '—';
  const sec = Math.max(0, (Date.now() + clockSkew - ms) / 1000);
  if (sec < 2) return 'just now';
  if (sec < 60) return `${Math.floor(sec)} s ago`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min ago`;
  if (sec < 86400) return `${Math.floor(sec / 3600)} h ago`;
  return `${Math.floor(sec / 86400)} d ago`;
}

function fmtTime(d) {
  if (!(d instanceof Date) || isNaN(d)) return '—';
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// num is a right-aligned table cell; zero and absent values are faint.
function num(text, value) {
  return h('td', { class: value ? 'num' : 'num zero' }, text);
}

// ---------------------------------------------------------------- errors

// problems holds one message per source (a view's poller, the node info,
// the tail); the banner shows them all until each source succeeds again.
const problems = new Map();

function report(source, err) {
  const msg = err instanceof Error ? err.message : String(err);
  problems.set(source, msg);
  drawBanner();
}

function resolve(source) {
  if (problems.delete(source)) drawBanner();
}

function drawBanner() {
  const banner = $('banner');
  banner.hidden = problems.size === 0;
  replace(banner, [...problems.values()].join(' · '));
}

window.addEventListener('error', (e) => report('page', e.message || 'script error'));
window.addEventListener('unhandledrejection', (e) => {
  e.preventDefault();
  report('page', e.reason instanceof Error ? e.reason.message : String(e.reason));
});

// ---------------------------------------------------------------- API

class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// api fetches a JSON document from the node; failures become APIErrors
// that say what went wrong in words.
async function api(path, signal) {
  const timeout = AbortSignal.timeout(FETCH_TIMEOUT_MS);
  const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let resp;
  try {
    resp = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store', signal: both });
  } catch (e) {
    if (signal && signal.aborted) throw e;
    const why = timeout.aborted ? `no answer within ${FETCH_TIMEOUT_MS / 1000} s` : e.message;
    throw new APIError(0, `Cannot reach the node for ${path}: ${why}`);
  }
  let body = null;
  try {
    body = await resp.json();
  } catch {
    // A body that is not JSON is reported by status below.
  }
  if (!resp.ok) {
    const reason = body && (body.error || body.reason);
    throw new APIError(resp.status, `${path}: ${reason || 'HTTP ' + resp.status}`);
  }
  if (body === null) throw new APIError(resp.status, `${path}: the answer is not JSON`);
  return body;
}

// poll runs fn now and every ms after it settles, until stopped. Errors
// go to the banner under source; a success clears that source.
function poll(source, ms, fn) {
  const ctrl = new AbortController();
  let timer = 0;
  const tick = async () => {
    try {
      await fn(ctrl.signal);
      resolve(source);
    } catch (e) {
      if (ctrl.signal.aborted) return;
      report(source, e);
    }
    if (!ctrl.signal.aborted) timer = setTimeout(tick, ms);
  };
  tick();
  return () => {
    ctrl.abort();
    clearTimeout(timer);
    resolve(source);
  };
}

const enc = encodeURIComponent;
const topicHash = (t) => `#/topics/${enc(t.tenant)}/${enc(t.namespace)}/${enc(t.local)}`;
const topicAPI = (tenant, ns, topic) => `/api/v1/topics/${enc(tenant)}/${enc(ns)}/${enc(topic)}`;

// ---------------------------------------------------------------- widgets

function card(label, value, unit, hot) {
  return h('div', { class: hot ? 'card hot' : 'card' },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' }, value, unit && h('small', {}, unit)));
}

function panel(title, count, ...body) {
  return h('section', { class: 'panel' },
    h('div', { class: 'panel-head' }, h('h2', {}, title, count !== undefined && h('span', { class: 'count' }, ` ${count}`))),
    ...body);
}

function empty(text) {
  return h('div', { class: 'empty' }, text);
}

function table(head, rows) {
  return h('div', { class: 'table-wrap' },
    h('table', {},
      h('thead', {}, h('tr', {}, head.map(([label, cls]) => h('th', { class: cls || '' }, label)))),
      h('tbody', {}, rows)));
}

// spark draws recent values as a small area chart.
function spark(values, width = 64, height = 18) {
  const max = Math.max(...values, 1e-9);
  const step = width / Math.max(values.length - 1, 1);
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 1 - (v / max) * (height - 2)).toFixed(1)}`);
  return s('svg', { class: 'spark', width, height, viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true' },
    s('path', { d: `M0,${height} L${pts.join(' L')} L${((values.length - 1) * step).toFixed(1)},${height} Z` }),
    s('polyline', { points: pts.join(' ') }));
}

// miniBars draws one bar per partition, scaled to the largest.
function miniBars(values) {
  const max = Math.max(...values, 1);
  return h('span', { class: 'mini-bars', title: values.map((v, i) => `p${i}: ${fmtCount(v)}`).join('\n') },
    values.map((v) => {
      // Through the CSSOM: the page's policy refuses style attributes.
      const bar = h('span', { class: v ? '' : 'none' });
      bar.style.height = `${Math.max(2, Math.round((v / max) * 18))}px`;
      return bar;
    }));
}

// ---------------------------------------------------------------- top bar

function startNodeInfo() {
  const info = $('node-info');
  return poll('node', NODE_REFRESH_MS, async (signal) => {
    try {
      const n = await api('/api/v1/node', signal);
      clockSkew = n.time ? n.time - Date.now() : 0;
      replace(info,
        h('span', { class: n.ready ? 'dot ok' : 'dot warn', title: n.ready ? 'ready' : 'starting' }),
        h('span', {}, 'node ', h('b', {}, n.name)),
        h('span', {}, 'region ', h('b', {}, n.region)),
        n.version && h('span', { class: 'badge', title: 'tern version' }, n.version));
      info.title = [n.kafka && `Kafka ${n.kafka}`, n.pulsar && `Pulsar ${n.pulsar}`, n.http && `HTTP ${n.http}`,
        n.clusterId && `cluster ${n.clusterId}`].filter(Boolean).join('\n');
    } catch (e) {
      replace(info, h('span', { class: 'dot bad' }), h('span', {}, 'unreachable'));
      throw e;
    }
  });
}

function startTheme() {
  const root = document.documentElement;
  let stored = null;
  try {
    stored = localStorage.getItem('tern.theme');
  } catch {
    // Storage can be off; the theme then follows the system.
  }
  const dark = stored ? stored === 'dark' : window.matchMedia('(prefers-color-scheme: dark)').matches;
  root.dataset.theme = dark ? 'dark' : 'light';
  $('theme').addEventListener('click', () => {
    root.dataset.theme = root.dataset.theme === 'dark' ? 'light' : 'dark';
    try {
      localStorage.setItem('tern.theme', root.dataset.theme);
    } catch {
      // Not remembered; nothing else depends on it.
    }
  });
}

// ---------------------------------------------------------------- topics

const rateHistory = new Map(); // topic name -> recent msg/s in

const topicColumns = [
  { key: 'name', label: 'Topic', sort: (t) => t.name },
  { key: 'partitions', label: 'Partitions', num: true, sort: (t) => t.partitions },
  { key: 'msgRateIn', label: 'Msg/s in', num: true, sort: (t) => t.msgRateIn ?? -1 },
  { key: 'msgRateOut', label: 'Msg/s out', num: true, sort: (t) => t.msgRateOut ?? -1 },
  { key: 'bytesRateIn', label: 'Bytes/s in', num: true, sort: (t) => t.bytesRateIn ?? -1 },
  { key: 'backlog', label: 'Backlog', num: true, sort: (t) => t.backlog },
  { key: 'messages', label: 'Messages', num: true, sort: (t) => t.messages },
  { key: 'storageSize', label: 'Stored', num: true, sort: (t) => t.storageSize },
  { key: 'subscriptions', label: 'Subs', num: true, sort: (t) => t.subscriptions },
  { key: 'clients', label: 'Prod / cons', num: true, sort: (t) => t.producers + t.consumers },
  { key: 'lastPublish', label: 'Last publish', num: true, sort: (t) => t.lastPublish || 0 },
];

function topicsView(main) {
  const state = { topics: null, filter: '', sortKey: 'name', asc: true };
  const filter = h('input', {
    class: 'input', type: 'search', placeholder: 'Filter topics', 'aria-label': 'Filter topics',
    on: { input: () => { state.filter = filter.value.trim().toLowerCase(); draw(); } },
  });
  const sub = h('div', { class: 'sub' }, 'loading…');
  const cards = h('div', { class: 'cards' });
  const body = h('div', { id: 'topics' });
  replace(main,
    h('div', { class: 'page-head' }, h('div', {}, h('h1', {}, 'Topics'), sub), h('div', { class: 'toolbar' }, filter)),
    cards,
    h('section', { class: 'panel' }, body));

  function sortBy(key) {
    state.asc = state.sortKey === key ? !state.asc : key === 'name';
    state.sortKey = key;
    draw();
  }

  function row(t) {
    const hist = rateHistory.get(t.name) || [];
    const cells = {
      name: h('td', {},
        h('span', { class: 'topic-ns' }, `${t.tenant}/${t.namespace}/`),
        h('a', { class: 'topic-name', href: topicHash(t) }, t.local)),
      partitions: h('td', { class: 'num', title: t.partitions ? '' : 'not partitioned' }, t.partitions ? fmtCount(t.partitions) : '—'),
      msgRateIn: h('td', { class: t.msgRateIn ? 'num' : 'num zero' },
        h('div', { class: 'rate-cell' }, hist.length > 1 && spark(hist), h('span', {}, fmtRate(t.msgRateIn)))),
      msgRateOut: num(fmtRate(t.msgRateOut), t.msgRateOut),
      bytesRateIn: num(fmtByteRate(t.bytesRateIn), t.bytesRateIn),
      backlog: num(fmtCount(t.backlog), t.backlog),
      messages: num(fmtCount(t.messages), t.messages),
      storageSize: num(fmtBytes(t.storageSize), t.storageSize),
      subscriptions: num(fmtCount(t.subscriptions), t.subscriptions),
      clients: num(`${t.producers} / ${t.consumers}`, t.producers + t.consumers),
      lastPublish: num(fmtAge(t.lastPublish), t.lastPublish),
    };
    return h('tr', {
      class: 'link', dataset: { topic: t.name },
      on: { click: (e) => { if (!e.target.closest('a')) location.hash = topicHash(t); } },
    }, topicColumns.map((c) => cells[c.key]));
  }

  function draw() {
    const all = state.topics;
    if (!all) return;
    const sum = (f) => all.reduce((a, t) => a + (f(t) || 0), 0);
    const anyRate = all.some((t) => t.msgRateIn !== undefined);
    replace(cards,
      card('Topics', fmtCount(all.length)),
      card('Partitions', fmtCount(sum((t) => t.partitions || 1))),
      card('Msg/s in', anyRate ? fmtRate(sum((t) => t.msgRateIn)) : '—'),
      card('Msg/s out', anyRate ? fmtRate(sum((t) => t.msgRateOut)) : '—'),
      card('Bytes/s in', anyRate ? fmtByteRate(sum((t) => t.bytesRateIn)) : '—'),
      card('Backlog', fmtCount(sum((t) => t.backlog)), '', sum((t) => t.backlog) > 0),
      card('Stored', fmtBytes(sum((t) => t.storageSize))));
    if (all.length === 0) {
      replace(body, empty('No topics yet. Create one with a Kafka or Pulsar client, or PUT /admin/v2/persistent/{tenant}/{namespace}/{topic}.'));
      return;
    }
    const shown = all.filter((t) => !state.filter || t.name.toLowerCase().includes(state.filter));
    const col = topicColumns.find((c) => c.key === state.sortKey) || topicColumns[0];
    shown.sort((a, b) => {
      const x = col.sort(a), y = col.sort(b);
      const d = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return state.asc ? d : -d;
    });
    const head = h('tr', {}, topicColumns.map((c) => h('th', {
      class: ['sortable', c.num && 'num', c.key === state.sortKey && 'sorted', c.key === state.sortKey && state.asc && 'asc'].filter(Boolean).join(' '),
      on: { click: () => sortBy(c.key) },
    }, c.label)));
    replace(body, h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, head), h('tbody', {}, shown.map(row)))),
      shown.length === 0 && empty(`No topic matches “${filter.value}”.`));
  }

  return poll('topics', REFRESH_MS, async (signal) => {
    const data = await api('/api/v1/topics', signal);
    if (data.time) clockSkew = data.time - Date.now();
    state.topics = data.topics || [];
    const seen = new Set();
    for (const t of state.topics) {
      seen.add(t.name);
      const hist = rateHistory.get(t.name) || [];
      if (t.msgRateIn !== undefined) hist.push(t.msgRateIn);
      rateHistory.set(t.name, hist.slice(-SPARK_POINTS));
    }
    for (const name of rateHistory.keys()) if (!seen.has(name)) rateHistory.delete(name);
    sub.textContent = `${state.topics.length} topic${state.topics.length === 1 ? '' : 's'} on this node · every ${REFRESH_MS / 1000} s`;
    draw();
  });
}

// ---------------------------------------------------------------- one topic

function topicView(main, tenant, ns, topic) {
  const badges = h('div', { class: 'badges' });
  const head = h('div', { class: 'page-head' },
    h('div', {},
      h('div', { class: 'crumbs' }, h('a', { href: '#/topics' }, 'Topics'), ` / ${tenant} / ${ns}`),
      h('h1', {}, topic)),
    badges);
  const cards = h('div', { class: 'cards' });
  const left = h('div', { id: 'topic-detail' }, empty('loading…'));
  const side = h('div', { class: 'sticky' });
  replace(main, head, cards, h('div', { class: 'topic-grid' }, left, side));
  // The tail opens once the topic is known to exist, and closes if it
  // goes away.
  let tail = null;
  let gone = false;

  function draw(d) {
    if (!tail && !gone) {
      tail = startTail(tenant, ns, topic);
      side.append(tail.el);
    }
    replace(badges,
      h('span', { class: 'badge accent' }, d.partitions ? `${d.partitions} partitions` : 'not partitioned'),
      d.deduplication && h('span', { class: 'badge ok' }, 'deduplication'),
      h('span', { class: 'badge' }, `created ${fmtAge(d.created)}`));
    replace(cards,
      card('Msg/s in', fmtRate(d.msgRateIn)),
      card('Bytes/s in', fmtByteRate(d.bytesRateIn)),
      card('Msg/s out', fmtRate(d.msgRateOut)),
      card('Backlog', fmtCount(d.backlog), '', d.backlog > 0),
      card('Messages', fmtCount(d.messages), d.retained < d.messages && `${fmtCount(d.retained)} retained`),
      card('Stored', fmtBytes(d.storageSize)));
    const logs = d.logs || [];
    const subs = d.subscriptionList || [];
    const groups = d.groups || [];
    replace(left,
      panel('Partitions', logs.length, table(
        [['Partition'], ['Start', 'num'], ['End', 'num'], ['Entries', 'num'], ['Stored', 'num'], ['Msg/s in', 'num'],
          ['Bytes/s in', 'num'], ['Producers'], ['Last publish', 'num']],
        logs.map((l) => h('tr', { dataset: { partition: l.partition } },
          h('td', { class: 'mono', title: l.name }, d.partitions ? `partition ${l.partition}` : 'topic'),
          num(fmtCount(l.start), l.start), num(fmtCount(l.end), l.end), num(fmtCount(l.entries), l.entries),
          num(fmtBytes(l.bytes), l.bytes), num(fmtRate(l.msgRateIn), l.msgRateIn), num(fmtByteRate(l.bytesRateIn), l.bytesRateIn),
          h('td', {}, l.producers.length ? h('div', { class: 'chips' }, l.producers.map((p) => h('span', { class: 'badge' }, p))) : h('span', { class: 'zero' }, 'none')),
          num(fmtAge(l.lastPublish), l.lastPublish))))),
      panel('Subscriptions', subs.length, subs.length === 0 ? empty('No subscriptions.') : table(
        [['Name'], ['Type'], ['Backlog', 'num'], ['Unacked', 'num'], ['Delayed', 'num'], ['Msg/s out', 'num'], ['Consumers']],
        subs.map((sb) => h('tr', { dataset: { subscription: sb.name } },
          h('td', {}, h('span', { class: 'name-cell' }, h('b', {}, sb.name),
            !sb.durable && h('span', { class: 'badge', title: 'non-durable: gone with its last consumer' }, 'non-durable'))),
          h('td', {}, sb.type),
          h('td', { class: sb.backlog ? 'num' : 'num zero' },
            h('span', { class: 'name-cell end' }, sb.backlog > 0 && sb.perPartition && sb.perPartition.length > 1 && miniBars(sb.perPartition), fmtCount(sb.backlog))),
          num(fmtCount(sb.unacked), sb.unacked), num(fmtCount(sb.delayed), sb.delayed), num(fmtRate(sb.msgRateOut), sb.msgRateOut),
          h('td', {}, sb.consumers.length === 0 ? h('span', { class: 'zero' }, 'none') : consumerChips(sb.consumers, d.partitions)))))),
      groups.length > 0 && panel('Kafka consumer groups', groups.length, table(
        [['Group'], ['Lag', 'num'], ['Committed offsets']],
        groups.map((g) => h('tr', {},
          h('td', {}, h('b', {}, g.name)), num(fmtCount(g.lag), g.lag),
          h('td', { class: 'mono' }, g.committed.map((o, i) => `p${i}: ${o < 0 ? '—' : fmtCount(o)}`).join('  ')))))),
      d.config && Object.keys(d.config).length > 0 && panel('Configuration', undefined, h('div', { class: 'panel-body' },
        h('dl', { class: 'kv' }, Object.entries(d.config).sort().map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])))));
  }

  const stop = poll('topic', REFRESH_MS, async (signal) => {
    try {
      draw(await api(topicAPI(tenant, ns, topic), signal));
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 404) throw e;
      if (tail) {
        tail.stop();
        tail = null;
      }
      replace(side);
      replace(badges);
      replace(cards);
      replace(left, panel('Partitions', undefined, empty(`There is no topic ${tenant}/${ns}/${topic} on this node.`)));
    }
  });
  return () => {
    gone = true;
    stop();
    if (tail) tail.stop();
  };
}

// consumerChips shows a subscription's consumers, one chip per consumer
// name: a client consuming a partitioned topic has a consumer on each
// partition under one name.
function consumerChips(consumers, partitioned) {
  const byName = new Map();
  for (const c of consumers) {
    const g = byName.get(c.name) || { ...c, partitions: [], unacked: 0, permits: 0, active: false };
    g.partitions.push(c.partition);
    g.unacked += c.unacked;
    g.permits += c.permits;
    g.active = g.active || c.active;
    byName.set(c.name, g);
  }
  return h('div', { class: 'chips' }, [...byName.values()].map((g) => h('span', {
    class: `badge ${g.transport}`,
    title: [
      `${g.transport} consumer` + (partitioned ? ` on partition${g.partitions.length > 1 ? 's' : ''} ${g.partitions.join(', ')}` : ''),
      g.address, `permits ${g.permits}`, `unacked ${g.unacked}`, g.active ? 'active' : 'standby',
    ].filter(Boolean).join('\n'),
  }, g.name, partitioned && g.partitions.length > 1 && h('span', { class: 'count' }, ` ×${g.partitions.length}`))));
}

// ---------------------------------------------------------------- live tail

const utf8 = new TextDecoder('utf-8', { fatal: true });

// decodePayload turns a base64 payload into text when it is UTF-8, and
// into a hex preview when it is not.
function decodePayload(b64) {
  let bin;
  try {
    bin = atob(b64 || '');
  } catch {
    return { text: null, size: 0, preview: 'the payload is not base64' };
  }
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  try {
    return { text: utf8.decode(bytes), size: bytes.length };
  } catch {
    const hex = Array.from(bytes.slice(0, 32), (b) => b.toString(16).padStart(2, '0')).join(' ');
    return { text: null, size: bytes.length, preview: `${bytes.length} bytes: ${hex}${bytes.length > 32 ? ' …' : ''}` };
  }
}

// parseMessageId reads Pulsar's MessageIdData (protobuf) from a base64 id:
// ledger (1), entry (2), partition (3), batch index (4). Null when it
// cannot.
function parseMessageId(b64) {
  let bytes;
  try {
    bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
  const out = { ledger: 0, entry: 0, partition: -1, batch: -1 };
  let i = 0;
  const varint = () => {
    let v = 0, mul = 1;
    for (let n = 0; n < 10; n++) {
      if (i >= bytes.length) throw new Error('truncated');
      const b = bytes[i++];
      v += (b & 0x7f) * mul;
      mul *= 128;
      if (b < 0x80) return v;
    }
    throw new Error('varint too long');
  };
  const int32 = (v) => (v >= 2 ** 31 ? -1 : v); // negatives are ten-byte varints
  try {
    while (i < bytes.length) {
      const tag = varint();
      const field = Math.floor(tag / 8), wire = tag % 8;
      if (wire === 0) {
        const v = varint();
        if (field === 1) out.ledger = v;
        else if (field === 2) out.entry = v;
        else if (field === 3) out.partition = int32(v);
        else if (field === 4) out.batch = int32(v);
      } else if (wire === 2) i += varint();
      else if (wire === 1) i += 8;
      else if (wire === 5) i += 4;
      else return null;
    }
  } catch {
    return null;
  }
  return out;
}

// startTail opens a WebSocket reader at the topic's latest message and
// shows what arrives, newest first. Each message is acknowledged, which
// for a reader frees its slot in the receiver queue. A closed socket is
// reopened with a growing delay until the view goes away.
function startTail(tenant, ns, topic) {
  const status = h('span', { class: 'tail-status', id: 'tail-status', dataset: { state: 'connecting' } });
  const list = h('div', { class: 'tail-list', id: 'tail-list', 'aria-live': 'polite' });
  const counter = h('span', { class: 'sub', id: 'tail-count' });
  const pauseBtn = h('button', { class: 'btn', id: 'tail-pause', type: 'button', on: { click: togglePause } }, 'Pause');
  const clearBtn = h('button', { class: 'btn', id: 'tail-clear', type: 'button', on: { click: clearRows } }, 'Clear');
  const el = h('section', { class: 'panel', id: 'tail' },
    h('div', { class: 'panel-head' }, h('h2', {}, 'Live tail'), h('span', { class: 'spacer' }), status),
    h('div', { class: 'tail-controls' }, pauseBtn, clearBtn, h('span', { class: 'grow' }), counter),
    list);

  let ws = null, timer = 0, stopped = false, paused = false, retry = 0;
  let received = 0;
  const held = [];
  const waiting = empty('Waiting for messages. New messages on this topic appear here as they are published.');
  list.append(waiting);

  function setStatus(state, text) {
    status.dataset.state = state;
    replace(status, h('span', { class: { live: 'dot ok', connecting: 'dot warn', closed: 'dot bad' }[state] || 'dot' }), text);
  }

  function count() {
    counter.textContent = `${fmtCount(received)} received` + (held.length ? ` · ${fmtCount(held.length)} held` : '');
  }

  function connect() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const url = `${scheme}://${location.host}/ws/v2/reader/persistent/${enc(tenant)}/${enc(ns)}/${enc(topic)}?messageId=latest&readerName=console`;
    setStatus('connecting', 'connecting…');
    let sock;
    try {
      sock = new WebSocket(url);
    } catch (e) {
      report('tail', `Live tail: ${e.message}`);
      scheduleReconnect();
      return;
    }
    ws = sock;
    sock.addEventListener('open', () => {
      retry = 0;
      resolve('tail');
      setStatus('live', 'live');
    });
    sock.addEventListener('message', (ev) => onMessage(sock, ev.data));
    sock.addEventListener('close', (ev) => {
      if (stopped || ws !== sock) return;
      ws = null;
      const why = ev.reason || (ev.code === 1006 ? 'connection lost' : `code ${ev.code}`);
      setStatus('closed', `closed: ${why}`);
      report('tail', `Live tail of ${tenant}/${ns}/${topic} closed: ${why}`);
      scheduleReconnect();
    });
  }

  function scheduleReconnect() {
    if (stopped) return;
    const delay = Math.min(1000 * 2 ** retry, 10000);
    retry++;
    timer = setTimeout(connect, delay);
  }

  function onMessage(sock, data) {
    let m;
    try {
      m = JSON.parse(data);
    } catch {
      report('tail', 'Live tail: the node sent a message that is not JSON');
      return;
    }
    if (!m || typeof m.messageId !== 'string') return; // e.g. an isEndOfTopic answer
    if (sock.readyState === WebSocket.OPEN) sock.send(JSON.stringify({ messageId: m.messageId }));
    received++;
    if (paused) {
      held.push(m);
      if (held.length > TAIL_MAX_ROWS) held.shift();
    } else {
      show(m);
    }
    count();
  }

  function show(m) {
    waiting.remove();
    list.prepend(tailRow(m));
    while (list.childElementCount > TAIL_MAX_ROWS) list.lastElementChild.remove();
  }

  function togglePause() {
    paused = !paused;
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    if (!paused) held.splice(0).forEach(show);
    count();
  }

  function clearRows() {
    list.replaceChildren(waiting);
    held.length = 0;
    received = 0;
    count();
  }

  count();
  connect();
  return {
    el,
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (ws) ws.close(1000, 'console view closed');
      ws = null;
      resolve('tail');
    },
  };
}

function tailRow(m) {
  const p = decodePayload(m.payload);
  const id = parseMessageId(m.messageId);
  const published = new Date(m.publishTime);
  const props = Object.entries(m.properties || {});
  const pos = id ? `${id.partition >= 0 ? 'p' + id.partition + ' · ' : ''}${id.ledger}:${id.entry}${id.batch >= 0 ? ':' + id.batch : ''}` : '';
  const row = h('div', { class: 'tail-row fresh', dataset: { messageId: m.messageId } },
    h('div', { class: 'tail-meta' },
      h('span', { title: m.publishTime }, fmtTime(published)),
      m.key !== undefined && m.key !== null && h('span', { class: 'key-chip', title: `key ${m.key}` }, m.key),
      props.length > 0 && h('span', { class: 'badge', title: props.map(([k, v]) => `${k}=${v}`).join('\n') },
        `${props.length} propert${props.length === 1 ? 'y' : 'ies'}`),
      m.redeliveryCount > 0 && h('span', { class: 'badge warn' }, `redelivered ${m.redeliveryCount}`),
      h('span', { class: 'spacer' }),
      h('span', { class: 'pos', title: 'partition · ledger:entry[:batch index]' }, pos)),
    h('div', { class: p.text === null ? 'tail-payload binary' : 'tail-payload' }, p.text === null ? p.preview : p.text || '(empty)'));
  let detail = null;
  row.addEventListener('click', (e) => {
    if (detail && detail.contains(e.target)) return;
    if (detail) {
      detail.remove();
      detail = null;
      return;
    }
    const kv = [
      ['Message id', m.messageId],
      ['Published', m.publishTime],
      m.eventTime && ['Event time', m.eventTime],
      m.key !== undefined && m.key !== null && ['Key', m.key],
      ['Size', `${fmtCount(p.size)} bytes`],
      ...props.map(([k, v]) => [`· ${k}`, v]),
    ].filter(Boolean);
    detail = h('div', { class: 'tail-detail' },
      h('dl', { class: 'kv' }, kv.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      h('pre', {}, p.text === null ? p.preview : p.text));
    row.append(detail);
  });
  return row;
}

// ---------------------------------------------------------------- mesh

function meshView(main) {
  const sub = h('div', { class: 'sub' }, 'loading…');
  const cards = h('div', { class: 'cards' });
  const body = h('div', { class: 'regions', id: 'regions' });
  replace(main, h('div', { class: 'page-head' }, h('div', {}, h('h1', {}, 'Mesh'), sub)), cards, body);

  const stateClass = { alive: 'ok', suspect: 'warn', failed: 'bad', left: '' };

  function region(r) {
    const rtt = r.rtt_ms !== undefined ? `${nf1.format(r.rtt_ms)} ms` : null;
    return h('section', { class: 'panel region', dataset: { region: r.name } },
      h('div', { class: 'panel-head' },
        h('h2', {}, r.name), r.local && h('span', { class: 'badge accent' }, 'this region'),
        h('span', { class: 'sub' }, `${r.nodes_up} of ${r.nodes.length} up`, rtt && ` · ${rtt}`)),
      table([['Node'], ['State'], ['Since', 'num'], ['RTT', 'num'], ['Kafka'], ['Pulsar'], ['HTTP'], ['Version']],
        r.nodes.map((n) => h('tr', { dataset: { node: n.name } },
          h('td', {}, h('span', { class: 'name-cell' },
            h('span', { class: 'state' }, h('span', { class: `dot ${stateClass[n.state] || ''}` }), h('b', {}, n.name)),
            n.local && h('span', { class: 'badge accent' }, 'this node'), n.rack && h('span', { class: 'badge' }, n.rack))),
          h('td', {}, n.state),
          num(fmtAge(Date.parse(n.state_since)), 1),
          num(n.rtt_ms !== undefined ? `${nf1.format(n.rtt_ms)} ms` : '—', n.rtt_ms),
          h('td', { class: 'mono' }, n.kafka_addr || '—'),
          h('td', { class: 'mono' }, n.pulsar_addr || '—'),
          h('td', { class: 'mono' }, n.http_addr ? h('a', { href: `http://${n.http_addr}/` }, n.http_addr) : '—'),
          h('td', {}, n.version || '—')))));
  }

  return poll('mesh', REFRESH_MS, async (signal) => {
    let m;
    try {
      m = await api('/api/v1/mesh', signal);
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 503) throw e;
      sub.textContent = 'not joined';
      replace(cards);
      replace(body, panel('Mesh', undefined, empty('This node has not joined a mesh yet.')));
      return;
    }
    const regions = m.regions || [];
    const nodes = regions.flatMap((r) => r.nodes);
    sub.textContent = `node ${m.local_node} in region ${m.local_region} · directory v${m.seq}`;
    replace(cards,
      card('Regions', fmtCount(regions.length)),
      card('Nodes up', fmtCount(regions.reduce((a, r) => a + r.nodes_up, 0)), `of ${nodes.length}`),
      card('Gossip', m.encrypted ? 'encrypted' : 'plain'),
      card('Health score', fmtCount(m.health_score), m.health_score ? 'degraded' : 'healthy', m.health_score > 0));
    replace(body, regions.map(region));
  });
}

// ---------------------------------------------------------------- router

function notFoundView(main) {
  replace(main, h('section', { class: 'panel' }, empty(`Nothing at ${location.hash}. `), h('p', { class: 'empty' }, h('a', { href: '#/topics' }, 'Back to the topics'))));
  return () => {};
}

// routes maps a hash to a view; the tab is highlighted in the top bar.
const routes = [
  { re: /^#\/topics\/?$/, tab: 'topics', view: () => topicsView },
  { re: /^#\/topics\/([^/]+)\/([^/]+)\/([^/]+)$/, tab: 'topics', view: (m) => {
    const [tenant, ns, topic] = m.slice(1).map(decodeURIComponent);
    return (main) => topicView(main, tenant, ns, topic);
  } },
  { re: /^#\/mesh\/?$/, tab: 'mesh', view: () => meshView },
];

let stopView = () => {};

function route() {
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    location.replace('#/topics');
    return;
  }
  stopView();
  stopView = () => {};
  resolve('view');
  let tab = '', view = notFoundView;
  for (const r of routes) {
    const m = location.hash.match(r.re);
    if (!m) continue;
    try {
      view = r.view(m);
      tab = r.tab;
    } catch {
      view = notFoundView; // a malformed escape in the hash
    }
    break;
  }
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === tab);
  const main = $('main');
  try {
    stopView = view(main) || (() => {});
  } catch (e) {
    report('view', e);
  }
  window.scrollTo(0, 0);
}

startTheme();
startNodeInfo();
window.addEventListener('hashchange', route);
route();
