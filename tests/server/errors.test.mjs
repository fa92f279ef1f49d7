// Error shapes (OpenAI's schema) and that the server keeps answering after each; cancellation
// of a request whose client went away.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { modelPath, post, startServer } from './harness.mjs';

const model = modelPath('stories260K.gguf');
const skip = model ? false : 'SKIPPED: fixture stories260K.gguf missing';

function assertError(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.type, 'string');
  assert.ok('param' in r.json.error && 'code' in r.json.error);
  if (param !== undefined) assert.equal(r.json.error.param, param);
}

async function stillServes(base, headers = {}) {
  const r = await post(base, '/v1/completions', { prompt: 'Hi', max_tokens: 2, temperature: 0 }, headers);
  assert.equal(r.status, 200, r.text);
}

describe('errors', { skip }, () => {
  let srv;
  before(async () => { srv = await startServer(model, ['--ctx', '256', '--max-body', '4096']); });
  after(async () => { await srv?.stop(); });

  test('malformed JSON is a 400', async () => {
    assertError(await post(srv.base, '/v1/chat/completions', '{"messages": ['), 400);
    await stillServes(srv.base);
  });

  test('wrong types and bad sampler values are 400s naming the field', async () => {
    const cases = [
      [{ prompt: 'x', temperature: 'hot' }, 'temperature'],
      [{ prompt: 'x', temperature: 7 }, 'temperature'],
      [{ prompt: 'x', top_p: 1.5 }, 'top_p'],
      [{ prompt: 'x', top_k: -3 }, 'top_k'],
      [{ prompt: 'x', max_tokens: 'many' }, 'max_tokens'],
      [{ prompt: 'x', n: 2 }, 'n'],
      [{ prompt: 'x', stop: [1, 2] }, 'stop'],
      [{ prompt: 'x', seed: 1.5 }, 'seed'],
      [{ prompt: 'x', stream: 'yes' }, 'stream'],
      [{ prompt: 'x', response_format: { type: 'json_object' } }, 'response_format'],
      [{ prompt: [1, 2, 99999] }, 'prompt'],
      [{ prompt: { a: 1 } }, 'prompt'],
      [{}, 'prompt'],
    ];
    for (const [body, param] of cases) {
      assertError(await post(srv.base, '/v1/completions', body), 400, param);
    }
    assertError(await post(srv.base, '/v1/chat/completions', { messages: 'hi' }), 400, 'messages');
    assertError(await post(srv.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], top_logprobs: 50, logprobs: true }), 400, 'top_logprobs');
    await stillServes(srv.base);
  });

  test('a prompt longer than the context is exceed_context_size_error', async () => {
    const r = await post(srv.base, '/v1/completions', { prompt: 'a b c d '.repeat(100) });
    assertError(r, 400, 'prompt');
    assert.equal(r.json.error.type, 'exceed_context_size_error');
    assert.equal(r.json.error.n_ctx, 256);
    assert.ok(r.json.error.n_prompt_tokens > 256);
    await stillServes(srv.base);
  });

  test('a body over the limit is a 413', async () => {
    const r = await post(srv.base, '/v1/completions', { prompt: 'x'.repeat(10000) });
    assertError(r, 413);
    await stillServes(srv.base);
  });

  test('unknown endpoints are 404 in the same schema', async () => {
    const r = await post(srv.base, '/v1/nothing', {});
    assertError(r, 404);
  });

  test('the openai client sees a BadRequestError', async () => {
    const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0 });
    await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }], temperature: 9 }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  });
});

