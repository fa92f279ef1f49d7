// Nothing a client sends crashes the server: random and hostile bodies on every endpoint get
// an answer below 500, and the server keeps serving. Also the CLI's bounds on its flags.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { bin, modelPath, post, startServer } from './harness.mjs';

const model = modelPath('stories260K.gguf');
const skip = model ? false : 'SKIPPED: fixture stories260K.gguf missing';

function rng(seed) {
  let a = seed >>> 0;
  return () => { a = (a + 0x6d2b79f5) >>> 0; let t = Math.imul(a ^ (a >>> 15), a | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}

function randomValue(r, depth = 0) {
  const k = Math.floor(r() * (depth > 2 ? 6 : 8));
  switch (k) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return Math.floor((r() - 0.5) * 2 ** (r() * 70));
    case 3: return (r() - 0.5) * 1e6;
    case 4: return String.fromCharCode(...Array.from({ length: Math.floor(r() * 20) }, () => Math.floor(r() * 0x3000)));
    case 5: return '\u0000\ud800<|im_start|>';
    case 6: return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
    default: {
      const keys = ['messages', 'prompt', 'role', 'content', 'max_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'seed',
                    'logprobs', 'top_logprobs', 'stream', 'stream_options', 'tools', 'n', 'tokens', 'id', 'min_p'];
      const o = {};
      for (let i = 0; i < 1 + r() * 5; i++) o[keys[Math.floor(r() * keys.length)]] = randomValue(r, depth + 1);
      return o;
    }
  }
}

describe('robustness', { skip }, () => {
  let srv;
  before(async () => { srv = await startServer(model, ['--ctx', '512']); });
  after(async () => { await srv?.stop(); });

  test('random bodies on every endpoint answer below 500', async () => {
    const r = rng(42);
    const paths = ['/v1/chat/completions', '/v1/completions', '/tokenize', '/detokenize', '/apply-template', '/v1/sessions'];
    for (let i = 0; i < 300; i++) {
      const p = paths[i % paths.length];
      let body = JSON.stringify(randomValue(r));
      if (i % 7 === 0) body = body.slice(0, Math.floor(r() * body.length));  // cut JSON
      if (body.includes('"max_tokens"')) body = body.replace(/"max_tokens":[^,}]*/, '"max_tokens":4');
      const res = await post(srv.base, p, body);
      assert.ok(res.status < 500, `${p} ${body} -> ${res.status} ${res.text}`);
      if (res.status >= 400) assert.equal(typeof res.json?.error?.message, 'string', res.text);
    }
    const ok = await post(srv.base, '/v1/completions', { prompt: 'Hi', max_tokens: 2 });
    assert.equal(ok.status, 200);
  });

  test('well-formed requests with hostile content are served', async () => {
    const r = await post(srv.base, '/v1/chat/completions', { messages: [{ role: 'user', content: '\u0000<|im_end|>\uffff\u{1F600}' }], max_tokens: 3, stop: ['\u{1F600}'] });
    assert.equal(r.status, 200, r.text);
    const s = await post(srv.base, '/v1/sessions/%2e%2e/state', {});
    assert.ok(s.status < 500);
  });
});

test('serve refuses out-of-range flags with a message', { skip }, () => {
  for (const [flag, value] of [['--threads', '100000'], ['--parallel', '0'], ['--port', '70000'], ['--queue', '-1'], ['--kv-mode', 'q3'], ['--ping-ms', '5']]) {
    const r = spawnSync(bin, ['serve', '-m', model, flag, value], { encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 2, `${flag} ${value}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(flag.replace(/-/g, '\\-')));
  }
  const r = spawnSync(bin, ['serve'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
});
