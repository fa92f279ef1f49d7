// The determinism contract (docs/SERVER.md, ENGINEERING.md §10): the same request gives the
// same bytes (text and logprobs) whether it hit the prefix cache or not, ran alone or among
// concurrent requests, on a fresh server or a warm one. The reference is a fresh server with
// no cache, one sequence and the default step budget; the server under test has the cache, 4
// sequences and a step budget that cuts prompts into different chunks.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { MODELS, modelPath, post, startServer } from './harness.mjs';

const SYSTEM = 'You are a storyteller. ' + 'Tell short, happy stories about animals and the sea. '.repeat(10);

function requests() {
  const out = [];
  const users = ['A fox.', 'A bear in the snow.', 'The little boat.', 'Two friends.'];
  for (const [i, u] of users.entries()) {
    const sampled = i % 2 === 1;
    out.push({ path: '/v1/chat/completions', body: {
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: u }],
      max_tokens: 24, logprobs: true, top_logprobs: 2,
      ...(sampled ? { temperature: 0.9, top_p: 0.95, seed: 1234 + i } : { temperature: 0 }) } });
  }
  // Token-id prompts around the grid (63, 64, 65, 130 tokens).
  for (const n of [63, 64, 65, 130]) {
    const ids = Array.from({ length: n }, (_, k) => 1 + ((k * 37 + n) % 500));
    out.push({ path: '/v1/completions', body: { prompt: ids, max_tokens: 16, temperature: 0.7, seed: n, logprobs: 2 } });
  }
  return out;
}

// What must be identical: the generated text and every logprob (bitwise, as JSON numbers).
function essence(r) {
  assert.equal(r.status, 200, r.text);
  const c = r.json.choices[0];
  return JSON.stringify({ text: c.message?.content ?? c.text, logprobs: c.logprobs, finish: c.finish_reason });
}

for (const name of MODELS) {
  const model = modelPath(name);
  describe(`determinism on ${name}`, { skip: model ? false : `SKIPPED: fixture ${name} missing` }, () => {
    let ref;
    let srv;
    const reqs = requests();
    const expected = [];
    before(async () => {
      ref = await startServer(model, ['--parallel', '1', '--cache-ram', '0', '--ctx', '1024']);
      for (const q of reqs) expected.push(essence(await post(ref.base, q.path, q.body)));
      await ref.stop();
      srv = await startServer(model, ['--parallel', '4', '--ctx', '1024', '--batch', '100']);
    });
    after(async () => { await ref?.stop(); await srv?.stop(); });

    test('alone, cold: equal to the uncached reference', async () => {
      for (const [i, q] of reqs.entries()) {
        const r = await post(srv.base, q.path, q.body);
        assert.equal(essence(r), expected[i], `request ${i}`);
      }
    });

    test('alone, warm (prefix cache hits): equal, and the cache was used', async () => {
      let cached = 0;
      for (const [i, q] of reqs.entries()) {
        const r = await post(srv.base, q.path, q.body);
        assert.equal(essence(r), expected[i], `request ${i}`);
        assert.equal(r.json.usage.prompt_tokens_details.cached_tokens, r.json.usage.prompt_tokens);
        cached += r.json.usage.prompt_tokens_details.cached_tokens;
      }
      assert.ok(cached > 0);
    });

    test('8 concurrent different requests: each equal to its reference', async () => {
      const rs = await Promise.all(reqs.map((q) => post(srv.base, q.path, { ...q.body, cache_salt: 'concurrent' })));
      rs.forEach((r, i) => assert.equal(essence(r), expected[i], `request ${i}`));
    });

    test('a shared system prompt hit from another request: equal to the reference', async () => {
      const q = reqs[0];
      const salt = 'partial';
      await post(srv.base, reqs[2].path, { ...reqs[2].body, cache_salt: salt });  // same system prompt
      const r = await post(srv.base, q.path, { ...q.body, cache_salt: salt });
      assert.ok(r.json.usage.prompt_tokens_details.cached_tokens > 0);
      assert.ok(r.json.usage.prompt_tokens_details.cached_tokens < r.json.usage.prompt_tokens);
      assert.equal(essence(r), expected[0]);
    });

    test('8 identical requests at once give one distinct answer, the reference', async () => {
      for (const i of [0, 1, 7]) {
        const q = reqs[i];
        const rs = await Promise.all(Array.from({ length: 8 }, () => post(srv.base, q.path, { ...q.body, cache_salt: `same${i}` })));
        const distinct = new Set(rs.map(essence));
        assert.equal(distinct.size, 1);
        assert.equal([...distinct][0], expected[i]);
        const computed = rs.filter((r) => r.json.usage.prompt_tokens_details.cached_tokens === 0).length;
        assert.equal(computed, 1, `the shared prompt was prefilled ${computed} times`);
      }
    });
  });
}
