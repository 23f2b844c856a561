'use strict';
// Tar for files.upload() and files.download(), with no dependency.
//
// A download's tar stream is made by the sandbox's own `tar` and relayed
// by the server: both are untrusted here (docs/persistent.md). The reader
// below takes ustar, pax ('x' path/linkpath/size) and GNU long names ('L',
// 'K') and refuses what it cannot read; what it unpacks follows the same
// rules as the Python SDK (sdk/python/brig/_tar.py):
//
// - a name that is absolute, has a `..` component or a NUL is refused;
// - every directory on the way is lstat'ed and refused if it is a link or
//   not a directory (a missing one is made), and every file is created
//   O_CREAT | O_EXCL | O_NOFOLLOW after unlinking what was there, so no
//   link — planted by the archive or already there — is ever written
//   through. (Node has no openat(); the walk is not atomic against another
//   process changing the target meanwhile, which is the caller's own.)
// - symbolic links are made last, only when relative and inside the
//   target judged component by component, with no other link among the
//   components passed through (`up -> ..` then `up/../x` would climb out);
// - hard links only to a regular file already unpacked inside;
// - devices, FIFOs and other special files are never made (listed as
//   skipped); setuid, setgid, sticky and group/other write bits are
//   dropped; owners are never set;
// - at most maxBytes of file data, maxEntries entries.

const fs = require('node:fs');
const path = require('node:path');
const { UnsafeArchive } = require('./errors');

const BLOCK = 512;
const MAX_META = 1 << 20; // a pax header or a GNU long name

function components(name, what = 'archive entry') {
  if (name.includes('\0')) throw new UnsafeArchive(`${what} ${JSON.stringify(name)}: holds a NUL byte`, { code: 'unsafe_archive', details: name });
  if (name.startsWith('/')) throw new UnsafeArchive(`${what} ${JSON.stringify(name)}: absolute name`, { code: 'unsafe_archive', details: name });
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new UnsafeArchive(`${what} ${JSON.stringify(name)}: climbs out with '..'`, { code: 'unsafe_archive', details: name });
  return parts;
}

function cstr(buf, off, len) {
  const b = buf.subarray(off, off + len);
  const z = b.indexOf(0);
  return (z >= 0 ? b.subarray(0, z) : b).toString('utf8');
}

function num(buf, off, len, field) {
  if (buf[off] & 0x80) { // GNU base-256
    let v = 0n;
    for (let i = 1; i < len; i++) v = (v << 8n) | BigInt(buf[off + i]);
    if (buf[off] & 0x40 || v > BigInt(Number.MAX_SAFE_INTEGER)) throw new UnsafeArchive(`bad tar header: ${field} out of range`, { code: 'bad_archive' });
    return Number(v);
  }
  const s = cstr(buf, off, len).trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw new UnsafeArchive(`bad tar header: ${field} ${JSON.stringify(s)} is not octal`, { code: 'bad_archive' });
  return parseInt(s, 8);
}

function parseHeader(h) {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  if (num(h, 148, 8, 'checksum') !== sum) throw new UnsafeArchive('bad tar header: checksum mismatch (not a tar stream, or a corrupt one)', { code: 'bad_archive' });
  let name = cstr(h, 0, 100);
  const magic = h.subarray(257, 263).toString('latin1');
  if (magic.startsWith('ustar')) {
    const prefix = cstr(h, 345, 155);
    if (prefix && magic === 'ustar\0') name = `${prefix}/${name}`;
  }
  return {
    name,
    mode: num(h, 100, 8, 'mode'),
    size: num(h, 124, 12, 'size'),
    mtime: num(h, 136, 12, 'mtime'),
    type: String.fromCharCode(h[156] || 48),
    linkname: cstr(h, 157, 100),
  };
}

function parsePax(buf) {
  const out = {};
  let off = 0;
  while (off < buf.length) {
    const sp = buf.indexOf(32, off);
    if (sp < 0) break;
    const len = parseInt(buf.subarray(off, sp).toString('latin1'), 10);
    if (!(len > 0) || off + len > buf.length) throw new UnsafeArchive('bad pax header', { code: 'bad_archive' });
    const rec = buf.subarray(sp + 1, off + len - 1).toString('utf8');
    const eq = rec.indexOf('=');
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    off += len;
  }
  return out;
}

