// Load and fault test of geist serve (docs/SERVER.md "Load test"): C concurrent clients send R
// streamed chat requests sharing a long system prompt, with random disconnects and malformed
// requests mixed in, optionally a kill -9 of the server half-way and a restart. Every answer
// is checked against its uncached reference (a separate server with no cache, one sequence).
// Bounded, localhost only, stops by itself.
//   node load.mjs [--model FILE] [--clients 32] [--requests 300] [--kill] [--parallel 4]
import { readFileSync } from 'node:fs';

import { modelPath, post, startServer } from './harness.mjs';

function rng(seed) {  // mulberry32: the run is reproducible from its seed
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function streamChat(base, body, abortAfterMs) {
  const ctl = new AbortController();
  const t0 = performance.now();
  let ttft = null;
  let text = '';
  let usage = null;
  let sawDone = false;
  let timer = null;
  if (abortAfterMs !== null) timer = setTimeout(() => ctl.abort(), abortAfterMs);
  try {
    const r = await fetch(base + '/v1/chat/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: ctl.signal,
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }) });
    if (r.status !== 200) return { status: r.status, body: await r.text() };
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const f = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (f === 'data: [DONE]') sawDone = true;
        if (!f.startsWith('data: ') || f === 'data: [DONE]') continue;
        const c = JSON.parse(f.slice(6));
        if (c.error) return { status: 500, body: f };
        if (c.usage && c.choices.length === 0) usage = c.usage;
        const d = c.choices[0]?.delta?.content;
        if (d) {
          if (ttft === null) ttft = performance.now() - t0;
          text += d;
        }
      }
    }
    // A stream cut without [DONE] (the server was killed under it) is lost, not an answer.
    if (!sawDone) return { status: 'failed', error: 'stream ended without [DONE]' };
    return { status: 200, text, ttft, usage };
  } catch (e) {
    return { status: ctl.signal.aborted ? 'aborted' : 'failed', error: String(e) };
  } finally {
    if (timer) clearTimeout(timer);
  }
}

// VmHWM: the peak resident set; VmRSS: the current one.
function rssKiB(pid, field = 'VmHWM') {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(s.match(new RegExp(`${field}:\\s+(\\d+)`))[1]);
  } catch { return NaN; }
}

