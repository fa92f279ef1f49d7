// geist serve against the official openai client: streaming vs whole, usage, logprobs, the
// prefix cache's cached_tokens, stop strings.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { MODELS, modelPath, post, startServer } from './harness.mjs';

const SYSTEM = 'You are a storyteller. ' + 'Tell short, happy stories about animals. '.repeat(12);

for (const name of MODELS) {
  const model = modelPath(name);
  describe(`openai client on ${name}`, { skip: model ? false : `SKIPPED: fixture ${name} missing` }, () => {
    let srv;
    let client;
    before(async () => {
      srv = await startServer(model, ['--parallel', '2', '--ctx', '1024']);
      client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0 });
    });
    after(async () => { await srv?.stop(); });

    test('models lists the alias', async () => {
      const list = await client.models.list();
      assert.equal(list.data.length, 1);
      assert.equal(list.data[0].id, name);
    });

    test('chat: streaming and non-streaming give the same text at temperature 0', async () => {
      const req = { model: name, messages: [{ role: 'user', content: 'Once upon a time' }],
                    temperature: 0, max_tokens: 24 };
      const whole = await client.chat.completions.create(req);
      assert.equal(whole.object, 'chat.completion');
      assert.equal(whole.choices.length, 1);
      assert.equal(whole.choices[0].message.role, 'assistant');
      const text = whole.choices[0].message.content;
      assert.ok(text.length > 0);
      const stream = await client.chat.completions.create({ ...req, stream: true });
      let streamed = '';
      let roles = 0;
      const finishes = [];
      let first = true;
      for await (const chunk of stream) {
        assert.equal(chunk.object, 'chat.completion.chunk');
        const c = chunk.choices[0];
        if (first) { assert.equal(c.delta.role, 'assistant'); first = false; }
        if (c.delta.role) roles += 1;
        if (c.delta.content) streamed += c.delta.content;
        if (c.finish_reason) finishes.push(c.finish_reason);
      }
      assert.equal(roles, 1);
      assert.deepEqual(finishes, [whole.choices[0].finish_reason]);
      assert.equal(streamed, text);
    });

    test('completions: prompt as text and as token ids, stream and whole agree', async () => {
      const tok = await post(srv.base, '/tokenize', { content: 'Once upon a time', add_special: true });
      assert.equal(tok.status, 200);
      const ids = tok.json.tokens;
      const a = await client.completions.create({ model: name, prompt: 'Once upon a time', temperature: 0, max_tokens: 16 });
      const b = await client.completions.create({ model: name, prompt: ids, temperature: 0, max_tokens: 16 });
      assert.equal(a.object, 'text_completion');
      assert.equal(a.choices[0].text, b.choices[0].text);
      assert.equal(a.usage.prompt_tokens, ids.length);
      let streamed = '';
      for await (const ch of await client.completions.create({ model: name, prompt: ids, temperature: 0, max_tokens: 16, stream: true })) {
        streamed += ch.choices[0]?.text ?? '';
      }
      assert.equal(streamed, a.choices[0].text);
      const detok = await post(srv.base, '/detokenize', { tokens: ids });
      assert.equal(detok.status, 200);
      assert.match(detok.json.content, /Once upon a time/);
    });

    test('include_usage: every chunk has usage null, then one usage chunk with choices []', async () => {
      const stream = await client.chat.completions.create({
        model: name, messages: [{ role: 'user', content: 'Hello' }], temperature: 0, max_tokens: 8,
        stream: true, stream_options: { include_usage: true } });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      const last = chunks.at(-1);
      assert.deepEqual(last.choices, []);
      assert.equal(last.usage.completion_tokens, 8);
      assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 8);
      assert.equal(typeof last.usage.prompt_tokens_details.cached_tokens, 'number');
      for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
      assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason).length, 1);
    });

    test('usage and timings on a whole response', async () => {
      const r = await post(srv.base, '/v1/chat/completions', {
        messages: [{ role: 'user', content: 'Tell me' }], max_tokens: 4, temperature: 0 });
      assert.equal(r.status, 200);
      assert.equal(r.json.usage.completion_tokens, 4);
      assert.equal(typeof r.json.usage.prompt_tokens_details.cached_tokens, 'number');
      for (const k of ['cache_n', 'prompt_n', 'prompt_ms', 'predicted_n', 'predicted_ms', 'predicted_per_second',
        'cache_restore_ms', 'checkpoint_ms']) {
        assert.equal(typeof r.json.timings[k], 'number', k);
      }
    });

    test('timings: a cached prefix is restored, checkpoints are snapshotted, within prompt_ms', async () => {
      // A prompt this server has not seen: nothing to restore, its checkpoints snapshotted.
      // Its own cache_salt: no sequence holds a prompt of that namespace to reuse in place.
      const body = { messages: [{ role: 'user', content: 'Timings of a walrus named Quentin' }],
        max_tokens: 2, temperature: 0, cache_salt: 'timings' };
      const first = await post(srv.base, '/v1/chat/completions', body);
      assert.equal(first.status, 200);
      const t1 = first.json.timings;
      assert.equal(first.json.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(t1.cache_restore_ms, 0);
      assert.ok(t1.checkpoint_ms > 0, JSON.stringify(t1));
      // The prompt end's checkpoint is taken after the first token went out (docs/SERVER.md).
      assert.ok(t1.checkpoint_ms <= t1.prompt_ms + t1.predicted_ms, JSON.stringify(t1));
      // The same request again: the whole prompt is restored and nothing is left to checkpoint.
      const again = await post(srv.base, '/v1/chat/completions', body);
      const t2 = again.json.timings;
      assert.equal(again.json.usage.prompt_tokens_details.cached_tokens, first.json.usage.prompt_tokens);
      assert.ok(t2.cache_restore_ms > 0, JSON.stringify(t2));
      assert.ok(t2.cache_restore_ms <= t2.prompt_ms, JSON.stringify(t2));
      assert.equal(t2.checkpoint_ms, 0);
    });

    test('logprobs: greedy token is the top one, values are log-probabilities', async () => {
      const r = await client.chat.completions.create({
        model: name, messages: [{ role: 'user', content: 'A cat' }], temperature: 0, max_tokens: 6,
        logprobs: true, top_logprobs: 3 });
      const lp = r.choices[0].logprobs.content;
      assert.equal(lp.length, 6);
      let text = '';
      for (const e of lp) {
        assert.ok(e.logprob <= 0);
        assert.equal(e.top_logprobs.length, 3);
        assert.equal(e.top_logprobs[0].token, e.token);
        assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
        assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
        text += e.token;
      }
      assert.equal(text, r.choices[0].message.content);
      const c = await client.completions.create({ model: name, prompt: 'A cat', temperature: 0, max_tokens: 4, logprobs: 2 });
      assert.equal(c.choices[0].logprobs.tokens.length, 4);
      assert.equal(c.choices[0].logprobs.token_logprobs.length, 4);
    });

    test('frequency and presence penalties follow OpenAI: logit - f*count - p*(count>0) over the generated tokens', async () => {
      // Checked against the raw log-probabilities the server reports (log-softmax of the
      // logits before the sampler: the same per-step offset for every candidate): each greedy
      // choice must be the best candidate after subtracting the penalties computed here from
      // the tokens generated before it (never the prompt's).
      const f = 0.9;
      const p = 0.4;
      const prompt = 'Once upon a time, there was a little girl. The girl';
      const r = await client.completions.create({ model: name, prompt, temperature: 0, max_tokens: 40,
        frequency_penalty: f, presence_penalty: p, logprobs: 5, top_k: 0, min_p: 0, top_p: 1 });
      const lp = r.choices[0].logprobs;
      assert.equal(lp.tokens.length, 40);
      const count = new Map();
      let flips = 0;
      for (let i = 0; i < lp.tokens.length; i++) {
        const adj = (tok, l) => { const c = count.get(tok) ?? 0; return l - f * c - (c > 0 ? p : 0); };
        const chosen = adj(lp.tokens[i], lp.token_logprobs[i]);
        const top = Object.entries(lp.top_logprobs[i]);
        for (const [tok, l] of top) assert.ok(adj(tok, l) <= chosen + 1e-4, `step ${i}: ${tok} beats ${lp.tokens[i]}`);
        const rawBest = top.reduce((a, b) => (b[1] > a[1] ? b : a))[0];
        if (rawBest !== lp.tokens[i]) flips++;
        count.set(lp.tokens[i], (count.get(lp.tokens[i]) ?? 0) + 1);
      }
      assert.ok(flips > 0, 'the penalties never changed a greedy choice: the check above is vacuous');
      // frequency_penalty 0 changes no bit: explicit 0 and absent give the same text and logprobs.
      const sampled = { model: name, prompt, temperature: 0.9, seed: 5, max_tokens: 24, logprobs: 3 };
      const a = await client.completions.create(sampled);
      const b = await client.completions.create({ ...sampled, frequency_penalty: 0 });
      assert.equal(a.choices[0].text, b.choices[0].text);
      assert.deepEqual(a.choices[0].logprobs, b.choices[0].logprobs);
      const bad = await post(srv.base, '/v1/completions', { prompt, frequency_penalty: 2.5 });
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.param, 'frequency_penalty');
    });

    test('stop strings end the text before the stop string', async () => {
      const base = await client.completions.create({ model: name, prompt: 'Once upon a time', temperature: 0, max_tokens: 30 });
      const full = base.choices[0].text;
      const word = full.trim().split(/\s+/)[2];
      const cut = full.indexOf(word);
      const r = await client.completions.create({ model: name, prompt: 'Once upon a time', temperature: 0, max_tokens: 30, stop: [word] });
      assert.equal(r.choices[0].text, full.slice(0, cut));
      assert.equal(r.choices[0].finish_reason, 'stop');
    });

    test('cached_tokens: an identical request and the next turn reuse the prefix', async () => {
      // Their own cache_salt: the first request finds nothing of its namespace, cached or held.
      const messages = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'A story about a fox.' }];
      const t1 = await client.chat.completions.create({ model: name, messages, temperature: 0, max_tokens: 12, cache_salt: 'turns' });
      assert.equal(t1.usage.prompt_tokens_details.cached_tokens, 0);
      const again = await client.chat.completions.create({ model: name, messages, temperature: 0, max_tokens: 12, cache_salt: 'turns' });
      assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens);
      assert.equal(again.choices[0].message.content, t1.choices[0].message.content);
      const turn2 = [...messages, t1.choices[0].message, { role: 'user', content: 'And then?' }];
      const t2 = await client.chat.completions.create({ model: name, messages: turn2, temperature: 0, max_tokens: 12, cache_salt: 'turns' });
      assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(t2.usage));
      // On the sessions' grid (1 for Llama, where turn 1's whole prompt is reused: see
      // exact_prefix.test.mjs; 64 for the hybrid).
      const { prefill_grid: grid } = await (await fetch(`${srv.base}/props`)).json();
      assert.equal(t2.usage.prompt_tokens_details.cached_tokens % grid, 0);
      if (grid === 1) assert.equal(t2.usage.prompt_tokens_details.cached_tokens, t1.usage.prompt_tokens);
      const other = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'A story about a bear.' }];
      const t3 = await client.chat.completions.create({ model: name, messages: other, temperature: 0, max_tokens: 4, cache_salt: 'turns' });
      assert.ok(t3.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(t3.usage));
    });

    test('tokenize / apply-template / props / metrics', async () => {
      const props = await (await fetch(`${srv.base}/props`)).json();
      assert.equal(props.total_slots, 2);
      assert.equal(typeof props.chat_template, 'string');
      const t = await post(srv.base, '/apply-template', { messages: [{ role: 'user', content: 'Hi' }] });
      assert.equal(t.status, 200);
      assert.match(t.json.prompt, /Hi/);
      const m = await fetch(`${srv.base}/metrics`);
      assert.equal(m.status, 200);
      const text = await m.text();
      for (const k of ['geist_requests_total', 'geist_prompt_tokens_total', 'geist_cached_tokens_total',
                       'geist_queue_depth', 'geist_cache_bytes', 'geist_cache_hit_rate', 'geist_ttft_seconds_bucket']) {
        assert.match(text, new RegExp(k), k);
      }
    });
  });
}
