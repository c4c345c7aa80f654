// The topic list: every topic of the node with rates, backlog and sizes,
// refreshed every REFRESH_MS, sortable and filterable.

import {
  h, replace, fmtCount, fmtRate, fmtBytes, fmtByteRate, fmtAge, num,
  api, poll, topicHash, card, empty, spark, REFRESH_MS, setClock,
} from './ui.js';

const SPARK_POINTS = 30;

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

export function topicsView(main) {
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
    const data = await api('/api/v1/console/topics', signal);
    setClock(data.time);
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
