'use strict';
// Shared by the SDK's tests: a live `brig serve` they start themselves, a
// server that lies (canned answers on a unix socket, every request logged),
// crafted tars.

const assert = require('node:assert');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { header } = require('../lib/tar');

function scratch(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(d, 0o755);
  return d;
}

// brig serve --socket DIR/serve.sock as the current user; BRIG_BIN names
// the brig to run (tests/integration/test_sdk_typescript.py sets it).
async function startServe(extra = []) {
  const brig = process.env.BRIG_BIN || path.resolve(__dirname, '../../../build/brig');
  const dir = scratch('brig-serve-ts-');
  const socket = path.join(dir, 'serve.sock');
  const log = fs.openSync(path.join(dir, 'serve.log'), 'w');
  const env = { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin', HOME: dir, LANG: 'C.UTF-8', XDG_RUNTIME_DIR: dir };
  const proc = spawn(brig, ['serve', '--socket', socket, '--remove-on-exit', ...extra], { cwd: dir, env, stdio: ['ignore', log, log] });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const deadline = Date.now() + 20000;
  for (;;) {
    if (await connects(socket)) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`brig serve did not come up: ${fs.readFileSync(path.join(dir, 'serve.log'), 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    socket,
    dir,
    proc,
    // the brig CLI with the server's state (brig pool for its pools): its stdout
    brig(...args) { return execFileSync(brig, args, { cwd: dir, env, encoding: 'utf8' }); },
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await exited;
      }
      fs.closeSync(log);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function connects(socket) {
  return new Promise((resolve) => {
    const s = net.connect(socket);
    s.on('connect', () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  });
}

// answers: { 'path suffix': [status, contentType, Buffer] }
async function lyingServer(answers) {
  const dir = scratch('brig-liar-ts-');
  const socket = path.join(dir, 'serve.sock');
  const requests = [];
  const srv = http.createServer((req, res) => {
    const body = [];
    req.on('data', (c) => body.push(c));
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(body) });
      const p = req.url.split('?')[0];
      const hit = Object.entries(answers).find(([suffix]) => p.endsWith(suffix));
      if (hit && typeof hit[1] === 'function') return hit[1](req, res);
      const [status, ctype, data] = hit ? hit[1] : [404, 'application/json', Buffer.from('{"error":{"code":"not_found","message":"no","details":null}}')];
      res.writeHead(status, { 'Content-Type': ctype, 'Content-Length': data.length });
      res.end(data);
    });
  });
  await new Promise((resolve) => srv.listen(socket, resolve));
  return {
    socket,
    dir,
    requests,
    async stop() {
      srv.closeAllConnections?.();
      await new Promise((resolve) => srv.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

const TYPES = { file: '0', sym: '2', hard: '1', chr: '3', dir: '5', fifo: '6' };

// entries: { name, type, data, linkname, mode }
function craftedTar(entries) {
  const out = [];
  for (const e of entries) {
    const data = Buffer.from(e.data || '');
    const type = TYPES[e.type || 'file'];
    const size = type === '0' ? data.length : 0;
    out.push(...header(e.name, { mode: e.mode ?? 0o644, size, type, linkname: e.linkname || '' }));
    if (size) out.push(data, Buffer.alloc((512 - (size % 512)) % 512));
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

function sandboxJson(name) {
  return Buffer.from(JSON.stringify({ name, status: 'running', owner_uid: 0 }));
}

// Links below root whose target resolves outside it.
function linksLeaving(root) {
  const real = fs.realpathSync(root);
  const bad = [];
  const walk = (d) => {
    for (const n of fs.readdirSync(d)) {
      const p = path.join(d, n);
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink()) {
        let r;
        try { r = fs.realpathSync(p); } catch (_) { r = path.resolve(path.dirname(p), fs.readlinkSync(p)); }
        if (r !== real && !r.startsWith(`${real}/`)) bad.push([path.relative(root, p), fs.readlinkSync(p), r]);
      } else if (st.isDirectory()) walk(p);
    }
  };
  walk(root);
  return bad;
}

module.exports = { scratch, startServe, lyingServer, craftedTar, sandboxJson, linksLeaving, assert };
