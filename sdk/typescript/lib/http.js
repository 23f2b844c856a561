'use strict';
// HTTP/1.1 to brig serve over its unix socket or loopback TCP (Node's http).
//
// The SDK trusts a server only as far as its own user does. Node cannot
// read SO_PEERCRED, so before it connects the socket file itself must be
// owned by the caller or root, and every directory above it too, none
// writable by group or others unless sticky (/tmp): nobody else can have
// put a server there nor swap it afterwards. A socket another local user
// planted (a shared /tmp, a stale BRIG_SOCKET) is refused before a byte of
// a request goes to it. Over TCP the token goes only to a loopback
// address; redirects are never followed (Node's http does not).

const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const errors = require('./errors');

// The biggest body the SDK buffers (files.read answers up to the engine's
// 64 MiB cap, plus JSON); bigger is refused rather than taking the
// caller's memory at a server's or a sandbox's word.
const MAX_BODY = 80 << 20;
const MAX_LINE = 16 << 20;

function uid() {
  return typeof process.geteuid === 'function' ? process.geteuid() : -1;
}

// Where brig serve listens by default (docs/serve.md).
function defaultSocket() {
  if (uid() === 0) return '/run/brig-serve/serve.sock';
  if (process.env.XDG_RUNTIME_DIR) return path.join(process.env.XDG_RUNTIME_DIR, 'brig-serve', 'serve.sock');
  return `/tmp/brig-serve-${uid()}/serve.sock`;
}

function checkLoopbackUrl(url) {
  let u;
  try {
    u = new URL(url);
  } catch (e) {
    throw new errors.ConnectionError(`url ${JSON.stringify(url)}: ${e.message}`, { code: 'bad_url' });
  }
  if (u.protocol !== 'http:' || u.username || u.search || (u.pathname !== '/' && u.pathname !== '')) {
    throw new errors.ConnectionError(`url ${JSON.stringify(url)}: expected http://127.0.0.1:PORT (brig serve --listen)`,
      { code: 'bad_url' });
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const loop = host === 'localhost' || host === '::1' || (net.isIPv4(host) && host.startsWith('127.'));
  if (!loop) {
    // The token would cross a network in the clear: brig serve listens on
    // loopback only, so anything else is not it.
    throw new errors.ConnectionError(`url ${JSON.stringify(url)}: not a loopback address; brig serve --listen takes ` +
      '127.0.0.1 or [::1] only, and the token is never sent elsewhere', { code: 'bad_url' });
  }
  return { host, port: Number(u.port || 80) };
}

// The socket and the directories above it are the caller's or root's, and
// none is open to others (see the top of this file).
function checkSocketPath(sock) {
  const me = uid();
  const trusted = (st) => st.uid === me || st.uid === 0;
  let st;
  try {
    st = fs.lstatSync(sock);
  } catch (e) {
    const hint = e.code === 'ENOENT' ? ' (is `brig serve` running? it listens there by default; or set BRIG_SOCKET)' : '';
    throw new errors.ConnectionError(`${sock}: ${e.message}${hint}`, { code: 'connection' });
  }
  if (!st.isSocket()) {
    throw new errors.ConnectionError(`${sock}: not a unix socket`, { code: 'connection' });
  }
  if (!trusted(st)) {
    throw new errors.ConnectionError(`${sock}: the socket is owned by uid ${st.uid}, not by you (uid ${me}) or root: ` +
      'refusing to talk to it; start your own `brig serve`, or pass socket= the one you meant',
    { code: 'untrusted_server' });
  }
  let dir = path.dirname(path.resolve(sock));
  for (;;) {
    const d = fs.statSync(dir);
    const openToOthers = (d.mode & 0o022) !== 0 && (d.mode & 0o1000) === 0;
    if (!trusted(d) || openToOthers) {
      throw new errors.ConnectionError(`${sock}: its directory ${dir} is ${trusted(d) ? 'writable by others' : `owned by uid ${d.uid}`}: ` +
        'another user could have put a server there; refusing to talk to it', { code: 'untrusted_server' });
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
}

function qs(query) {
  if (!query) return '';
  const parts = [];
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null) continue;
    for (const one of Array.isArray(v) ? v : [v]) {
      parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(typeof one === 'boolean' ? String(one) : String(one))}`);
    }
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

class Transport {
  constructor({ socket, url, token, timeout = 120000, maxBody = MAX_BODY } = {}) {
    if (socket && url) throw new errors.ConnectionError('give socket or url, not both', { code: 'bad_url' });
    if (!socket && !url) {
      url = process.env.BRIG_URL || undefined;
      if (!url) socket = process.env.BRIG_SOCKET || defaultSocket();
    }
    if (url && token === undefined) token = process.env.BRIG_TOKEN || undefined;
    if (url) {
      Object.assign(this, checkLoopbackUrl(url));
      if (!token) {
        throw new errors.ConnectionError(`url ${JSON.stringify(url)} needs a token (or BRIG_TOKEN): brig serve --listen ` +
          "answers nothing without its --token-file's token", { code: 'no_token' });
      }
      this.where = url;
    } else {
      this.socket = socket;
      this.where = socket;
    }
    this.token = token;
    this.timeout = timeout;
    this.maxBody = maxBody;
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  }

  close() {
    this.agent.destroy();
  }

  _send(method, p, { query, json, body, headers, timeout } = {}) {
    const hdrs = { Accept: 'application/json', ...(headers || {}) };
    if (this.token) hdrs.Authorization = `Bearer ${this.token}`;
    let data = body;
    if (json !== undefined) {
      data = Buffer.from(JSON.stringify(json));
      hdrs['Content-Type'] = hdrs['Content-Type'] || 'application/json';
    } else if (body !== undefined && body !== null) {
      hdrs['Content-Type'] = hdrs['Content-Type'] || 'application/octet-stream';
    }
    if (data !== undefined && data !== null) hdrs['Content-Length'] = String(data.length);
    const opts = { method, path: p + qs(query), headers: hdrs, agent: this.agent };
    if (this.socket) {
      checkSocketPath(this.socket);
      opts.socketPath = this.socket;
    } else {
      opts.host = this.host;
      opts.port = this.port;
    }
    return new Promise((resolve, reject) => {
      const req = http.request(opts, resolve);
      req.on('error', (e) => reject(e instanceof errors.BrigError ? e
        : new errors.ConnectionError(`${this.where}: ${e.message}`, { code: 'connection' })));
      if (timeout) {
        req.setTimeout(timeout, () => req.destroy(new Error(`no answer within ${timeout} ms`)));
      }
      req.end(data);
    });
  }

  async _readBody(res) {
    const len = Number(res.headers['content-length']);
    if (len > this.maxBody) {
      res.destroy();
      throw new errors.ProtocolError(`the server's answer is ${len} bytes, more than the SDK's maxBody (${this.maxBody}); ` +
        'raise new Client({maxBody})', { code: 'too_large', status: res.statusCode });
    }
    const parts = [];
    let n = 0;
    try {
      for await (const c of res) {
        n += c.length;
        if (n > this.maxBody) {
          res.destroy();
          throw new errors.ProtocolError(`the server's answer is more than the SDK's maxBody (${this.maxBody} bytes); ` +
            'raise new Client({maxBody})', { code: 'too_large', status: res.statusCode });
        }
        parts.push(c);
      }
    } catch (e) {
      if (e instanceof errors.BrigError) throw e;
      throw new errors.ConnectionError(`${this.where}: reading the answer: ${e.message}`, { code: 'connection' });
    }
    return Buffer.concat(parts);
  }

  // One request read whole; an error status throws its BrigError.
  async request(method, p, opts = {}) {
    const timeout = opts.timeout === undefined ? this.timeout : opts.timeout;
    const res = await this._send(method, p, { ...opts, timeout });
    const body = await this._readBody(res);
    if (res.statusCode >= 300) throw errors.fromBody(res.statusCode, body, res.statusMessage);
    return {
      status: res.statusCode,
      headers: res.headers,
      body,
      json() {
        try {
          return JSON.parse(body.toString('utf8'));
        } catch (e) {
          throw new errors.ProtocolError(`the server's answer is not JSON: ${e.message}`, { code: 'protocol' });
        }
      },
    };
  }

  // A response read as it comes (no timeout: a quiet command is not a dead
  // server). Returns the IncomingMessage.
  async stream(method, p, opts = {}) {
    const res = await this._send(method, p, { ...opts, timeout: opts.timeout || 0 });
    if (res.statusCode >= 300) {
      const body = await this._readBody(res);
      throw errors.fromBody(res.statusCode, body, res.statusMessage);
    }
    return res;
  }
}

