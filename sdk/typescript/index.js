'use strict';
// brig — the TypeScript/JavaScript SDK of brig serve (docs/serve.md,
// sdk/typescript/README.md). Node 18 or newer; no dependencies. The routes
// and objects are docs/api/openapi.json's; this module gives them
// JavaScript shapes (async, async iterables). Nothing here decides what a
// sandbox may do: the server and libbrig do.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const errors = require('./lib/errors');
const { Transport, lines, defaultSocket, seg } = require('./lib/http');
const tar = require('./lib/tar');

function b64(s) {
  if (!s) return Buffer.alloc(0);
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) {
    throw new errors.ProtocolError('a *_b64 field is not base64', { code: 'protocol' });
  }
  return Buffer.from(s, 'base64');
}

// How a command ended (the server's Result) and what it wrote.
class Result {
  constructor(res, stdout = Buffer.alloc(0), stderr = Buffer.alloc(0), outputDropped = 0) {
    if (!res || typeof res !== 'object' || res.exit_code === undefined || res.reason === undefined) {
      throw new errors.ProtocolError(`an exec result without exit_code/reason: ${JSON.stringify(res)}`.slice(0, 300), { code: 'protocol' });
    }
    this.exitCode = Number(res.exit_code);
    this.reason = String(res.reason);
    this.signal = Number(res.signal || 0);
    this.summary = res.summary || '';
    this.refusals = Array.isArray(res.refusals) ? res.refusals.map(String) : [];
    this.warning = res.warning || '';
    this.error = res.error ?? null;
    this.durationMs = res.duration_ms ?? null;
    this.report = res.report ?? null;
    this.stdoutBytes = stdout;
    this.stderrBytes = stderr;
    this.outputDropped = outputDropped;
    this.raw = res;
  }

  get stdout() { return this.stdoutBytes.toString('utf8'); }

  get stderr() { return this.stderrBytes.toString('utf8'); }

  get ok() { return this.exitCode === 0 && this.reason === 'exited'; }

  get usage() {
    const rep = this.report || {};
    const out = {};
    for (const k of ['duration_ms', 'cpu_user_ms', 'cpu_system_ms', 'memory_peak_bytes', 'pids_peak']) {
      if (k in rep) out[k] = rep[k];
    }
    if (this.durationMs !== null && !('duration_ms' in out)) out.duration_ms = this.durationMs;
    return out;
  }

  check() {
    if (!this.ok) throw new errors.CommandFailed(this);
    return this;
  }
}

function execBody(cmd, o = {}) {
  const body = {};
  if (typeof cmd === 'string') body.cmd = cmd;
  else if (Array.isArray(cmd) && cmd.length > 0) body.argv = cmd.map(String);
  else throw new errors.BadRequest('a command is an argv array or a shell string', { code: 'bad_request' });
  if (o.env) body.env = Object.fromEntries(Object.entries(o.env).map(([k, v]) => [k, String(v)]));
  if (o.cwd !== undefined) body.cwd = o.cwd;
  if (o.timeout !== undefined) body.timeout_ms = Math.max(0, Math.round(o.timeout));
  if (o.tty) {
    body.tty = true;
    if (o.rows) body.rows = o.rows;
    if (o.cols) body.cols = o.cols;
  }
  if (o.stdin && !o.tty) body.stdin = true;
  if (o.input !== undefined) {
    if (typeof o.input === 'string') body.input = o.input;
    else body.input_b64 = Buffer.from(o.input).toString('base64');
  }
  return body;
}

// Reads an exec's NDJSON events: output chunks until `exit`. Only the
// documented event types are taken; the result is the `exit` event's own
// object — a command's bytes live only inside a `data` string, so nothing
// it prints can pass for an event.
async function* outputEvents(res, state) {
  for await (const ev of lines(res)) {
    if (!ev || typeof ev !== 'object') throw new errors.ProtocolError('an output event that is not an object', { code: 'protocol' });
    if (ev.type === 'stdout' || ev.type === 'stderr') {
      state.events += 1;
      const data = 'data_b64' in ev ? b64(ev.data_b64) : Buffer.from(String(ev.data ?? ''), 'utf8');
      yield { stream: ev.type, data, get text() { return data.toString('utf8'); } };
    } else if (ev.type === 'start') {
      state.exec = ev.exec || null;
    } else if (ev.type === 'exit') {
      state.result = new Result(ev.result);
    } else if (ev.type === 'error') {
      const e = ev.error;
      if (e && typeof e === 'object') throw errors.errorForStatus(0, String(e.code ?? 'error'), String(e.message ?? ''), e.details ?? null);
      throw new errors.BrigError(`the output stream ended: ${e}`, { code: 'stream_error' });
    }
    // other types: newer servers may add some; they are not output.
  }
}

