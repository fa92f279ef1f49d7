// Benchmark of geist serve against llama-server (docs/BENCHMARKS.md; a benchmark, not a test):
// the same GGUF, the same threads, P sequences each (--parallel P / -np P, default 4); workload:
// N chat requests sharing a long system prompt with distinct short questions, a fixed number of
// generated tokens each, at each concurrency. Prints mean / p50 / p99 TTFT, aggregate tok/s and
// the cached tokens each server reports, and the ratios.
//   node bench/server_bench.mjs -m FILE [-t 2] [--requests 64] [--system-tokens 2048]
//        [--gen 64] [--concurrency 1,4] [--parallel 4]
//        [--geist-args '--backend cuda'] [--llama-args '-ngl 99']   (extra server arguments)
// llama-server: $LLAMA_CPP_DIR/bin/llama-server (or $LLAMA_SERVER), only when it exists; the
// script never fetches or builds it. Node 20, no npm packages needed.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const arg = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : d; };
const model = arg('-m', null);
if (!model) { console.error('usage: node bench/server_bench.mjs -m FILE [options]'); process.exit(2); }
const threads = arg('-t', '2');
const nReq = Number(arg('--requests', 64));
const sysTokens = Number(arg('--system-tokens', 2048));
const gen = Number(arg('--gen', 64));
const concs = arg('--concurrency', '1,4').split(',').map(Number);
const parallel = Number(arg('--parallel', 4));
const words = (v) => (v ? v.split(' ').filter((w) => w) : []);
const geistArgs = words(arg('--geist-args', ''));
const llamaArgs = words(arg('--llama-args', ''));
for (const [k, v] of [['--requests', nReq], ['--system-tokens', sysTokens], ['--gen', gen], ['--parallel', parallel], ...concs.map((c) => ['--concurrency', c])]) {
  if (!Number.isInteger(v) || v < 1 || v > 100000) { console.error(`${k}: expected a positive integer, got ${v}`); process.exit(2); }
}
const geistBin = process.env.GEIST_BIN || path.resolve(import.meta.dirname, '../build/dev/bin/geist');
const llamaBin = process.env.LLAMA_SERVER ||
  (process.env.LLAMA_CPP_DIR ? path.join(process.env.LLAMA_CPP_DIR, 'bin/llama-server') : '/tmp/llama.cpp/build/bin/llama-server');

const freePort = () => new Promise((res) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });

async function start(bin, args, port) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`${bin} exited: ${log.slice(-2000)}`);
    try { if ((await fetch(base + '/health')).status === 200) break; } catch { /* starting */ }
    if (i > 6000) throw new Error(`${bin} did not get ready`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { base, proc, stop: () => new Promise((r) => { proc.once('exit', r); proc.kill('SIGTERM'); }) };
}

async function tokenCount(base, text) {
  const r = await fetch(base + '/tokenize', { method: 'POST', body: JSON.stringify({ content: text }) });
  return (await r.json()).tokens.length;
}

// One streamed request; a request the server fails (a status other than 200, a connection closed
// mid-stream) comes back as { failed } and is counted, not fatal: the other rows still print.
async function one(base, messages) {
  try {
    return await stream(base, messages);
  } catch (e) {
    return { failed: String(e?.cause?.code ?? e?.message ?? e) };
  }
}

async function stream(base, messages) {
  const t0 = performance.now();
  const r = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: gen, temperature: 0, stream: true, stream_options: { include_usage: true },
                           ignore_eos: true, cache_prompt: true }) });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '', ttft = null, usage = null, timings = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const f = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!f.startsWith('data: ') || f === 'data: [DONE]') continue;
      const c = JSON.parse(f.slice(6));
      if (c.usage) usage = c.usage;
      if (c.timings) timings = c.timings;
      if (ttft === null && c.choices?.[0]?.delta?.content) ttft = performance.now() - t0;
    }
  }
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? timings?.cache_n ?? 0;
  return { ttft: ttft ?? performance.now() - t0, tokens: usage?.completion_tokens ?? timings?.predicted_n ?? 0, cached,
           prompt_ms: timings?.prompt_ms, restore_ms: timings?.cache_restore_ms, checkpoint_ms: timings?.checkpoint_ms };
}

// The median of the numbers in v (undefined entries left out), or null when there are none.
function median(v) {
  const n = v.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  return n.length ? n[Math.floor((n.length - 1) / 2)] : null;
}

