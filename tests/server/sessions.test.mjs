// Session endpoints: create from a conversation, continue, fork, GET / PUT the state image
// (a refused image is a 400 and changes nothing), delete.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { MODELS, modelPath, post, startServer } from './harness.mjs';

for (const name of MODELS) {
  const model = modelPath(name);
  describe(`sessions on ${name}`, { skip: model ? false : `SKIPPED: fixture ${name} missing` }, () => {
    let srv;
    before(async () => { srv = await startServer(model, ['--parallel', '2', '--ctx', '1024']); });
    after(async () => { await srv?.stop(); });

    const turn = { messages: [{ role: 'user', content: 'What happened next?' }], temperature: 0.8, seed: 7, max_tokens: 16 };

    test('round trip', async () => {
      const c = await post(srv.base, '/v1/sessions', { id: 'story', messages: [
        { role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Once upon a time' },
        { role: 'assistant', content: 'there was a little girl named Lily.' }] });
      assert.equal(c.status, 201, c.text);
      assert.ok(c.json.n_tokens > 10);
      assert.equal(c.json.id, 'story');
      assert.equal((await post(srv.base, '/v1/sessions', { id: 'story', messages: [{ role: 'user', content: 'x' }] })).status, 409);

      const f = await post(srv.base, '/v1/sessions/story/fork', { id: 'story2' });
      assert.equal(f.status, 201, f.text);
      const img = Buffer.from(await (await fetch(`${srv.base}/v1/sessions/story/state`)).arrayBuffer());
      assert.equal(img.length, c.json.state_bytes);

      const a = await post(srv.base, '/v1/sessions/story/chat/completions', turn);
      assert.equal(a.status, 200, a.text);
      assert.equal(a.json.usage.prompt_tokens_details.cached_tokens, c.json.n_tokens);
      const b = await post(srv.base, '/v1/sessions/story2/chat/completions', turn);
      assert.equal(b.json.choices[0].message.content, a.json.choices[0].message.content);
      const s1 = await (await fetch(`${srv.base}/v1/sessions/story`)).json();
      assert.equal(s1.messages.length, 5);
      assert.equal(s1.n_tokens, a.json.usage.prompt_tokens);

      // The saved image restores into a new session that answers as the original did.
      const put = await fetch(`${srv.base}/v1/sessions/story3/state`, { method: 'PUT', body: img });
      assert.equal(put.status, 201, await put.text());
      const d = await post(srv.base, '/v1/sessions/story3/chat/completions', turn);
      assert.equal(d.status, 200, d.text);
      assert.equal(d.json.usage.prompt_tokens_details.cached_tokens, c.json.n_tokens);

      // A damaged image is refused and the session is unchanged.
      const bad = Buffer.from(img);
      bad[bad.length - 5] ^= 0xff;
      const r = await fetch(`${srv.base}/v1/sessions/story2/state`, { method: 'PUT', body: bad });
      assert.equal(r.status, 400);
      const err = await r.json();
      assert.equal(err.error.param, 'state');
      const after = await (await fetch(`${srv.base}/v1/sessions/story2`)).json();
      assert.equal(after.messages.length, 5);

      const del = await fetch(`${srv.base}/v1/sessions/story`, { method: 'DELETE' });
      assert.equal(del.status, 200);
      assert.equal((await fetch(`${srv.base}/v1/sessions/story`)).status, 404);
      assert.equal((await post(srv.base, '/v1/sessions/story/chat/completions', turn)).status, 404);
    });

    test('a streamed session turn', async () => {
      const c = await post(srv.base, '/v1/sessions', { messages: [{ role: 'user', content: 'Hello' }] });
      assert.equal(c.status, 201);
      const r = await fetch(`${srv.base}/v1/sessions/${c.json.id}/chat/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...turn, stream: true }) });
      const text = await r.text();
      assert.match(text, /data: \[DONE\]/);
      const s = await (await fetch(`${srv.base}/v1/sessions/${c.json.id}`)).json();
      assert.equal(s.messages.length, 3);
    });
  });
}
