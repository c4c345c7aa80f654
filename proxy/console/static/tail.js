// The live tail: a WebSocket reader of Pulsar's WebSocket API at a topic's
// latest message, showing what arrives as text.

import {
  h, replace, fmtCount, fmtTime, report, resolve, enc, empty,
} from './ui.js';

const TAIL_MAX_ROWS = 200;

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
export function startTail(tenant, ns, topic) {
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