// sb.stream(cmd): `for await (const chunk of stream)`; then stream.result.
class OutputStream {
  constructor(resPromise) {
    this._res = resPromise;
    this._state = { events: 0, result: null, exec: null };
  }

  get result() { return this._state.result; }

  get id() { return this._state.exec ? this._state.exec.id : undefined; }

  async* [Symbol.asyncIterator]() {
    yield* outputEvents(await this._res, this._state);
  }

  // Read to the end; resolves to the Result with the output collected.
  async collect() {
    const out = [];
    const err = [];
    for await (const c of this) (c.stream === 'stdout' ? out : err).push(c.data);
    const r = this.result;
    if (!r) throw new errors.ProtocolError('the output stream ended without an exit event', { code: 'protocol' });
    r.stdoutBytes = Buffer.concat(out);
    r.stderrBytes = Buffer.concat(err);
    return r;
  }
}

// A command started with sb.start() (alias sb.exec()): it runs in the
// background, between requests, until it ends or is killed.
class Process {
  constructor(sandbox, info) {
    this.sandbox = sandbox;
    this.id = String(info.id);
    this.info = info;
    this._result = null;
    this.stdin = { write: (d) => this.write(d), end: () => this.closeStdin() };
  }

  get _path() { return `${this.sandbox._path}/execs/${seg(this.id)}`; }

  get _t() { return this.sandbox._t; }

  // Its output chunks from `offset` (a count already read); live until it
  // ends unless follow is false.
  async* output({ follow = true, offset = 0 } = {}) {
    const state = { events: 0, result: null, exec: null };
    const res = await this._t.stream('GET', `${this._path}/output`, { query: { follow, offset: offset || undefined } });
    yield* outputEvents(res, state);
    if (state.result) this._result = state.result;
  }

  [Symbol.asyncIterator]() { return this.output(); }

  // Write to its stdin; resolves to the bytes written.
  async write(data, { eof = false } = {}) {
    const body = typeof data === 'string' ? { data, eof } : { data_b64: Buffer.from(data).toString('base64'), eof };
    return (await this._t.request('POST', `${this._path}/stdin`, { json: body })).json().written;
  }

  async closeStdin() {
    await this._t.request('POST', `${this._path}/stdin`, { json: { eof: true } });
  }

  // A signal: a number or a name ('TERM', 'SIGINT' ...).
  async signal(sig = 'TERM') {
    await this._t.request('POST', `${this._path}/signal`, { json: { signal: sig } });
  }

  async kill(sig = 'KILL') { return this.signal(sig); }

  async resize(rows, cols) {
    await this._t.request('POST', `${this._path}/resize`, { json: { rows, cols } });
  }

  // Its Result once it ended; null if `timeout` (ms) passed first.
  async wait({ timeout } = {}) {
    if (this._result) return this._result;
    const body = timeout === undefined ? {} : { timeout_ms: Math.max(0, Math.round(timeout)) };
    return this._take((await this._t.request('POST', `${this._path}/wait`, { json: body, timeout: 0 })).json());
  }

  async poll() {
    if (this._result) return this._result;
    return this._take((await this._t.request('GET', this._path)).json());
  }

  _take(info) {
    this.info = info;
    if (info.state === 'exited' && info.result) this._result = new Result(info.result, undefined, undefined, Number(info.output_dropped || 0));
    return this._result;
  }

  // Kill it if it still runs and let the server free its output.
  async forget() {
    await this._t.request('DELETE', this._path);
  }
}