// Reads a stream of buffers a given number of bytes at a time.
class ByteReader {
  constructor(source) {
    // a response (async iterable) or an array of buffers
    this.it = (source[Symbol.asyncIterator] || source[Symbol.iterator]).call(source);
    this.buf = Buffer.alloc(0);
    this.done = false;
  }

  async fill(n) {
    while (this.buf.length < n && !this.done) {
      const { value, done } = await this.it.next();
      if (done) this.done = true;
      else this.buf = this.buf.length ? Buffer.concat([this.buf, value]) : Buffer.from(value);
    }
    return this.buf.length >= n;
  }

  async take(n) {
    if (!(await this.fill(n))) throw new UnsafeArchive('the tar stream ends in the middle of an entry', { code: 'bad_archive' });
    const b = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return b;
  }

  // Up to n bytes (at least 1), for copying file data as it comes.
  async some(n) {
    if (!(await this.fill(1))) throw new UnsafeArchive('the tar stream ends in the middle of a file', { code: 'bad_archive' });
    const k = Math.min(n, this.buf.length);
    const b = this.buf.subarray(0, k);
    this.buf = this.buf.subarray(k);
    return b;
  }
}

class Unpacker {
  constructor(dest, maxBytes, maxEntries) {
    fs.mkdirSync(dest, { recursive: true });
    this.dest = path.resolve(dest);
    this.maxBytes = maxBytes;
    this.maxEntries = maxEntries;
    this.written = 0;
    this.entries = 0;
    this.paths = [];
    this.skipped = [];
    this.links = [];
    this.dirs = [];
  }

  refuse(name, why) {
    return new UnsafeArchive(`archive entry ${JSON.stringify(name)}: ${why}; nothing of it was written outside ${this.dest}`,
      { code: 'unsafe_archive', details: name });
  }

