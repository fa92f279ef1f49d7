// Starts `geist serve` on a free localhost port for a test file and stops it afterwards.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const fixtures = process.env.GEIST_FIXTURES ||
  path.resolve(import.meta.dirname, '../../../shared/fixtures');
export const bin = process.env.GEIST_BIN ||
  path.resolve(import.meta.dirname, '../../build/dev/bin/geist');

export const MODELS = ['stories260K.gguf', 'stories-qwen35-f32.gguf'];

// Fixtures missing: fail when GEIST_REQUIRE_FIXTURES=1, else skip loudly.
export function modelPath(name) {
  const p = path.join(fixtures, 'models', name);
  if (!existsSync(p)) {
    if (process.env.GEIST_REQUIRE_FIXTURES === '1') {
      throw new Error(`fixtures required (GEIST_REQUIRE_FIXTURES=1) but ${p} is missing`);
    }
    return null;
  }
  return p;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function startServer(model, extra = []) {
  const port = await freePort();
  const args = ['serve', '-m', model, '--port', String(port), '-t', '1', ...extra];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`geist serve exited ${proc.exitCode}: ${log}`);
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`geist serve did not get ready: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base,
    port,
    proc,
    log: () => log,
    async stop() {
      if (proc.exitCode !== null) return;
      const done = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await done;
    },
  };
}

export async function post(base, p, body, headers = {}) {
  const r = await fetch(base + p, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}
