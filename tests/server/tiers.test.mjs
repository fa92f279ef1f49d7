// The disk tier (docs/SERVER.md "Tiers"): a restarted server with a cache dir is warm and
// answers byte-identically; corrupted, truncated and misplaced (another namespace's) files are
// misses, counted in /metrics and deleted, the answers still those of an uncached server; a
// failing disk pauses writes while serving goes on; an idle session parked out of RAM resumes
// bit-identically. References come from a server with no cache at all.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { MODELS, modelPath, post, startServer } from './harness.mjs';

const LONG = 'Once upon a time there was a little girl named Lily who loved the sea. '.repeat(8);
const EXT = LONG + 'One day she found a small boat on the beach and';
const SHORT = ['The cat sat on', 'A big red ball', 'Tom and his dog'];
const SESSION = [{ role: 'system', content: 'You tell stories.' },
  { role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: 'there was a fox.' }];
const TURN = { messages: [{ role: 'user', content: 'What happened next?' }], temperature: 0.8, seed: 7, max_tokens: 16 };

async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = {};
  for (const line of text.split('\n')) {
    const k = line.match(/^([a-z_]+(?:\{[^}]*\})?) (\S+)$/);
    if (k) m[k[1]] = Number(k[2]);
  }
  return m;
}

async function until(what, f, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await f()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const objects = (dir) => existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.gobj')).sort() : [];

for (const name of MODELS) {
  const model = modelPath(name);
  describe(`disk tier on ${name}`, { skip: model ? false : `SKIPPED: fixture ${name} missing` }, () => {
    const tmp = [];
    const servers = [];
    const expected = {};
    let sessionReply;
    const start = async (extra) => {
      const s = await startServer(model, ['--ctx', '1024', ...extra]);
      servers.push(s);
      return s;
    };
    const dir = () => {
      const d = mkdtempSync(path.join(os.tmpdir(), 'geist-tiers-'));
      tmp.push(d);
      return path.join(d, 'cache');
    };
    const complete = async (srv, prompt, extra = {}) => {
      const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0 });
      const r = await client.completions.create({ model: 'm', prompt, max_tokens: 12, temperature: 0, ...extra });
      return { text: r.choices[0].text, cached: r.usage.prompt_tokens_details?.cached_tokens ?? 0, prompt: r.usage.prompt_tokens };
    };

    before(async () => {
      const ref = await start(['--cache-ram', '0']);
      for (const p of [LONG, EXT, ...SHORT]) expected[p] = (await complete(ref, p)).text;
      assert.equal((await post(ref.base, '/v1/sessions', { id: 's', messages: SESSION })).status, 201);
      const t = await post(ref.base, '/v1/sessions/s/chat/completions', TURN);
      assert.equal(t.status, 200, t.text);
      sessionReply = t.json.choices[0].message.content;
      await ref.stop();
    });
    after(async () => {
      for (const s of servers) await s.stop();
      for (const d of tmp) rmSync(d, { recursive: true, force: true });
    });

    test('a restart with a cache dir is warm and byte-identical', async () => {
      const d = dir();
      const a = await start(['--cache-dir', d]);
      const cold = await complete(a, LONG);
      assert.equal(cold.cached, 0);
      assert.equal(cold.text, expected[LONG]);
      await a.stop();  // the queued writes are finished on the way out
      assert.ok(objects(d).length >= 2, `files: ${objects(d)}`);  // a grid point and the prompt end
      const b = await start(['--cache-dir', d]);
      const warm = await complete(b, LONG);
      assert.equal(warm.cached, warm.prompt);
      assert.equal(warm.text, expected[LONG]);
      const ext = await complete(b, EXT);  // a longer prompt
      const { prefill_grid: grid } = await (await fetch(`${b.base}/props`)).json();
      if (grid === 1) {  // Llama: all EXT shares with LONG, which the sequence still holds
        const tok = async (content) => (await (await fetch(`${b.base}/tokenize`, {
          method: 'POST', body: JSON.stringify({ content, add_special: true }) })).json()).tokens;
        const [l, e] = [await tok(LONG), await tok(EXT)];
        let shared = 0;
        while (shared < l.length && l[shared] === e[shared]) ++shared;
        assert.equal(ext.cached, shared, `cached ${ext.cached}`);
      } else {  // the hybrid: its last grid point, from disk
        assert.ok(ext.cached > 0 && ext.cached % 64 === 0, `cached ${ext.cached}`);
      }
      assert.equal(ext.text, expected[EXT]);
      const m = await metrics(b.base);
      assert.ok(m['geist_tier_hits_total{tier="disk"}'] >= 1);
      assert.ok(m['geist_cache_tier_hits_total'] >= 1);
      await b.stop();
    });

    // The file checks do not depend on the model: on one of them (the hybrid) only.
    if (name === MODELS[1]) {
      test('corrupted, truncated and foreign-namespace files: misses, counted, deleted', async () => {
        const d = dir();
        const a = await start(['--cache-dir', d]);
        const fileOf = {};
        const write = async (p, extra) => {
          const before = objects(d);
          assert.equal((await complete(a, p, extra)).text, expected[p]);
          await until('the object on disk', () => objects(d).length === before.length + 1);
          return objects(d).find((f) => !before.includes(f));
        };
        for (const p of SHORT) fileOf[p] = await write(p);  // under 64 tokens: one file each
        const foreign = await write(SHORT[2], { cache_salt: 'another-tenant' });
        await a.stop();

        const [f1, f2, f3] = SHORT.map((p) => path.join(d, fileOf[p]));
        const damaged = {};
        let bytes = readFileSync(f1);
        bytes[bytes.length >> 1] ^= 0x01;
        writeFileSync(f1, bytes);
        damaged[f1] = bytes;
        bytes = readFileSync(f2).subarray(0, readFileSync(f2).length >> 1);
        writeFileSync(f2, bytes);
        damaged[f2] = bytes;
        bytes = readFileSync(path.join(d, foreign));  // another namespace's object, valid in itself
        writeFileSync(f3, bytes);
        damaged[f3] = bytes;

        const b = await start(['--cache-dir', d]);
        for (const p of SHORT) {
          const r = await complete(b, p);
          assert.equal(r.cached, 0, p);
          assert.equal(r.text, expected[p], p);
        }
        const m = await metrics(b.base);
        assert.equal(m['geist_tier_corrupt_total{tier="disk"}'], 3);
        assert.equal(m['geist_tier_hits_total{tier="disk"}'], 0);
        await b.stop();
        for (const f of [f1, f2, f3]) {  // deleted (a good copy may have been written since)
          assert.ok(!existsSync(f) || !readFileSync(f).equals(damaged[f]), `${f} still damaged`);
        }
      });

      test('a failing disk pauses writes, and serving goes on', async () => {
        const d = dir();
        const a = await start(['--cache-dir', d]);
        // The directory replaced by a plain file: every write fails, as on a dead or full disk
        // (works without root or a tmpfs).
        renameSync(d, `${d}.moved`);
        writeFileSync(d, 'not a directory');
        for (const p of SHORT) assert.equal((await complete(a, p)).text, expected[p]);
        await until('a counted write error', async () => (await metrics(a.base))['geist_tier_put_errors_total{tier="disk"}'] >= 1);
        const m = await metrics(a.base);
        assert.equal(m['geist_tier_available{tier="disk"}'], 0);
        assert.equal((await complete(a, LONG)).text, expected[LONG]);
        const again = await complete(a, SHORT[0]);  // RAM still serves
        assert.equal(again.cached, again.prompt);
        assert.equal(again.text, expected[SHORT[0]]);
        await a.stop();
      });
    }

    test('an idle session is parked out of RAM and resumes bit-identically', async () => {
      const d = dir();
      const a = await start(['--cache-dir', d, '--park-after', '1']);
      const c = await post(a.base, '/v1/sessions', { id: 's', messages: SESSION });
      assert.equal(c.status, 201, c.text);
      assert.equal(c.json.parked, false);
      await post(a.base, '/v1/sessions/s/fork', { id: 's2' });
      const state = Buffer.from(await (await fetch(`${a.base}/v1/sessions/s2/state`)).arrayBuffer());
      await until('the sessions parked', async () => {
        const l = await (await fetch(`${a.base}/v1/sessions`)).json();
        return l.data.length === 2 && l.data.every((x) => x.parked);
      });
      let m = await metrics(a.base);
      assert.equal(m.geist_sessions_parked, 2);
      // The image read back from the disk is the one parked, byte for byte.
      const back = Buffer.from(await (await fetch(`${a.base}/v1/sessions/s2/state`)).arrayBuffer());
      assert.ok(back.equals(state));
      const t = await post(a.base, '/v1/sessions/s/chat/completions', TURN);
      assert.equal(t.status, 200, t.text);
      assert.equal(t.json.choices[0].message.content, sessionReply);
      assert.equal(t.json.usage.prompt_tokens_details.cached_tokens, c.json.n_tokens);
      m = await metrics(a.base);
      assert.equal(m['geist_sessions_resumed_total{from="tier"}'], 2);
      assert.equal(m['geist_sessions_resumed_total{from="prefill"}'], 0);
      await a.stop();
    });

    test('sessions outlive a restart: parked, and the ones in RAM at shutdown', async () => {
      const d = dir();
      const a = await start(['--cache-dir', d, '--park-after', '1']);
      assert.equal((await post(a.base, '/v1/sessions', { id: 'p', messages: SESSION })).status, 201);
      await until('the session parked', async () => (await (await fetch(`${a.base}/v1/sessions/p`)).json()).parked === true);
      // 'q' had a turn just before the stop: saved on the way out with its new state.
      assert.equal((await post(a.base, '/v1/sessions', { id: 'q', messages: SESSION })).status, 201);
      const first = await post(a.base, '/v1/sessions/q/chat/completions', TURN);
      assert.equal(first.json.choices[0].message.content, sessionReply);
      const q = await (await fetch(`${a.base}/v1/sessions/q`)).json();
      await a.stop();

      const b = await start(['--cache-dir', d, '--park-after', '1']);
      const p = await (await fetch(`${b.base}/v1/sessions/p`)).json();
      assert.equal(p.parked, true);
      assert.deepEqual(p.messages, SESSION);
      const t = await post(b.base, '/v1/sessions/p/chat/completions', TURN);
      assert.equal(t.status, 200, t.text);
      assert.equal(t.json.choices[0].message.content, sessionReply);
      assert.equal(t.json.usage.prompt_tokens_details.cached_tokens, p.n_tokens);
      const q2 = await (await fetch(`${b.base}/v1/sessions/q`)).json();
      assert.equal(q2.n_tokens, q.n_tokens);
      assert.equal(q2.messages.length, q.messages.length);
      const again = await post(b.base, '/v1/sessions/q/chat/completions', { ...TURN, messages: [{ role: 'user', content: 'And then?' }] });
      assert.equal(again.status, 200, again.text);
      assert.equal(again.json.usage.prompt_tokens_details.cached_tokens, q.n_tokens);
      const m = await metrics(b.base);
      assert.equal(m.geist_sessions_from_tier_total, 2);
      assert.equal(m['geist_sessions_resumed_total{from="prefill"}'], 0);
      // Deleted here: gone from the tier as well, for the next restart.
      assert.equal((await fetch(`${b.base}/v1/sessions/p`, { method: 'DELETE' })).status, 200);
      await b.stop();
      const c = await start(['--cache-dir', d]);
      assert.equal((await fetch(`${c.base}/v1/sessions/p`)).status, 404);
      assert.equal((await fetch(`${c.base}/v1/sessions/q`)).status, 200);
      await c.stop();
    });
  });
}
