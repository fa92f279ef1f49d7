// A redis-server for the server tests: on a unix socket in a fresh temp dir, no persistence,
// bounded memory; killed, paused (SIGSTOP), resumed and restarted on demand. Missing
// redis-server: a failure under GEIST_REQUIRE_FIXTURES=1, else the caller skips loudly.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export function redisAvailable() {
  const ok = spawnSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' }).status === 0;
  if (!ok && process.env.GEIST_REQUIRE_FIXTURES === '1') {
    throw new Error('redis-server required (GEIST_REQUIRE_FIXTURES=1) but not on PATH');
  }
  return ok;
}

// One inline command ("DBSIZE", "PING") and its reply line, or null when Redis does not answer
// within `ms`.
export function redisCommand(socket, line, ms = 1000) {
  return new Promise((resolve) => {
    const c = net.createConnection(socket);
    let buf = '';
    const done = (v) => { clearTimeout(t); c.destroy(); resolve(v); };
    const t = setTimeout(() => done(null), ms);
    c.on('error', () => done(null));
    c.on('connect', () => c.write(`${line}\r\n`));
    c.on('data', (d) => {
      buf += d;
      const end = buf.indexOf('\r\n');
      if (end >= 0) done(buf.slice(0, end));
    });
  });
}

export async function startRedis() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'geist-redis-'));
  const socket = path.join(dir, 'redis.sock');
  let proc = null;
  const r = {
    socket,
    url: `unix://${socket}`,
    async start() {
      proc = spawn('redis-server', ['--port', '0', '--unixsocket', socket, '--unixsocketperm', '700',
        '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory', '256mb',
        '--logfile', path.join(dir, 'redis.log')], { stdio: 'ignore' });
      const deadline = Date.now() + 10000;
      while (await redisCommand(socket, 'PING', 200) !== '+PONG') {
        if (proc.exitCode !== null || Date.now() > deadline) throw new Error('redis-server did not start');
        await new Promise((res) => setTimeout(res, 20));
      }
    },
    async kill() {
      if (!proc || proc.exitCode !== null) return;
      const exited = new Promise((res) => proc.once('exit', res));
      proc.kill('SIGKILL');
      await exited;
      rmSync(socket, { force: true });
    },
    pause() { proc?.kill('SIGSTOP'); },
    resume() { proc?.kill('SIGCONT'); },
    async keys() { return Number((await redisCommand(socket, 'DBSIZE'))?.slice(1) ?? -1); },
    async stop() { await r.kill(); rmSync(dir, { recursive: true, force: true }); },
  };
  await r.start();
  return r;
}
