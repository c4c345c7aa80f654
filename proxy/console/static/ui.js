// Shared parts of the console: building elements, number formats, the
// error banner, and reading the node's API.

// REFRESH_MS is how often views read the node's API again.
export const REFRESH_MS = 2000;
const FETCH_TIMEOUT_MS = 8000;

// ---------------------------------------------------------------- DOM

// h builds an element. props: class, text, dataset, on (event handlers),
// and attributes; children are nodes or strings (as text), falsy skipped.
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

// svg builds an SVG element with attributes.
function svg(tag, attrs = {}, ...children) {
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

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- formats

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
export const nf1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

export function fmtCount(n) {
  if (n === undefined || n === null) return '—';
  return Math.abs(n) >= 1e7 ? compact.format(n) : nf.format(n);
}

export function fmtRate(v) {
  if (v === undefined || v === null) return '—';
  if (v === 0) return '0';
  if (v < 10) return nf1.format(v);
  return v >= 1e6 ? compact.format(v) : nf.format(v);
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? nf.format(n) : nf1.format(n)) + ' ' + units[i];
}

export function fmtByteRate(v) {
  return v === undefined || v === null ? '—' : fmtBytes(v) + '/s';
}

// The node's clock minus ours, so ages are measured on the node's clock.
let clockSkew = 0;

// setClock records the node's time (Unix ms) as just read from it.
export function setClock(nodeMs) {
  if (nodeMs) clockSkew = nodeMs - Date.now();
}

export function fmtAge(ms) {
  if (!ms) return '—';
  const sec = Math.max(0, (Date.now() + clockSkew - ms) / 1000);
  if (sec < 2) return 'just now';
  if (sec < 60) return `${Math.floor(sec)} s ago`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min ago`;
  if (sec < 86400) return `${Math.floor(sec / 3600)} h ago`;
  return `${Math.floor(sec / 86400)} d ago`;
}

export function fmtTime(d) {
  if (!(d instanceof Date) || isNaN(d)) return '—';
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// num is a right-aligned table cell; zero and absent values are faint.
export function num(text, value) {
  return h('td', { class: value ? 'num' : 'num zero' }, text);
}

// ---------------------------------------------------------------- errors

// problems holds one message per source (a view's poller, the node info,
// the tail); the banner shows them all until each source succeeds again.
const problems = new Map();

export function report(source, err) {
  const msg = err instanceof Error ? err.message : String(err);
  problems.set(source, msg);
  drawBanner();
}

export function resolve(source) {
  if (problems.delete(source)) drawBanner();
}

function drawBanner() {
  const banner = $('banner');
  banner.hidden = problems.size === 0;
  replace(banner, [...problems.values()].join(' · '));
}

// ---------------------------------------------------------------- API

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// api fetches a JSON document from the node; failures become APIErrors
// that say what went wrong in words.
export async function api(path, signal) {
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
export function poll(source, ms, fn) {
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

export const enc = encodeURIComponent;
export const topicHash = (t) => `#/topics/${enc(t.tenant)}/${enc(t.namespace)}/${enc(t.local)}`;
export const topicAPI = (tenant, ns, topic) => `/api/v1/console/topics/${enc(tenant)}/${enc(ns)}/${enc(topic)}`;

// ---------------------------------------------------------------- widgets

export function card(label, value, unit, hot) {
  return h('div', { class: hot ? 'card hot' : 'card' },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' }, value, unit && h('small', {}, unit)));
}

export function panel(title, count, ...body) {
  return h('section', { class: 'panel' },
    h('div', { class: 'panel-head' }, h('h2', {}, title, count !== undefined && h('span', { class: 'count' }, ` ${count}`))),
    ...body);
}

export function empty(text) {
  return h('div', { class: 'empty' }, text);
}

export function table(head, rows) {
  return h('div', { class: 'table-wrap' },
    h('table', {},
      h('thead', {}, h('tr', {}, head.map(([label, cls]) => h('th', { class: cls || '' }, label)))),
      h('tbody', {}, rows)));
}

// spark draws recent values as a small area chart.
export function spark(values, width = 64, height = 18) {
  const max = Math.max(...values, 1e-9);
  const step = width / Math.max(values.length - 1, 1);
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 1 - (v / max) * (height - 2)).toFixed(1)}`);
  return svg('svg', { class: 'spark', width, height, viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true' },
    svg('path', { d: `M0,${height} L${pts.join(' L')} L${((values.length - 1) * step).toFixed(1)},${height} Z` }),
    svg('polyline', { points: pts.join(' ') }));
}

// miniBars draws one bar per partition, scaled to the largest.
export function miniBars(values) {
  const max = Math.max(...values, 1);
  return h('span', { class: 'mini-bars', title: values.map((v, i) => `p${i}: ${fmtCount(v)}`).join('\n') },
    values.map((v) => {
      // Through the CSSOM: the page's policy refuses style attributes.
      const bar = h('span', { class: v ? '' : 'none' });
      bar.style.height = `${Math.max(2, Math.round((v / max) * 18))}px`;
      return bar;
    }));
}