// Each NDJSON line of a response as a decoded object. A partial line is
// kept as its pieces (no copying per chunk) and bounded by MAX_LINE.
async function* lines(res) {
  let parts = [];
  let held = 0;
  try {
    for await (const chunk of res) {
      let from = 0;
      let i;
      while ((i = chunk.indexOf(10, from)) >= 0) {
        parts.push(chunk.subarray(from, i));
        const line = Buffer.concat(parts).toString('utf8').trim();
        parts = [];
        held = 0;
        from = i + 1;
        if (line) yield parseLine(line);
      }
      if (from < chunk.length) {
        parts.push(chunk.subarray(from));
        held += chunk.length - from;
        if (held > MAX_LINE) throw new errors.ProtocolError(`a stream line longer than ${MAX_LINE} bytes`, { code: 'protocol' });
      }
    }
  } catch (e) {
    if (e instanceof errors.BrigError) throw e;
    throw new errors.ConnectionError(`the stream broke: ${e.message}`, { code: 'connection' });
  } finally {
    if (!res.complete) res.destroy(); // a stream left mid-way: the command keeps running
  }
  const rest = Buffer.concat(parts).toString('utf8').trim();
  if (rest) yield parseLine(rest);
}

function parseLine(line) {
  try {
    return JSON.parse(line);
  } catch (e) {
    throw new errors.ProtocolError(`a stream line is not JSON: ${e.message}`, { code: 'protocol' });
  }
}

const seg = (s) => encodeURIComponent(String(s));

module.exports = { Transport, lines, defaultSocket, checkSocketPath, seg, MAX_BODY };