async function workload(base) {
  // A system prompt of about sysTokens tokens, measured with the server's own tokenizer.
  const unit = 'The assistant answers questions about the history of rivers, bridges and the towns built on them. ';
  const per = await tokenCount(base, unit);
  const system = unit.repeat(Math.max(1, Math.round(sysTokens / per)));
  const qs = Array.from({ length: nReq }, (_, i) => `Question ${i}: ` + 'why did the town by the old bridge grow so fast? '.repeat(3));
  const rows = [];
  for (const c of concs) {
    let next = 0;
    const res = [];
    const t0 = performance.now();
    await Promise.all(Array.from({ length: c }, async () => {
      while (next < qs.length) {
        const q = qs[next++];
        res.push(await one(base, [{ role: 'system', content: system }, { role: 'user', content: q }]));
      }
    }));
    const wall = (performance.now() - t0) / 1000;
    const failed = res.filter((r) => r.failed);
    if (failed.length) console.error(`${c} clients: ${failed.length} requests failed (${[...new Set(failed.map((r) => r.failed))].join(', ')})`);
    const ok = res.filter((r) => !r.failed);
    const tt = ok.map((r) => r.ttft).sort((a, b) => a - b);
    rows.push({ concurrency: c, mean_ttft_ms: tt.reduce((a, b) => a + b, 0) / tt.length,
                p50_ttft_ms: tt[Math.floor(0.5 * (tt.length - 1))],
                p99_ttft_ms: tt[Math.min(tt.length - 1, Math.floor(0.99 * tt.length))],
                tok_s: ok.reduce((a, r) => a + r.tokens, 0) / wall,
                cached_tokens: ok.reduce((a, r) => a + r.cached, 0),
                failed: failed.length,
                // The server's own timings (median over the requests that report them): where a
                // TTFT goes on the server side.
                server_prompt_ms: median(ok.map((r) => r.prompt_ms)),
                server_restore_ms: median(ok.map((r) => r.restore_ms)),
                server_checkpoint_ms: median(ok.map((r) => r.checkpoint_ms)) });
  }
  return rows;
}

const out = {};
{
  const port = await freePort();
  const s = await start(geistBin, ['serve', '-m', model, '--port', String(port), '-t', threads, '--parallel', String(parallel), '--ctx', String(sysTokens + 512), ...geistArgs], port);
  out.geist = await workload(s.base);
  await s.stop();
}
if (existsSync(llamaBin)) {
  const port = await freePort();
  const s = await start(llamaBin, ['-m', model, '--port', String(port), '-t', threads, '-np', String(parallel), '-c', String(parallel * (sysTokens + 512)), '--no-webui', ...llamaArgs], port);
  out['llama-server'] = await workload(s.base);
  await s.stop();
} else {
  console.error(`llama-server not found at ${llamaBin} (set LLAMA_CPP_DIR): geist only`);
}
console.log(`model ${model}, ${threads} threads, ${parallel} sequences, ${nReq} requests, system prompt ~${sysTokens} tokens, ${gen} generated`);
console.log('server        conc  mean TTFT ms  p50 TTFT ms  p99 TTFT ms   tok/s  cached tokens  failed');
const num = (v, w) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(1) : '-').padStart(w);
for (const [name, rows] of Object.entries(out)) {
  for (const r of rows) {
    console.log(`${name.padEnd(13)} ${String(r.concurrency).padStart(4)}  ${num(r.mean_ttft_ms, 12)}  ${num(r.p50_ttft_ms, 11)}  ${num(r.p99_ttft_ms, 11)}  ${num(r.tok_s, 6)}  ${String(r.cached_tokens).padStart(13)}  ${String(r.failed).padStart(6)}`);
  }
}
console.log('server-side medians (the timings field): prompt_ms / cache_restore_ms / checkpoint_ms');
const ms = (v) => (v === null ? '-' : v.toFixed(1));
for (const [name, rows] of Object.entries(out)) {
  for (const r of rows) {
    console.log(`${name.padEnd(13)} ${String(r.concurrency).padStart(4)}  ${ms(r.server_prompt_ms)} / ${ms(r.server_restore_ms)} / ${ms(r.server_checkpoint_ms)}`);
  }
}
if (out['llama-server']) {
  for (let i = 0; i < out.geist.length; i++) {
    const g = out.geist[i], l = out['llama-server'][i];
    console.log(`concurrency ${g.concurrency}: TTFT ${(g.mean_ttft_ms / l.mean_ttft_ms).toFixed(2)}x llama-server's, throughput ${(g.tok_s / l.tok_s).toFixed(2)}x`);
  }
}
console.log(JSON.stringify(out));
