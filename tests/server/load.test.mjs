// The load and fault test at CI size (tests/server/load.mjs; larger by hand).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { modelPath } from './harness.mjs';
import { runLoad } from './load.mjs';

const model = modelPath('stories260K.gguf');

test('32 clients, random disconnects and malformed requests, a kill -9 half-way',
  { skip: model ? false : 'SKIPPED: fixture stories260K.gguf missing', timeout: 240000 }, async () => {
    const r = await runLoad({ model, clients: 32, requests: 96, parallel: 4, kill: true });
    console.log('load:', JSON.stringify(r));
    assert.equal(r.server_errors, 0, JSON.stringify(r.other));
    assert.equal(r.wrong, 0);
    assert.equal(r.malformed_accepted, 0);
    assert.ok(r.ok > 40, `only ${r.ok} answers`);
    assert.ok(r.prompt_tokens >= 1000, `system prompt of ${r.prompt_tokens} tokens`);
    assert.ok(r.after_ok, 'the restarted server answers correctly');
    assert.deepEqual(r.other, []);
  });
