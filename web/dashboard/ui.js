// Small DOM, formatting and colour helpers shared by the dashboard's pages. Everything the
// server sends is put into the page as text (textContent / attributes), never as HTML.

// h('div', {class: 'x', title: 't', on: {click: fn}, dataset: {id: 1}, style: {width: '2px'}},
//   'text', child, [children]) builds an element; strings become text nodes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === 'dataset') for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
      else if (k === 'style') Object.assign(el.style, v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// Replaces el's children with `children` (same forms as h()).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// --- formatting -------------------------------------------------------------------------------

export function num(x, digits = 1) {
  if (x === null || x === undefined || Number.isNaN(x)) return '–';
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  return x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function gpus(x) {
  if (x === null || x === undefined) return '–';
  return num(Math.round(x * 100) / 100, 2);
}

// 75 -> "1m 15s", 7300 -> "2h 1m", 200000 -> "2d 7h".
export function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '–';
  s = Math.max(0, Math.floor(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

const pad = (n) => String(n).padStart(2, '0');

export function clock(unix, seconds = true) {
  const d = new Date(unix * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds ? ':' + pad(d.getSeconds()) : ''}`;
}

export function dateTime(unix) {
  if (unix === null || unix === undefined) return '–';
  const d = new Date(unix * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(unix)}`;
}

export const now = () => Date.now() / 1000;

// --- colours ----------------------------------------------------------------------------------

// Distinct hues for tenants; a tenant's colour is chosen by a hash of its name, so it is the
// same on every page, in every session and for every viewer.
const PALETTE = [
  '#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7',
  '#9c755f', '#17becf', '#8cd17d', '#d37295', '#a0cbe8', '#ffbe7d', '#86bcb6', '#f1ce63',
  '#499894', '#d4a6c8', '#b6992d', '#5b5ea6',
];
export const OTHER_COLOR = '#9aa3ae'; // GPUs of tenants this token may not see
export const FREE_COLOR = '#eef1f5';

export function tenantColor(name) {
  let hsh = 2166136261;
  for (let i = 0; i < name.length; i++) {
    hsh ^= name.charCodeAt(i);
    hsh = Math.imul(hsh, 16777619);
  }
  return PALETTE[(hsh >>> 0) % PALETTE.length];
}

// '#rrggbb' + alpha -> 'rgba(...)'.
export function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
}

// A colour per series index (queues, ...), from the same palette.
export const seriesColor = (i) => PALETTE[i % PALETTE.length];

// --- widgets ----------------------------------------------------------------------------------

export function stateBadge(state) {
  return h('span', { class: `badge state-${state}`, text: state });
}

export function card(title, body, extra) {
  return h('section', { class: 'card' },
    h('header', { class: 'card-head' }, h('h2', { text: title }), extra || null),
    body);
}

export function stat(label, value, sub) {
  return h('div', { class: 'stat' },
    h('div', { class: 'stat-label', text: label }),
    h('div', { class: 'stat-value', text: value }),
    sub ? h('div', { class: 'stat-sub', text: sub }) : null);
}

// A table: columns [{label, class?, title?}], rows already built as <tr>s.
export function table(columns, cls = '') {
  const tbody = h('tbody');
  const t = h('table', { class: `grid ${cls}` },
    h('thead', null, h('tr', null, columns.map((c) =>
      h('th', { class: c.class || null, title: c.title || null, text: c.label })))),
    tbody);
  return { table: t, tbody };
}

export function empty(text) {
  return h('div', { class: 'empty', text });
}
