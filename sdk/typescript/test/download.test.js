'use strict';
// files.download() against a server that lies: whatever the tar says,
// nothing is written outside the target (checked on the host), setuid bits
// and devices never come out, and the reader survives garbage (a bounded
// mutation fuzz of lib/tar.js: it either unpacks inside or refuses).

const test = require('node:test');
const fs = require('node:fs');
const path = require('node:path');
const { Client, UnsafeArchive, BrigError } = require('..');
const tar = require('../lib/tar');
const { scratch, lyingServer, craftedTar, sandboxJson, linksLeaving, assert } = require('./helpers');

function cases(outside) {
  const o = path.basename(outside);
  return {
    dotdot: [{ name: `../${o}/pwned` }],
    absolute: [{ name: `${outside}/pwned` }],
    'inner-dotdot': [{ name: 'sub/x' }, { name: `sub/../../${o}/pwned` }],
    'link-then-write': [{ name: 'lnk', type: 'sym', linkname: `../${o}` }, { name: 'lnk/pwned' }],
    'link-absolute': [{ name: 'abs', type: 'sym', linkname: outside }],
    'link-climbs': [{ name: 'deep/a/b', type: 'dir' }, { name: 'deep/esc', type: 'sym', linkname: `../../${o}` }],
    // d/up -> .. is inside; d/esc goes through it and one more '..'.
    'link-chain': [{ name: 'd', type: 'dir' }, { name: 'd/up', type: 'sym', linkname: '..' },
      { name: 'd/esc', type: 'sym', linkname: `up/../${o}` }],
    'hardlink-out': [{ name: 'hl', type: 'hard', linkname: `../${o}/target` }],
    'hardlink-absolute': [{ name: 'hl', type: 'hard', linkname: `${outside}/target` }],
    'long-name-dotdot': [{ name: `${'a/'.repeat(80)}${'../'.repeat(81)}${o}/pwned` }],
  };
}

