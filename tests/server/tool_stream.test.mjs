// Tool calls streamed through geist serve to the official openai client: a model built for the
// test (scripted_model.mjs) answers with a Hermes tool call under the fixtures' Qwen2.5 template;
// the stream must begin the call with its id, type and name, then bring its arguments in
// several fragments that add up to the arguments of the non-streamed reply.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { fixtures, startServer } from './harness.mjs';
import { writeScriptedModel } from './scripted_model.mjs';

const templateFile = path.join(fixtures, 'templates', 'Qwen-Qwen2.5-7B-Instruct.jinja');
let template = null;
try {
  template = readFileSync(templateFile, 'utf8');
} catch {
  if (process.env.GEIST_REQUIRE_FIXTURES === '1') throw new Error(`fixtures required but ${templateFile} is missing`);
}

const SCRIPT = ['<tool_call>', '\n{"name": "get_weather", ', '"arguments": {"location": "', 'Os', 'lo',
                '", "days": ', '3}', '}\n', '</tool_call>'];
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather',
  parameters: { type: 'object', properties: { location: { type: 'string' }, days: { type: 'integer' } },
                required: ['location'] } } }];

describe('tool calls stream as they form', { skip: template ? false : `SKIPPED: fixture ${templateFile} missing` }, () => {
  let dir;
  let srv;
  let client;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'geist-tool-'));
    const model = path.join(dir, 'scripted.gguf');
    writeScriptedModel(model, { script: SCRIPT, template });
    srv = await startServer(model, ['--ctx', '1024']);
    client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0 });
  });
  after(async () => {
    await srv?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const req = { model: 'scripted', messages: [{ role: 'user', content: 'Weather in Oslo for 3 days?' }],
                tools: TOOLS, temperature: 0, max_tokens: 32 };

  test('whole reply: one call with the arguments the model wrote', async () => {
    const whole = await client.chat.completions.create(req);
    const c = whole.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Oslo', days: 3 });
  });

  test('stream: begin delta, then argument fragments that add up to the whole', async () => {
    const whole = await client.chat.completions.create(req);
    const wholeArgs = whole.choices[0].message.tool_calls[0].function.arguments;
    const stream = await client.chat.completions.create({ ...req, stream: true });
    const deltas = [];
    const finishes = [];
    let content = '';
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      if (ch.delta?.content) content += ch.delta.content;
      for (const tc of ch.delta?.tool_calls ?? []) deltas.push(tc);
      if (ch.finish_reason) finishes.push(ch.finish_reason);
    }
    assert.equal(content, '');
    assert.deepEqual(finishes, ['tool_calls']);
    assert.ok(deltas.length >= 4, `expected the call in several deltas, got ${JSON.stringify(deltas)}`);
    const [first, ...rest] = deltas;
    assert.equal(first.index, 0);
    assert.match(first.id, /^call_/);
    assert.equal(first.type, 'function');
    assert.equal(first.function.name, 'get_weather');
    for (const d of rest) {
      assert.equal(d.index, 0);
      assert.equal(d.id, undefined);
      assert.equal(d.function.name, undefined);
    }
    const fragments = deltas.map((d) => d.function.arguments ?? '');
    if (process.env.GEIST_TEST_VERBOSE) console.log(JSON.stringify(fragments));
    assert.ok(fragments.filter((f) => f.length > 0).length >= 3, `fragments: ${JSON.stringify(fragments)}`);
    assert.equal(fragments.join(''), wholeArgs);
    // "Os" arrived before "lo": the value streamed as the model wrote it.
    assert.ok(fragments.some((f) => f.includes('Os') && !f.includes('Oslo')), JSON.stringify(fragments));
  });
});