  lst(p) {
    try {
      return fs.lstatSync(p);
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
  }

  // The host path of parts' parent, every directory on the way checked
  // (made when asked).
  parent(parts, name, create) {
    let dir = this.dest;
    for (const p of parts.slice(0, -1)) {
      dir = path.join(dir, p);
      const st = this.lst(dir);
      if (st === null) {
        if (!create) return null;
        fs.mkdirSync(dir, 0o700);
      } else if (!st.isDirectory()) {
        throw this.refuse(name, `'${p}' on its way is a link or not a directory`);
      }
    }
    return dir;
  }

  clear(p, name) {
    const st = this.lst(p);
    if (st === null) return;
    if (st.isDirectory()) throw this.refuse(name, 'a directory is in the way');
    fs.unlinkSync(p);
  }

  async member(h, r) {
    this.entries += 1;
    if (this.entries > this.maxEntries) throw new UnsafeArchive(`the archive has more than maxEntries=${this.maxEntries} entries`, { code: 'too_large' });
    const parts = components(h.name);
    const rel = parts.join('/');
    const t = h.type;
    if (parts.length === 0) return skipData(r, h.size);
    if (t === '5') {
      const p = path.join(this.parent(parts, h.name, true), parts[parts.length - 1]);
      const st = this.lst(p);
      if (st === null) fs.mkdirSync(p, 0o700);
      else if (!st.isDirectory()) throw this.refuse(h.name, 'something that is not a directory is in the way');
      this.dirs.push([parts, (h.mode & 0o755) | 0o700]);
      this.paths.push(`${rel}/`);
      return skipData(r, h.size);
    }
    if (t === '0' || t === '7') return this.file(h, parts, rel, r);
    if (t === '2') {
      this.links.push([parts, h.linkname]);
      return skipData(r, h.size);
    }
    if (t === '1') {
      this.hardlink(h, parts, rel);
      return skipData(r, h.size);
    }
    this.skipped.push([rel, 'special file (device, FIFO) not made on the host']);
    return skipData(r, h.size);
  }

  async file(h, parts, rel, r) {
    if (this.written + h.size > this.maxBytes) {
      throw new UnsafeArchive(`archive entry ${JSON.stringify(h.name)}: the archive holds more than maxBytes=${this.maxBytes} bytes of files`,
        { code: 'too_large', details: h.name });
    }
    const p = path.join(this.parent(parts, h.name, true), parts[parts.length - 1]);
    this.clear(p, h.name);
    const C = fs.constants;
    const fd = fs.openSync(p, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    try {
      let left = h.size;
      while (left > 0) {
        const b = await r.some(Math.min(left, 1 << 20));
        fs.writeSync(fd, b);
        left -= b.length;
      }
      await r.take(pad(h.size));
      this.written += h.size;
      fs.fchmodSync(fd, (h.mode & 0o755) | 0o600);
      try {
        fs.futimesSync(fd, h.mtime, h.mtime);
      } catch (_) { /* a sandbox's absurd mtime is not worth failing the download */ }
    } finally {
      fs.closeSync(fd);
    }
    this.paths.push(rel);
  }

  hardlink(h, parts, rel) {
    const src = components(h.linkname, 'hard link target');
    if (src.length === 0) throw this.refuse(h.name, 'a hard link to the target directory');
    const sdir = this.parent(src, h.name, false);
    const sp = sdir === null ? null : path.join(sdir, src[src.length - 1]);
    const st = sp === null ? null : this.lst(sp);
    if (st === null || !st.isFile()) throw this.refuse(h.name, `a hard link to ${JSON.stringify(h.linkname)}, which is not a file unpacked here`);
    const p = path.join(this.parent(parts, h.name, true), parts[parts.length - 1]);
    this.clear(p, h.name);
    fs.linkSync(sp, p);
    this.paths.push(rel);
  }

  isLink(parts, pending) {
    if (pending.has(parts.join('/'))) return true;
    let dir = this.dest;
    for (const p of parts) {
      dir = path.join(dir, p);
      const st = this.lst(dir);
      if (st === null) return false;
      if (st.isSymbolicLink()) return true;
      if (!st.isDirectory() && p !== parts[parts.length - 1]) return true;
    }
    return false;
  }

  finish() {
    const pending = new Set(this.links.map(([p]) => p.join('/')));
    for (const [parts, target] of this.links) {
      const name = parts.join('/');
      if (!target || target.startsWith('/') || target.includes('\0')) {
        throw this.refuse(name, `a link to ${JSON.stringify(target)}: only relative links inside are made`);
      }
      // Resolve the target from the link's directory one component at a
      // time, as the kernel would; a component that is itself a link (in
      // the archive or on disk) could lead anywhere: refused.
      const where = parts.slice(0, -1);
      const comps = target.split('/').filter((c) => c !== '' && c !== '.');
      comps.forEach((c, i) => {
        if (c === '..') {
          if (where.length === 0) throw this.refuse(name, `a link to ${JSON.stringify(target)}, which leads outside the target`);
          where.pop();
        } else {
          where.push(c);
          if (i < comps.length - 1 && this.isLink(where, pending)) {
            throw this.refuse(name, `a link to ${JSON.stringify(target)}, through the link '${where.join('/')}'`);
          }
        }
      });
      const p = path.join(this.parent(parts, name, true), parts[parts.length - 1]);
      this.clear(p, name);
      fs.symlinkSync(target, p);
      this.paths.push(name);
    }
    // Directory modes last, deepest first: a 0555 directory is filled first.
    this.dirs.sort((a, b) => b[0].length - a[0].length);
    for (const [parts, mode] of this.dirs) {
      const dir = this.parent(parts, parts.join('/'), false);
      const p = path.join(dir, parts[parts.length - 1]);
      const st = this.lst(p);
      if (st && st.isDirectory()) fs.chmodSync(p, mode);
    }
  }
}

function pad(n) {
  return (BLOCK - (n % BLOCK)) % BLOCK;
}

async function skipData(r, size) {
  let left = size + pad(size);
  while (left > 0) left -= (await r.some(left)).length;
}

// Unpack the tar stream `source` (an async iterable of Buffers) below
// `dest` (made if missing). Resolves to { paths, skipped }; rejects with
// UnsafeArchive at the first entry that would reach outside dest (entries
// before it stay).
async function extract(source, dest, { maxBytes = 2 ** 30, maxEntries = 100000 } = {}) {
  const u = new Unpacker(dest, maxBytes, maxEntries);
  const r = new ByteReader(source);
  let pax = {};
  let longName = null;
  let longLink = null;
  for (;;) {
    if (!(await r.fill(BLOCK))) {
      if (r.buf.length === 0 && u.entries > 0) break; // ended without the zero blocks: GNU tar reads such as well
      throw new UnsafeArchive('the tar stream ends in the middle of a header', { code: 'bad_archive' });
    }
    const block = await r.take(BLOCK);
    if (block.every((b) => b === 0)) break;
    const h = parseHeader(block);
    if (h.type === 'x' || h.type === 'g' || h.type === 'L' || h.type === 'K') {
      if (h.size > MAX_META) throw new UnsafeArchive(`a tar meta header of ${h.size} bytes`, { code: 'bad_archive' });
      const data = Buffer.from(await r.take(h.size));
      await r.take(pad(h.size));
      if (h.type === 'x') pax = parsePax(data);
      else if (h.type === 'L') longName = cstr(data, 0, data.length);
      else if (h.type === 'K') longLink = cstr(data, 0, data.length);
      continue;
    }
    if (longName !== null) h.name = longName;
    if (longLink !== null) h.linkname = longLink;
    if (pax.path !== undefined) h.name = pax.path;
    if (pax.linkpath !== undefined) h.linkname = pax.linkpath;
    if (pax.size !== undefined) {
      if (!/^[0-9]+$/.test(pax.size) || Number(pax.size) > Number.MAX_SAFE_INTEGER) throw new UnsafeArchive('bad pax size', { code: 'bad_archive' });
      h.size = Number(pax.size);
    }
    pax = {};
    longName = longLink = null;
    await u.member(h, r);
  }
  u.finish();
  return { paths: u.paths, skipped: u.skipped };
}

// ---- pack

function octal(n, len) {
  return `${n.toString(8).padStart(len - 1, '0')}\0`;
}

function header(name, { mode, size = 0, mtime = 0, type = '0', linkname = '' }) {
  const h = Buffer.alloc(BLOCK);
  const pax = {};
  const fits = (s, len) => Buffer.byteLength(s) < len;
  if (!fits(name, 100)) pax.path = name;
  if (!fits(linkname, 100)) pax.linkpath = linkname;
  h.write(fits(name, 100) ? name : name.slice(0, 99).replace(/[^\x20-\x7e]/g, '_'), 0, 100, 'utf8');
  h.write(octal(mode & 0o7777, 8), 100, 'latin1');
  h.write(octal(0, 8), 108, 'latin1');
  h.write(octal(0, 8), 116, 'latin1');
  h.write(octal(size, 12), 124, 'latin1');
  h.write(octal(Math.max(0, Math.floor(mtime)), 12), 136, 'latin1');
  h.write('        ', 148, 'latin1');
  h.write(type, 156, 'latin1');
  h.write(fits(linkname, 100) ? linkname : '', 157, 100, 'utf8');
  h.write('ustar\x0000', 257, 'latin1');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  if (Object.keys(pax).length === 0) return [h];
  let body = '';
  for (const [k, v] of Object.entries(pax)) {
    const rec = ` ${k}=${v}\n`;
    let len = Buffer.byteLength(rec) + 1;
    while (String(len).length + Buffer.byteLength(rec) !== len) len = String(len).length + Buffer.byteLength(rec);
    body += `${len}${rec}`;
  }
  const data = Buffer.from(body);
  const ph = header('PaxHeader', { mode: 0o644, size: data.length, type: 'x' })[0];
  return [ph, data, Buffer.alloc(pad(data.length)), h];
}

// A tar (Buffer) of the host file or directory src. Links are stored as
// links, never followed (a host link to a secret is not its contents);
// owners are left out; special files are not packed.
function pack(src, arcname = '.') {
  const out = [];
  const walk = (p, name) => {
    const st = fs.lstatSync(p);
    if (st.isDirectory()) {
      out.push(...header(`${name}/`, { mode: st.mode, mtime: st.mtimeMs / 1000, type: '5' }));
      for (const n of fs.readdirSync(p).sort()) walk(path.join(p, n), name === '.' ? n : `${name}/${n}`);
    } else if (st.isSymbolicLink()) {
      out.push(...header(name, { mode: 0o777, mtime: st.mtimeMs / 1000, type: '2', linkname: fs.readlinkSync(p) }));
    } else if (st.isFile()) {
      const data = fs.readFileSync(p);
      out.push(...header(name, { mode: st.mode, size: data.length, mtime: st.mtimeMs / 1000 }), data, Buffer.alloc(pad(data.length)));
    }
  };
  walk(src, arcname);
  out.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(out);
}

module.exports = { extract, pack, header, components };
