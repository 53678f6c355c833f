// Preloaded (node --import) into Gemini CLI's A2A server by tests/remote/gemini_a2a.py. The server
// posts usage statistics to Google whatever its settings say; under the tests every fetch() to a
// host other than this machine fails at once, so nothing leaves it (the model is a fake on
// 127.0.0.1, and the statistics logger drops what it cannot send).
const loopback = new Set(['127.0.0.1', 'localhost', '[::1]']);
const realFetch = globalThis.fetch;

globalThis.fetch = (input, init) => {
  const href = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
  const host = new URL(href).hostname;
  if (!loopback.has(host)) {
    return Promise.reject(new TypeError(`tests: no network (${host})`));
  }
  return realFetch(input, init);
};