// sb.files: the sandbox's files as the sandbox sees them.
class Files {
  constructor(sandbox) { this._sb = sandbox; }

  get _t() { return this._sb._t; }

  get _path() { return `${this._sb._path}/files`; }

  async read(p) {
    return (await this._t.request('GET', this._path, { query: { path: p }, headers: { Accept: 'application/octet-stream' } })).body;
  }

  async readText(p) { return (await this.read(p)).toString('utf8'); }

  async write(p, data, { mode = 0o644 } = {}) {
    const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    return (await this._t.request('PUT', this._path, { query: { path: p, mode: mode.toString(8).padStart(4, '0') }, body })).json().bytes;
  }

  async list(p) { return (await this._t.request('GET', `${this._path}/list`, { query: { path: p } })).json().entries; }

  async stat(p) { return (await this._t.request('GET', `${this._path}/stat`, { query: { path: p } })).json(); }

  async exists(p) {
    try {
      await this.stat(p);
      return true;
    } catch (e) {
      if (e instanceof errors.NotFound) return false;
      throw e;
    }
  }

  async mkdir(p, { mode = 0o755 } = {}) {
    await this._t.request('POST', `${this._path}/mkdir`, { query: { path: p, mode: mode.toString(8).padStart(4, '0') } });
  }

  async remove(p) { await this._t.request('DELETE', this._path, { query: { path: p } }); }

  // The directory and its missing parents (an existing one is fine).
  async makedirs(p, { mode = 0o755 } = {}) {
    const parts = p.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const d = `/${parts.slice(0, i).join('/')}`;
      try {
        if ((await this.stat(d)).type === 'dir') continue;
      } catch (e) {
        if (!(e instanceof errors.NotFound)) throw e;
      }
      await this.mkdir(d, { mode });
    }
  }

  // Copy a host file or directory into the sandbox directory remoteDir
  // (made if missing). Host links go as links, never followed.
  async upload(local, remoteDir) {
    const arc = fs.statSync(local).isDirectory() ? '.' : path.basename(local);
    await this.makedirs(remoteDir);
    const body = tar.pack(local, arc);
    await this._t.request('PUT', `${this._path}/tar`, { query: { path: remoteDir }, body, headers: { 'Content-Type': 'application/x-tar' }, timeout: 0 });
  }

  // The sandbox directory as tar bytes, unopened (untrusted).
  async downloadTar(remoteDir) {
    return (await this._t.request('GET', `${this._path}/tar`, { query: { path: remoteDir }, headers: { Accept: 'application/x-tar' }, timeout: 0 })).body;
  }

  // Copy the sandbox directory remoteDir into the host directory localDir
  // (made if missing); nothing is written outside localDir whatever the
  // archive says (lib/tar.js).
  async download(remoteDir, localDir, { maxBytes, maxEntries } = {}) {
    const res = await this._t.stream('GET', `${this._path}/tar`, { query: { path: remoteDir }, headers: { Accept: 'application/x-tar' } });
    try {
      const { paths, skipped } = await tar.extract(res, localDir, { maxBytes, maxEntries });
      return { dest: localDir, paths, skipped };
    } finally {
      if (!res.complete) res.destroy();
    }
  }
}

// sb.network: the egress rules of the running sandbox, changed live.
class Network {
  constructor(sandbox) { this._sb = sandbox; }

  async get() { return (await this._sb._t.request('GET', `${this._sb._path}/network`)).json(); }

  async allow(host) { return this._rule('POST', 'allow', host); }

  async deny(host) { return this._rule('POST', 'deny', host); }

  async remove(host, action = 'allow') { return this._rule('DELETE', action, host); }

  async _rule(method, action, host) {
    return (await this._sb._t.request(method, `${this._sb._path}/network/rules`, { json: { action, host } })).json();
  }
}

// The Result of an exec answered at its end (wait).
function finished(done) {
  if (!done.result) throw new errors.ProtocolError('a finished exec without a result', { code: 'protocol' });
  const out = 'stdout_b64' in done ? b64(done.stdout_b64) : Buffer.from(String(done.stdout ?? ''));
  const err = 'stderr_b64' in done ? b64(done.stderr_b64) : Buffer.from(String(done.stderr ?? ''));
  return new Result(done.result, out, err, Number(done.output_dropped || 0));
}

