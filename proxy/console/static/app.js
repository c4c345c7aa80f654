// tern console: plain ES modules, no build step and no third-party code.
// The page reads the node's JSON API (/api/v1/...) and tails topics through
// Pulsar's WebSocket API (/ws/v2/reader/...). Data from the node only ever
// reaches the page as text (textContent), never as markup.
//
// Layout: this module runs the top bar and a hash router; each view is a
// module whose function draws into <main> and returns a function that
// stops its timers and sockets. A later view (replication, a region's
// detail) is one more module, one more entry in `routes` and one more tab
// in index.html.

import {
  h, replace, $, report, resolve, api, poll, empty,
  setClock,
} from './ui.js';
import { topicsView } from './topics.js';
import { topicView } from './topic.js';
import { meshView } from './mesh.js';

const NODE_REFRESH_MS = 5000;

window.addEventListener('error', (e) => report('page', e.message || 'script error'));
window.addEventListener('unhandledrejection', (e) => {
  e.preventDefault();
  report('page', e.reason instanceof Error ? e.reason.message : String(e.reason));
});

// ---------------------------------------------------------------- top bar

function startNodeInfo() {
  const info = $('node-info');
  return poll('node', NODE_REFRESH_MS, async (signal) => {
    try {
      const n = await api('/api/v1/node', signal);
      setClock(n.time);
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