describe('auth', { skip }, () => {
  let srv;
  before(async () => { srv = await startServer(model, ['--api-key', 'sekret']); });
  after(async () => { await srv?.stop(); });

  test('a missing or wrong key is a 401, /health needs none', async () => {
    assertError(await post(srv.base, '/v1/completions', { prompt: 'x' }), 401);
    assertError(await post(srv.base, '/v1/completions', { prompt: 'x' }, { Authorization: 'Bearer nope' }), 401);
    assert.equal((await fetch(`${srv.base}/health`)).status, 200);
    await stillServes(srv.base, { Authorization: 'Bearer sekret' });
    const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(client.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  });
});

describe('overload and cancellation', { skip }, () => {
  let srv;
  before(async () => { srv = await startServer(model, ['--parallel', '1', '--queue', '1', '--ctx', '2048']); });
  after(async () => { await srv?.stop(); });

  async function metric(name) {
    const text = await (await fetch(`${srv.base}/metrics`)).text();
    const m = text.match(new RegExp(`^${name.replace(/[{}"]/g, (c) => '\\' + c)} (\\S+)$`, 'm'));
    return m ? Number(m[1]) : NaN;
  }

  test('a full queue answers 503 with Retry-After, then serves again', async () => {
    // One running, one queued, the rest refused: long generations keep the sequence busy.
    const long = { prompt: 'Once upon a time', max_tokens: 1900, temperature: 0 };
    const inflight = [1, 2, 3, 4, 5, 6].map(() => post(srv.base, '/v1/completions', long));
    const results = await Promise.all(inflight);
    const refused = results.filter((r) => r.status === 503);
    assert.ok(refused.length >= 1, results.map((r) => r.status).join(','));
    for (const r of refused) {
      assertError(r, 503);
      assert.equal(r.headers.get('retry-after'), '1');
    }
    assert.ok(results.filter((r) => r.status === 200).length >= 1);
    await stillServes(srv.base);
  });

  test('a client that disconnects mid-stream cancels its request and frees the sequence', async () => {
    const before = await metric('geist_requests_total{outcome="cancelled"}');
    const ctl = new AbortController();
    const r = await fetch(`${srv.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: ctl.signal,
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 2000, temperature: 0.8, seed: 1, stream: true }) });
    const reader = r.body.getReader();
    await reader.read();
    ctl.abort();
    const t0 = Date.now();
    for (;;) {
      if (await metric('geist_requests_total{outcome="cancelled"}') > before) break;
      assert.ok(Date.now() - t0 < 5000, 'the request was not cancelled within 5 s');
      await new Promise((res) => setTimeout(res, 20));
    }
    await stillServes(srv.base);  // the only sequence is free again
  });

  test('a non-streaming client that disconnects cancels its request within a step and frees the sequence', async () => {
    const cancelled0 = await metric('geist_requests_total{outcome="cancelled"}');
    const forwards0 = await metric('geist_batch_forwards_total');
    const logged0 = srv.log().split('\n').filter((l) => / \/v1\/completions status=499 /.test(l)).length;
    const ctl = new AbortController();
    const pending = fetch(`${srv.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: ctl.signal,
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 2000, temperature: 0.8, seed: 2 }) })
      .catch((e) => e);
    // Abort once the request is decoding (its forwards are counted), not while it is queued.
    let t0 = Date.now();
    while (await metric('geist_batch_forwards_total') < forwards0 + 3) {
      assert.ok(Date.now() - t0 < 10000, 'the request did not start');
      await new Promise((res) => setTimeout(res, 5));
    }
    ctl.abort();
    t0 = Date.now();
    assert.equal((await pending).name, 'AbortError');
    for (;;) {
      if (await metric('geist_requests_total{outcome="cancelled"}') > cancelled0) break;
      assert.ok(Date.now() - t0 < 2000, 'the request was not cancelled within 2 s');
      await new Promise((res) => setTimeout(res, 10));
    }
    // Logged as cancelled (499) with far fewer tokens than asked for.
    const lines = () => srv.log().split('\n').filter((l) => / \/v1\/completions status=499 .*finish=cancelled/.test(l));
    const line = lines().at(-1);
    assert.equal(lines().length, logged0 + 1, srv.log());
    assert.ok(Number(line.match(/generated=(\d+)/)[1]) < 2000, line);
    await stillServes(srv.base);  // the only sequence is free again
  });
});

describe('stream pings', { skip }, () => {
  let srv;
  before(async () => { srv = await startServer(model, ['--parallel', '1', '--ctx', '2048', '--ping-ms', '50']); });
  after(async () => { await srv?.stop(); });

  test('a stream waiting for a sequence gets ": ping" comments, then its answer', async () => {
    // The only sequence is busy with a long greedy generation; the second stream waits in the
    // queue, idle for longer than --ping-ms.
    const ctl = new AbortController();
    const long = await fetch(`${srv.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: ctl.signal,
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 1900, temperature: 0, stream: true }) });
    const longReader = long.body.getReader();
    await longReader.read();  // it is generating
    const r = await fetch(`${srv.base}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'A cat', max_tokens: 4, temperature: 0, stream: true }) });
    assert.equal(r.status, 200);
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let text = '';
    while (!text.includes(': ping') && !text.includes('data: ')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    ctl.abort();  // free the sequence
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    const firstData = text.indexOf('data: ');
    assert.ok(text.slice(0, firstData).includes(': ping\n\n'), `no ping before the first frame: ${JSON.stringify(text.slice(0, 200))}`);
    assert.ok(text.trimEnd().endsWith('data: [DONE]'), text);
    const chunks = text.split('\n\n').filter((f) => f.startsWith('data: {')).map((f) => JSON.parse(f.slice(6)));
    assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason).length, 1);
  });
});

describe('queue of zero', { skip }, () => {
  let srv;
  before(async () => { srv = await startServer(model, ['--queue', '0']); });
  after(async () => { await srv?.stop(); });
  test('every generation is refused with 503, other endpoints answer', async () => {
    const r = await post(srv.base, '/v1/completions', { prompt: 'x' });
    assertError(r, 503);
    assert.equal(r.headers.get('retry-after'), '1');
    assert.equal((await post(srv.base, '/tokenize', { content: 'x' })).status, 200);
  });
});