// A connection to one brig serve: the default socket, BRIG_URL +
// BRIG_TOKEN, BRIG_SOCKET, or { socket } / { url, token | tokenFile }.
class Client {
  constructor(opts = {}) {
    let { token } = opts;
    if (opts.tokenFile && token === undefined) token = fs.readFileSync(opts.tokenFile, 'utf8').trim();
    this._t = new Transport({ socket: opts.socket, url: opts.url, token, timeout: opts.timeout, maxBody: opts.maxBody });
  }

  async health() { return (await this._t.request('GET', '/v1/health')).json(); }

  async version() { return (await this._t.request('GET', '/v1/version')).json(); }

  async doctor() { return (await this._t.request('GET', '/v1/doctor', { timeout: 0 })).json(); }

  async list() {
    return (await this._t.request('GET', '/v1/sandboxes')).json().sandboxes.map((r) => new Sandbox(this, r.name, r));
  }

  async create({ policy, profile, workspace, overlay = true, name, audit = true } = {}) {
    const body = { workspace_mode: overlay ? 'overlay' : 'bind', audit };
    if (name !== undefined) body.name = name;
    if (policy !== undefined) body.policy = policy;
    if (profile !== undefined) body.profile = profile;
    if (workspace !== undefined) body.workspace = path.resolve(workspace);
    const info = (await this._t.request('POST', '/v1/sandboxes', { json: body, timeout: 0 })).json();
    return new Sandbox(this, info.name, info);
  }

  // The server's warm pools (brig pool --size N --name NAME, started as
  // the server's user): names, size, members ready and in use, failing.
  async pools() { return (await this._t.request('GET', '/v1/pools')).json().pools; }

  // Run a command to its end in a fresh sandbox: a ready member of the
  // warm pool named `pool`, as the pool made it (its policy, workspace and
  // environment; opts.env and opts.cwd on top). The member serves this run
  // only and goes with what the command left. NotFound when no pool has
  // the name, Conflict when it cannot serve, ServerError (504)
  // when no member became ready within 30 s.
  async runInPool(pool, cmd, opts = {}) {
    const body = { ...execBody(cmd, opts), wait: true };
    return finished((await this._t.request('POST', `/v1/pools/${seg(pool)}/execs`, { json: body, timeout: 0 })).json());
  }

  async connect(name) {
    const sb = new Sandbox(this, name, {});
    await sb.refresh();
    return sb;
  }

  close() { this._t.close(); }
}

const CONNECT_KEYS = ['socket', 'url', 'token', 'tokenFile', 'timeout', 'maxBody'];
let defaultClient = null;

function clientFor(opts) {
  if (opts.client) return opts.client;
  if (CONNECT_KEYS.some((k) => opts[k] !== undefined)) return new Client(opts);
  if (!defaultClient) defaultClient = new Client();
  return defaultClient;
}

class Sandbox {
  constructor(client, name, info) {
    this.client = client;
    this.name = name;
    this.info = info;
    this.files = new Files(this);
    this.network = new Network(this);
  }

  get _t() { return this.client._t; }

  get _path() { return `/v1/sandboxes/${seg(this.name)}`; }

  // Create and start a sandbox: { policy, profile, workspace, overlay,
  // name, audit } and the connection ({ socket } | { url, token } | { client }).
  // `await using sb = await Sandbox.create()` (or sb.remove()) removes it.
  static async create(opts = {}) { return clientFor(opts).create(opts); }

  static async connect(name, opts = {}) { return clientFor(opts).connect(name); }

  static async list(opts = {}) { return clientFor(opts).list(); }

  // Create one, run fn(sb), remove it whatever happened.
  static async with(opts, fn) {
    const sb = await Sandbox.create(opts);
    try {
      return await fn(sb);
    } finally {
      await sb.remove({ missingOk: true });
    }
  }

  async refresh() {
    this.info = (await this._t.request('GET', this._path)).json();
    return this.info;
  }

  async status() { return (await this.refresh()).status; }

