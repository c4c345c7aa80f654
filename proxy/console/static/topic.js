// One topic: its figures, partitions, subscriptions and Kafka groups,
// beside a live tail of its messages.

import {
  h, replace, fmtCount, fmtRate, fmtBytes, fmtByteRate, fmtAge, num,
  APIError, api, poll, topicAPI, card, panel, empty, table,
  miniBars, REFRESH_MS,
} from './ui.js';
import { startTail } from './tail.js';

export function topicView(main, tenant, ns, topic) {
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
