// The server's API, as the signed-in token. The token lives in sessionStorage (this tab only,
// gone when it closes) and goes with every request as a bearer token. A 401 on any call signs
// out: the app shows the sign-in form with the server's message.

const KEY = 'tessera.token';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let unauthorized = () => {};
export function onUnauthorized(fn) { unauthorized = fn; }

export const getToken = () => sessionStorage.getItem(KEY);
export const setToken = (t) => sessionStorage.setItem(KEY, t);
export const clearToken = () => sessionStorage.removeItem(KEY);

async function errorOf(res) {
  let msg = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    if (body && body.error) msg = body.error;
  } catch { /* not JSON */ }
  return new ApiError(res.status, msg);
}

// fetch as `token` (the signed-in one by default); throws ApiError unless 2xx.
export async function request(method, path, { body, token = getToken(), raw = false } = {}) {
  const headers = { Authorization: `Bearer ${token || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, `cannot reach the server (${e.message})`);
  }
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && token === getToken()) unauthorized(err.message);
    throw err;
  }
  return raw ? res : res.json();
}

export const get = (path, opts) => request('GET', path, opts);
export const post = (path, body) => request('POST', path, { body });

// ?a=1&b=2 from an object, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// /v1/history: null when the server has none (404 from a server without it, or no sample yet).
export async function history(rangeSeconds, step) {
  const until = Math.floor(Date.now() / 1000);
  try {
    return await get(`/v1/history${query({ since: until - rangeSeconds, until, step })}`);
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

// A reader of /v1/history whose bucket (step) is as fine as the history is short: at most
// `maxStep`, and about 60 buckets or more over the history there is (a server started a minute
// ago draws a line, not two points).
export function historyReader() {
  let known = null; // {interval, first}: the sample interval and the oldest sample's time
  return async (rangeSeconds, maxStep) => {
    let step = maxStep;
    if (known) {
      const span = Math.floor(Date.now() / 1000) - known.first;
      step = Math.max(Math.ceil(known.interval), Math.min(maxStep, Math.floor(span / 60)));
    }
    const h = await history(rangeSeconds, step);
    if (h && h.samples && h.samples.length) {
      const s = h.samples[0];
      known = { interval: h.interval_s || 1, first: s.t - (s.interval_s || 0) };
    }
    return h;
  };
}