test('download never writes outside its target [sdk-download-outside]', async () => {
  const base = scratch('brig-sdk-dl-ts-');
  const outside = path.join(base, 'outside');
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'target'), 'host file\n');
  try {
    for (const [label, entries] of Object.entries(cases(outside))) {
      const liar = await lyingServer({
        '/v1/sandboxes/box': [200, 'application/json', sandboxJson('box')],
        '/files/tar': [200, 'application/x-tar', craftedTar([{ name: 'ok.txt', data: 'fine' }, ...entries])],
      });
      const dest = path.join(base, `dest-${label}`);
      const client = new Client({ socket: liar.socket });
      try {
        const sb = await client.connect('box');
        await assert.rejects(sb.files.download('/work', dest), UnsafeArchive, label);
      } finally {
        client.close();
        await liar.stop();
      }
      assert.deepStrictEqual(fs.readdirSync(outside), ['target'], label);
      assert.strictEqual(fs.statSync(path.join(outside, 'target')).nlink, 1, label);
      assert.strictEqual(fs.readFileSync(path.join(outside, 'target'), 'utf8'), 'host file\n');
      assert.deepStrictEqual(linksLeaving(dest), [], label);
      assert.ok(!fs.existsSync(path.join(base, 'pwned')), label);
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test('download drops setuid bits, owners, devices and FIFOs [sdk-download-modes]', async () => {
  const base = scratch('brig-sdk-dl-ts-');
  const liar = await lyingServer({
    '/v1/sandboxes/box': [200, 'application/json', sandboxJson('box')],
    '/files/tar': [200, 'application/x-tar', craftedTar([
      { name: 'suid', data: '#!/bin/sh\nid\n', mode: 0o4777 },
      { name: 'sgid-dir', type: 'dir', mode: 0o2777 },
      { name: 'sgid-dir/f', data: 'x', mode: 0o2666 },
      { name: 'null', type: 'chr', mode: 0o666 },
      { name: 'fifo', type: 'fifo' },
    ])],
  });
  const client = new Client({ socket: liar.socket });
  try {
    const sb = await client.connect('box');
    const d = await sb.files.download('/work', path.join(base, 'dest'));
    assert.deepStrictEqual(d.skipped.map(([n]) => n).sort(), ['fifo', 'null']);
    const names = [];
    const walk = (dir, rel) => {
      for (const n of fs.readdirSync(dir)) {
        const p = path.join(dir, n);
        const st = fs.lstatSync(p);
        names.push(rel + n);
        assert.strictEqual(st.mode & 0o7022, 0, `${rel + n} ${st.mode.toString(8)}`);
        assert.strictEqual(st.uid, process.geteuid());
        assert.ok(st.isFile() || st.isDirectory(), n);
        if (st.isDirectory()) walk(p, `${rel + n}/`);
      }
    };
    walk(path.join(base, 'dest'), '');
    assert.deepStrictEqual(names.sort(), ['sgid-dir', 'sgid-dir/f', 'suid']);
    assert.strictEqual(fs.statSync(path.join(base, 'dest', 'suid')).mode & 0o7777, 0o755);
  } finally {
    client.close();
    await liar.stop();
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test('upload packs what download unpacks (links kept as links)', async () => {
  const base = scratch('brig-sdk-tar-ts-');
  try {
    const src = path.join(base, 'src');
    fs.mkdirSync(path.join(src, 'a', 'b'), { recursive: true });
    fs.writeFileSync(path.join(src, 'a', 'b', 'f.txt'), 'hello');
    fs.writeFileSync(path.join(src, `${'n'.repeat(150)}.txt`), 'long');
    fs.symlinkSync('b/f.txt', path.join(src, 'a', 'l'));
    fs.chmodSync(path.join(src, 'a', 'b', 'f.txt'), 0o750);
    const buf = tar.pack(src, '.');
    const got = await tar.extract([buf.subarray(0, 700), buf.subarray(700)], path.join(base, 'out'));
    assert.deepStrictEqual(got.skipped, []);
    assert.strictEqual(fs.readFileSync(path.join(base, 'out', 'a', 'b', 'f.txt'), 'utf8'), 'hello');
    assert.strictEqual(fs.readFileSync(path.join(base, 'out', `${'n'.repeat(150)}.txt`), 'utf8'), 'long');
    assert.strictEqual(fs.readlinkSync(path.join(base, 'out', 'a', 'l')), 'b/f.txt');
    assert.strictEqual(fs.statSync(path.join(base, 'out', 'a', 'b', 'f.txt')).mode & 0o777, 0o750);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

// lib/tar.js parses bytes a sandbox made: random corruptions of valid
// archives must end in a clean refusal (a BrigError) or an unpack that
// stays inside, never a crash or a write outside. Bounded and seeded, so
// it is repeatable and takes well under a second.
test('tar reader fuzz: garbage is refused or stays inside', async () => {
  const base = scratch('brig-sdk-fuzz-ts-');
  const outside = path.join(base, 'outside');
  fs.mkdirSync(outside);
  let seed = 16;
  const rnd = (n) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const seeds = [
    craftedTar([{ name: 'a/b', type: 'dir' }, { name: 'a/b/c', data: 'x'.repeat(700) }, { name: 'a/l', type: 'sym', linkname: 'b/c' },
      { name: 'a/h', type: 'hard', linkname: 'a/b/c' }]),
    craftedTar([{ name: `${'d'.repeat(120)}/f`, data: 'long' }, { name: 'up', type: 'sym', linkname: '..' }]),
    ...Object.values(cases(outside)).map((e) => craftedTar(e)),
  ];
  let refused = 0;
  try {
    for (let i = 0; i < 300; i++) {
      const buf = Buffer.from(seeds[i % seeds.length]);
      for (let k = 1 + rnd(8); k > 0; k--) {
        const at = rnd(buf.length);
        buf[at] = rnd(3) === 0 ? 0 : rnd(256);
      }
      const cut = rnd(4) === 0 ? buf.subarray(0, rnd(buf.length)) : buf;
      const dest = path.join(base, `d${i}`);
      try {
        await tar.extract([cut], dest, { maxBytes: 1 << 20, maxEntries: 100 });
      } catch (e) {
        if (!(e instanceof BrigError)) throw new Error(`input ${i}: not a clean refusal: ${e.stack}`);
        refused += 1;
      }
      assert.deepStrictEqual(linksLeaving(dest), [], `input ${i}`);
      fs.rmSync(dest, { recursive: true, force: true });
    }
    assert.deepStrictEqual(fs.readdirSync(outside), []);
    assert.ok(refused > 0);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});
