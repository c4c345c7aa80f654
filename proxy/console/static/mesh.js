// The mesh: regions and their nodes as this node sees them, from
// /api/v1/mesh.

import {
  h, replace, nf1, fmtCount, fmtAge, num, APIError, api,
  poll, card, panel, empty, table, REFRESH_MS,
} from './ui.js';

export function meshView(main) {
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
