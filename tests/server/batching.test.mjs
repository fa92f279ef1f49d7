// Continuous batching (docs/SERVER.md "Scheduler"): concurrent requests share one batched
// forward per step, and each still gets the bytes it gets alone. The proof of sharing is the
// scheduler's /metrics counters: after requests sent one at a time no forward carried more than
// one sequence; after 8 concurrent ones, forwards carried several.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { MODELS, modelPath, post, startServer } from './harness.mjs';

async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^(geist_batch_[a-z_]+) (\S+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function requests() {
  return Array.from({ length: 8 }, (_, i) => {
    const ids = Array.from({ length: 20 + 9 * i }, (_, k) => 1 + ((k * 31 + i * 7) % 400));
    return { prompt: ids, max_tokens: 96, temperature: i % 2 ? 0.8 : 0, seed: 100 + i, logprobs: 1 };
  });
}

function essence(r) {
  assert.equal(r.status, 200, r.text);
  const c = r.json.choices[0];
  return JSON.stringify({ text: c.text, logprobs: c.logprobs, finish: c.finish_reason });
}

for (const name of MODELS) {
  const model = modelPath(name);
  describe(`batching on ${name}`, { skip: model ? false : `SKIPPED: fixture ${name} missing` }, () => {
    let srv;
    before(async () => {
      srv = await startServer(model, ['--parallel', '8', '--cache-ram', '0', '--ctx', '512']);
    });
    after(async () => { await srv?.stop(); });

    test('8 concurrent requests ride in shared forwards, each equal to its run alone', async () => {
      const reqs = requests();
      const alone = [];
      for (const q of reqs) alone.push(essence(await post(srv.base, '/v1/completions', q)));
      const m0 = await metrics(srv.base);
      assert.ok(m0.geist_batch_forwards_total > 0, JSON.stringify(m0));
      assert.equal(m0.geist_batch_max_sequences, 1, 'requests sent one at a time never share a forward');

      const rs = await Promise.all(reqs.map((q) => post(srv.base, '/v1/completions', q)));
      rs.forEach((r, i) => assert.equal(essence(r), alone[i], `request ${i}`));
      const m1 = await metrics(srv.base);
      const forwards = m1.geist_batch_forwards_total - m0.geist_batch_forwards_total;
      const seqs = m1.geist_batch_sequences_total - m0.geist_batch_sequences_total;
      assert.ok(m1.geist_batch_max_sequences > 1, `most sequences in one forward: ${m1.geist_batch_max_sequences}`);
      assert.ok(seqs > forwards, `${seqs} sequences in ${forwards} forwards: no sharing`);
    });
  });
}