  async remove({ missingOk = false } = {}) {
    try {
      await this._t.request('DELETE', this._path, { timeout: 0 });
    } catch (e) {
      if (!(missingOk && e instanceof errors.NotFound)) throw e;
    }
  }

  async _lifecycle(what) {
    this.info = (await this._t.request('POST', `${this._path}/${what}`, { timeout: 0 })).json();
    return this;
  }

  stop() { return this._lifecycle('stop'); }

  // Start a stopped sandbox again (sb.start(cmd) starts a command).
  startSandbox() { return this._lifecycle('start'); }

  pause() { return this._lifecycle('pause'); }

  resume() { return this._lifecycle('resume'); }

  // Run a command to its end: an argv array or a shell string; options
  // { timeout (ms), env, cwd, input }. Resolves to its Result.
  async run(cmd, opts = {}) {
    const body = { ...execBody(cmd, opts), wait: true };
    return finished((await this._t.request('POST', `${this._path}/execs`, { json: body, timeout: 0 })).json());
  }

  // Run a command and iterate its output as it comes; .result after.
  stream(cmd, opts = {}) {
    const body = { ...execBody(cmd, opts), stream: true };
    return new OutputStream(this._t.stream('POST', `${this._path}/execs`, { json: body }));
  }

  // Start a command in the background: its Process (stdin open unless
  // { stdin: false }).
  async start(cmd, opts = {}) {
    const body = execBody(cmd, { stdin: true, ...opts });
    return new Process(this, (await this._t.request('POST', `${this._path}/execs`, { json: body })).json());
  }

  exec(cmd, opts = {}) { return this.start(cmd, opts); }

  async processes() {
    return (await this._t.request('GET', `${this._path}/execs`)).json().execs.map((r) => new Process(this, r));
  }

  async diff({ paths = [], excludes = [] } = {}) {
    return (await this._t.request('GET', `${this._path}/diff`, { query: { path: paths, exclude: excludes }, timeout: 0 })).json().changes;
  }

  async commit({ paths = [], excludes = [] } = {}) {
    const body = {};
    if (paths.length) body.paths = paths;
    if (excludes.length) body.excludes = excludes;
    return (await this._t.request('POST', `${this._path}/commit`, { json: body, timeout: 0 })).json().changes;
  }

  reset() { return this._lifecycle('reset'); }

  async snapshot(tag) {
    return (await this._t.request('POST', `${this._path}/snapshots`, { json: { tag }, timeout: 0 })).json();
  }

  async snapshots() { return (await this._t.request('GET', `${this._path}/snapshots`)).json().snapshots; }

  async restore(tag) {
    this.info = (await this._t.request('POST', `${this._path}/snapshots/${seg(tag)}/restore`, { timeout: 0 })).json();
    return this;
  }

  async fork(tag, name) {
    const body = { name: name || `${this.name.slice(0, 40)}-fork-${crypto.randomBytes(4).toString('hex')}` };
    const info = (await this._t.request('POST', `${this._path}/snapshots/${seg(tag)}/fork`, { json: body, timeout: 0 })).json();
    return new Sandbox(this.client, info.name, info);
  }

  async removeSnapshot(tag) { await this._t.request('DELETE', `${this._path}/snapshots/${seg(tag)}`); }

  // The audit stream (docs/audit.md) from its start; live unless follow is false.
  async* events({ follow = true } = {}) {
    yield* lines(await this._t.stream('GET', `${this._path}/events`, { query: { follow } }));
  }
}

if (Symbol.asyncDispose) {
  Sandbox.prototype[Symbol.asyncDispose] = function dispose() { return this.remove({ missingOk: true }); };
}

const {
  BrigError, ConnectionError, ProtocolError, BadRequest, Unauthorized, NotFound, Conflict, LimitExceeded, ServerError,
  UnsafeArchive, CommandFailed,
} = errors;

module.exports = {
  Client, Sandbox, Process, Files, Network, Result, OutputStream, defaultSocket,
  BrigError, ConnectionError, ProtocolError, BadRequest, Unauthorized, NotFound, Conflict, LimitExceeded, ServerError,
  UnsafeArchive, CommandFailed,
};
