// Two replicas sharing one Redis (--redis), through the official openai client: a prefix
// computed on replica A is a hit on replica B (cached_tokens > 0) with a byte-identical
// response; Redis killed or hung: requests are still served, cold and identical, none waits
// long; Redis back: hits across replicas again. And sessions that move: parked on A, resumed on
// B by id, bit-identically.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { MODELS, modelPath, post, startServer } from './harness.mjs';
import { redisAvailable, startRedis } from './redis_fixture.mjs';

const SYSTEM = 'You are a storyteller. ' + 'Tell short, happy stories about the sea and its fish. '.repeat(8);
const haveRedis = redisAvailable();

function chat(salt, user = 'A whale.') {
  return { model: 'm', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: user }],
           max_tokens: 16, temperature: 0.8, seed: 7, logprobs: true, top_logprobs: 2, cache_salt: salt };
}

// What must be identical: the text and every logprob, as JSON.
function essence(r) {
  const c = r.choices[0];
  return JSON.stringify({ text: c.message.content, logprobs: c.logprobs, finish: c.finish_reason });
}
const cached = (r) => r.usage.prompt_tokens_details?.cached_tokens ?? 0;

async function metric(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}\\{tier="redis"\\} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const skipAll = haveRedis ? false : 'SKIPPED: fixture redis-server missing (scripts/install_deps.sh)';
if (!haveRedis) console.error('\n*** WARNING: SKIPPING REDIS SERVER TESTS: redis-server is not installed ***\n');

