// Preloaded (node --import) by bench/gemini_a2a_compare.py into Gemini CLI's A2A server. That
// server turns usage statistics on and reads no setting to turn them off, so during a benchmark
// it would post to Google; here every fetch() to a host other than this machine fails at once
// (the statistics logger drops what it cannot send). The fake model API is on 127.0.0.1.
const loopback = new Set(['127.0.0.1', 'localhost', '[::1]']);
const realFetch = globalThis.fetch;
const refused = new Set();

globalThis.fetch = (input, init) => {
  const href = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
  const host = new URL(href).hostname;
  if (!loopback.has(host)) {
    if (!refused.has(host)) {
      refused.add(host);
      process.stderr.write(`[bench offline] refused a request to ${host}\n`);
    }
    return Promise.reject(new TypeError(`bench: no network (${host})`));
  }
  return realFetch(input, init);
};