export async function runLoad(o) {
  const model = o.model;
  const system = 'You are a helpful storyteller who always answers kindly. ' +
    'Every story is about animals that live near a big river and learn to share. '.repeat(o.systemRepeat ?? 25);
  const questions = Array.from({ length: o.questions ?? 16 }, (_, i) => `Tell story number ${i} about a ${['fox', 'cat', 'owl', 'frog'][i % 4]}.`);
  const bodyOf = (q) => ({ messages: [{ role: 'system', content: system }, { role: 'user', content: questions[q] }],
    max_tokens: o.maxTokens ?? 32, temperature: q % 2 ? 0.8 : 0, seed: 100 + q });
  const serverArgs = ['--ctx', String(o.ctx ?? 2048), '--queue', String(o.queue ?? 64)];

  // References: uncached, alone (o.references: those of an earlier run with the same options).
  let refs = o.references;
  if (!refs) {
    const ref = await startServer(model, [...serverArgs, '--parallel', '1', '--cache-ram', '0']);
    refs = { expected: [], promptTokens: 0 };
    for (let q = 0; q < questions.length; q++) {
      const r = await post(ref.base, '/v1/chat/completions', bodyOf(q));
      if (r.status !== 200) throw new Error(`reference ${q}: ${r.text}`);
      refs.expected.push(r.json.choices[0].message.content);
      refs.promptTokens = r.json.usage.prompt_tokens;
    }
    await ref.stop();
  }
  const { expected, promptTokens } = refs;

  const cacheMiB = o.cacheMiB ?? 256;
  let srv = await startServer(model, [...serverArgs, '--parallel', String(o.parallel ?? 4), '--cache-ram', String(cacheMiB)]);
  // Resident set once loaded (model, sequences, threads), before any request: what the load
  // may add to it is bounded by the cache budget (plus request buffers).
  const baseline = rssKiB(srv.proc.pid, 'VmRSS');
  const rand = rng(o.seed ?? 1);
  const stats = { ok: 0, wrong: 0, serverErrors: 0, badRejected: 0, badAccepted: 0, aborted: 0,
                  lostInFlight: 0, refused503: 0, other: [], ttft: [], tokens: 0, cached: 0 };
  let next = 0;
  let killed = false;
  let restarting = null;
  let peak = 0;
  const t0 = performance.now();
  const plan = Array.from({ length: o.requests }, () => {
    const x = rand();
    return { q: Math.floor(rand() * questions.length), kind: x < 0.1 ? 'malformed' : x < 0.2 ? 'disconnect' : 'normal', at: rand() };
  });
  async function client() {
    while (next < plan.length) {
      const i = next++;
      const p = plan[i];
      if (o.kill && !killed && i >= plan.length / 2) {
        killed = true;
        peak = Math.max(peak, rssKiB(srv.proc.pid));
        srv.proc.kill('SIGKILL');
        restarting = (async () => {
          await new Promise((r) => srv.proc.once('exit', r));
          srv = await startServer(model, [...serverArgs, '--parallel', String(o.parallel ?? 4), '--cache-ram', String(cacheMiB)]);
        })();
      }
      if (restarting) await restarting;
      const base = srv.base;
      if (p.kind === 'malformed') {
        const bad = p.at < 0.5 ? '{"messages": [' : JSON.stringify({ ...bodyOf(p.q), temperature: 'x' });
        try {
          const r = await post(base, '/v1/chat/completions', bad);
          if (r.status === 400 && r.json?.error) stats.badRejected++; else stats.badAccepted++;
        } catch { stats.lostInFlight++; }
        continue;
      }
      const r = await streamChat(base, bodyOf(p.q), p.kind === 'disconnect' ? Math.floor(p.at * 50) : null);
      if (r.status === 200) {
        if (r.text === expected[p.q]) stats.ok++; else stats.wrong++;
        if (r.ttft !== null) stats.ttft.push(r.ttft);
        stats.tokens += r.usage?.completion_tokens ?? 0;
        stats.cached += r.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      } else if (r.status === 'aborted') {
        stats.aborted++;
      } else if (r.status === 'failed') {
        stats.lostInFlight++;  // the server was killed under it
      } else if (r.status === 503) {
        stats.refused503++;
      } else if (typeof r.status === 'number' && r.status >= 500) {
        stats.serverErrors++;
        stats.other.push(r.body);
      } else {
        stats.other.push(`${r.status} ${r.body ?? ''}`);
      }
    }
  }
  await Promise.all(Array.from({ length: o.clients }, client));
  const wall = (performance.now() - t0) / 1000;
  peak = Math.max(peak, rssKiB(srv.proc.pid));
  // After the load: the server still answers, correctly.
  const after = await post(srv.base, '/v1/chat/completions', bodyOf(0));
  await srv.stop();
  return { clients: o.clients, requests: o.requests, prompt_tokens: promptTokens,
           ok: stats.ok, wrong: stats.wrong, server_errors: stats.serverErrors,
           malformed_rejected: stats.badRejected, malformed_accepted: stats.badAccepted,
           disconnected: stats.aborted, lost_in_flight: stats.lostInFlight, refused_503: stats.refused503,
           other: stats.other.slice(0, 5), killed,
           ttft_p50_ms: pct(stats.ttft, 50), ttft_p99_ms: pct(stats.ttft, 99),
           tok_s: stats.tokens / wall, cached_tokens: stats.cached, wall_s: wall, peak_rss_mib: peak / 1024,
           baseline_rss_mib: baseline / 1024, cache_budget_mib: cacheMiB,
           after_ok: after.status === 200 && after.json.choices[0].message.content === expected[0],
           references: refs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : d; };
  const m = arg('--model', null) ?? modelPath('stories260K.gguf');
  const res = await runLoad({ model: m, clients: Number(arg('--clients', 32)), requests: Number(arg('--requests', 300)),
    parallel: Number(arg('--parallel', 4)), kill: process.argv.includes('--kill'), maxTokens: Number(arg('--max-tokens', 32)),
    cacheMiB: Number(arg('--cache-ram', 256)) });
  delete res.references;
  console.log(JSON.stringify(res, null, 1));
}