for (const name of MODELS) {
  const model = modelPath(name);
  const skip = skipAll || (model ? false : `SKIPPED: fixture ${name} missing`);
  describe(`two replicas, one Redis, on ${name}`, { skip }, () => {
    let redis, a, b, ca, cb;
    before(async () => {
      redis = await startRedis();
      const args = ['--redis', redis.url, '--ctx', '1024', '--park-after', '1'];
      [a, b] = await Promise.all([startServer(model, args), startServer(model, args)]);
      ca = new OpenAI({ baseURL: `${a.base}/v1`, apiKey: 'none', maxRetries: 0 });
      cb = new OpenAI({ baseURL: `${b.base}/v1`, apiKey: 'none', maxRetries: 0 });
    });
    after(async () => { await a?.stop(); await b?.stop(); await redis?.stop(); });

    // A computes (cold), its write-through lands in Redis, B finds it there. Retries with a
    // fresh salt while a breaker that opened during an outage has not closed yet.
    async function hitAcrossReplicas(tag) {
      return until(`a hit on B from Redis (${tag})`, async () => {
        const salt = `${tag}-${Date.now()}`;
        const puts = await metric(a.base, 'geist_tier_puts_total');
        const dropped = await metric(a.base, 'geist_tier_dropped_total');
        const ra = await ca.chat.completions.create(chat(salt));
        assert.equal(cached(ra), 0, 'A has never seen this salt');
        // Stored, or dropped by an open circuit (then the next round tries again).
        await until('A writes to Redis', async () =>
          (await metric(a.base, 'geist_tier_puts_total')) > puts ||
          (await metric(a.base, 'geist_tier_dropped_total')) > dropped, 5000).catch(() => null);
        const rb = await cb.chat.completions.create(chat(salt));
        assert.equal(essence(rb), essence(ra), 'B answers byte for byte what A answered');
        return cached(rb) > 0 ? { ra, rb } : null;
      });
    }

    test('a prefix computed on A is a hit on B, byte-identical', async () => {
      const { ra, rb } = await hitAcrossReplicas('first');
      assert.ok(cached(rb) > 0 && cached(rb) <= rb.usage.prompt_tokens);
      assert.equal(rb.usage.prompt_tokens, ra.usage.prompt_tokens);
      assert.ok(await redis.keys() >= 2, 'a manifest and its parts in Redis');
      assert.ok(await metric(b.base, 'geist_tier_hits_total') >= 1);
      assert.equal(await metric(b.base, 'geist_tier_corrupt_total'), 0);
    });

    // Sessions that move: a session parked on A (--park-after) is resumed on B by its id,
    // through the session endpoints; B's state image is A's byte for byte, both continue alike.
    const turn = { messages: [{ role: 'user', content: 'What happened next?' }], temperature: 0.8,
                   seed: 11, max_tokens: 12, logprobs: true, top_logprobs: 2 };
    const get = async (srv, p) => (await fetch(`${srv.base}${p}`)).json();
    const state = async (srv, id) =>
      Buffer.from(await (await fetch(`${srv.base}/v1/sessions/${id}/state`)).arrayBuffer());
    const turnOf = (r) => {
      assert.equal(r.status, 200, r.text);
      const c = r.json.choices[0];
      return JSON.stringify({ text: c.message.content, logprobs: c.logprobs });
    };

    test('parked on A, resumed on B: the same state bytes, the same continuation', async () => {
      const c = await post(a.base, '/v1/sessions', { id: 'moving', messages: [
        { role: 'system', content: SYSTEM }, { role: 'user', content: 'Once upon a time' }] });
      assert.equal(c.status, 201, c.text);
      assert.equal(turnOf(await post(a.base, '/v1/sessions/moving/chat/completions', turn)).length > 0, true);
      assert.equal((await fetch(`${b.base}/v1/sessions/never-made`)).status, 404);
      await until('A parks the session', async () => (await get(a, '/v1/sessions/moving')).parked === true);
      const onA = await get(a, '/v1/sessions/moving');
      const onB = await get(b, '/v1/sessions/moving');  // B adopts it from the record in Redis
      assert.deepEqual(onB.messages, onA.messages);
      assert.equal(onB.n_tokens, onA.n_tokens);
      assert.equal(onB.parked, true);
      const imgA = await state(a, 'moving');
      const imgB = await state(b, 'moving');
      assert.equal(imgA.length, onA.state_bytes);
      assert.ok(imgB.equals(imgA), 'B restored A\'s state image byte for byte');
      const next = { ...turn, messages: [{ role: 'user', content: 'And then?' }] };
      const ra = await post(a.base, '/v1/sessions/moving/chat/completions', next);
      const rb = await post(b.base, '/v1/sessions/moving/chat/completions', next);
      assert.equal(turnOf(rb), turnOf(ra));
      assert.equal(rb.json.usage.prompt_tokens_details.cached_tokens, onA.n_tokens);
      const m = await (await fetch(`${b.base}/metrics`)).text();
      assert.match(m, /^geist_sessions_from_tier_total 1$/m);
      assert.match(m, /^geist_sessions_resumed_total\{from="prefill"\} 0$/m);
      // Deleted (on both: each continued its copy): the record (a manifest and one part)
      // leaves Redis, so that no replica takes it in again.
      const keysBefore = await redis.keys();
      assert.equal((await fetch(`${a.base}/v1/sessions/moving`, { method: 'DELETE' })).status, 200);
      assert.equal((await fetch(`${b.base}/v1/sessions/moving`, { method: 'DELETE' })).status, 200);
      await until('the record leaves Redis', async () => (await redis.keys()) <= keysBefore - 2, 5000);
    });

    // The outages are the tier's behaviour, not the model's: once, on the first model (each
    // waits out circuit backoffs, seconds of CI time).
    if (name !== MODELS[0]) return;

    test('Redis killed: requests served cold and identical, none waits; back: hits again', async () => {
      await redis.kill();
      for (let i = 0; i < 4; ++i) {
        const salt = `down-${i}`;
        const ra = await ca.chat.completions.create(chat(salt));
        const t0 = Date.now();
        const rb = await cb.chat.completions.create(chat(salt));
        assert.ok(Date.now() - t0 < 5000, `request ${i} took ${Date.now() - t0} ms`);
        assert.equal(cached(rb), 0);
        assert.equal(essence(rb), essence(ra));
      }
      assert.equal(await metric(b.base, 'geist_tier_available'), 0, 'the circuit is open on B');
      await redis.start();  // empty: the objects are gone, new ones are shared again
      await hitAcrossReplicas('restarted');
      assert.equal(await metric(b.base, 'geist_tier_available'), 1);
    });

    test('Redis hung (SIGSTOP): requests served within their deadline; resumed: hits', async () => {
      redis.pause();
      try {
        for (let i = 0; i < 4; ++i) {
          const salt = `hung-${i}`;
          const ra = await ca.chat.completions.create(chat(salt));
          const t0 = Date.now();
          const rb = await cb.chat.completions.create(chat(salt));
          // The tier read's deadline is max(500 ms, the prefill it would save); the rest is
          // the prefill itself on a loaded machine.
          assert.ok(Date.now() - t0 < 5000, `request ${i} took ${Date.now() - t0} ms`);
          assert.equal(essence(rb), essence(ra));
        }
        assert.ok(await metric(b.base, 'geist_tier_timeouts_total') >= 1, 'reads timed out');
        assert.equal(await metric(b.base, 'geist_tier_available'), 0);
      } finally {
        redis.resume();
      }
      await hitAcrossReplicas('resumed');
    });
  });
}

