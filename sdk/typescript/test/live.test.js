'use strict';
// The SDK against a live brig serve the test starts itself (BRIG_BIN, or
// the tree's build/brig), as whoever runs it: tests/integration/
// test_sdk_typescript.py runs this file as root and as nobody.

const { test, before, after } = require('node:test');
const fs = require('node:fs');
const path = require('node:path');
const brig = require('..');
const { startServe, scratch, linksLeaving, assert } = require('./helpers');

let serve;
let client;
before(async () => {
  serve = await startServe();
  client = new brig.Client({ socket: serve.socket });
});
after(async () => {
  client.close();
  await serve.stop();
});

const collect = async (it) => {
  const out = [];
  for await (const c of it) out.push(c);
  return out;
};

test('commands: run, stream, background processes, errors', async () => {
  assert.strictEqual((await client.health()).status, 'ok');
  assert.strictEqual((await client.version()).api, '1');
  await brig.Sandbox.with({ client, overlay: false }, async (sb) => {
    assert.ok((await brig.Sandbox.list({ client })).some((s) => s.name === sb.name));
    assert.strictEqual((await brig.Sandbox.connect(sb.name, { client })).info.status, 'running');
    let r = await sb.run('echo out; echo err >&2; exit 3');
    assert.deepStrictEqual([r.exitCode, r.reason, r.stdout, r.stderr, r.ok], [3, 'exited', 'out\n', 'err\n', false]);
    assert.throws(() => r.check(), brig.CommandFailed);
    r = await sb.run(['printf', '%s|', 'a b', 'c']);
    assert.strictEqual(r.stdout, 'a b|c|');
    r = await sb.run(['sh', '-c', 'echo "$X"; pwd'], { env: { X: 'from-env' }, cwd: '/tmp' });
    assert.strictEqual(r.stdout, 'from-env\n/tmp\n');
    r = await sb.run(['cat'], { input: Buffer.from([0, 255, 98]) });
    assert.deepStrictEqual([...r.stdoutBytes], [0, 255, 98]);
    r = await sb.run(['sleep', '30'], { timeout: 300 });
    assert.deepStrictEqual([r.exitCode, r.reason], [124, 'timeout']);
    const st = sb.stream('echo one; sleep 0.2; echo two >&2; exit 4');
    const chunks = await collect(st);
    assert.deepStrictEqual(chunks.map((c) => [c.stream, c.text]), [['stdout', 'one\n'], ['stderr', 'two\n']]);
    assert.strictEqual(st.result.exitCode, 4);
    let p = await sb.start(['sh', '-c', 'read line; echo got:$line; cat']);
    await p.write('hello\n');
    await p.stdin.write(Buffer.from('more\n'));
    await p.closeStdin();
    r = await p.wait();
    assert.strictEqual(r.exitCode, 0);
    assert.strictEqual(Buffer.concat((await collect(p.output())).map((c) => c.data)).toString(), 'got:hello\nmore\n');
    p = await sb.exec(['sleep', '30'], { stdin: false });
    assert.strictEqual(await p.poll(), null);
    assert.strictEqual(await p.wait({ timeout: 100 }), null);
    assert.ok((await sb.processes()).some((x) => x.id === p.id));
    await p.kill();
    r = await p.wait();
    assert.deepStrictEqual([r.signal, r.reason], [9, 'signaled']);
    await p.forget();
    await assert.rejects(sb.run([]), brig.BadRequest);
    await assert.rejects(brig.Sandbox.connect('no-such-sandbox', { client }), (e) => e instanceof brig.NotFound && e.code === 'not_found' && e.status === 404);
  });
});

test('runInPool: a fresh member of a warm pool per call, as the pool made it', async () => {
  const ws = scratch('brig-pool-ws-');
  fs.writeFileSync(path.join(ws, 'host.txt'), 'from the host\n');
  serve.brig('pool', '--size', '1', '--name', 'ts-pool', '--workspace', ws);
  try {
    for (const deadline = Date.now() + 30000; ;) {
      const pool = (await client.pools()).find((p) => p.names.includes('ts-pool'));
      if (pool && pool.ready >= 1) break;
      if (Date.now() > deadline) throw new Error(`no member ready: ${JSON.stringify(await client.pools())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    let r = await client.runInPool('ts-pool', ['sh', '-c', 'cat host.txt; echo "$X"; echo x > /tmp/left; echo w > out'],
      { env: { X: 'from-env' }, cwd: ws });
    assert.deepStrictEqual([r.exitCode, r.stdout], [0, 'from the host\nfrom-env\n']);
    assert.strictEqual(fs.readFileSync(path.join(ws, 'out'), 'utf8'), 'w\n');
    r = await client.runInPool('ts-pool', 'cat /tmp/left');
    assert.notStrictEqual(r.exitCode, 0, 'the second run saw the first one\'s /tmp');
    await assert.rejects(client.runInPool('no-such-pool', 'true'), brig.NotFound);
  } finally {
    serve.brig('pool', '--stop', '--name', 'ts-pool');
    fs.rmSync(ws, { recursive: true, force: true });
  }
});

test('files: write, read, list, stat, mkdir, remove, upload, download', async () => {
  const base = scratch('brig-sdk-files-ts-');
  try {
    const src = path.join(base, 'src');
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, 'top.txt'), 'top\n');
    fs.writeFileSync(path.join(src, 'sub', 'deep.txt'), 'deep\n');
    fs.symlinkSync('top.txt', path.join(src, 'rel'));
    fs.symlinkSync('/etc/shadow', path.join(src, 'secret'));
    await brig.Sandbox.with({ client, overlay: false }, async (sb) => {
      const f = sb.files;
      assert.strictEqual(await f.write('/tmp/a.txt', 'héllo\n', { mode: 0o600 }), 7);
      assert.strictEqual(await f.readText('/tmp/a.txt'), 'héllo\n');
      const st = await f.stat('/tmp/a.txt');
      assert.deepStrictEqual([st.type, st.size, st.mode & 0o777], ['file', 7, 0o600]);
      await f.mkdir('/tmp/d');
      await f.write('/tmp/d/b.bin', Buffer.from([0, 1, 2, 255]));
      assert.deepStrictEqual([...(await f.read('/tmp/d/b.bin'))], [0, 1, 2, 255]);
      const names = (await f.list('/tmp')).filter((e) => ['a.txt', 'd'].includes(e.name)).map((e) => [e.name, e.type]).sort();
      assert.deepStrictEqual(names, [['a.txt', 'file'], ['d', 'dir']]);
      assert.deepStrictEqual([await f.exists('/tmp/d/b.bin'), await f.exists('/tmp/nope')], [true, false]);
      await f.remove('/tmp/d/b.bin');
      assert.strictEqual(await f.exists('/tmp/d/b.bin'), false);
      await assert.rejects(f.read('/tmp/nope'), brig.NotFound);
      await assert.rejects(f.write('/etc/brig-sdk-test', 'x'), (e) => e instanceof brig.BrigError && e.status >= 400 && e.status < 500);
      await f.upload(src, '/tmp/up');
      const r = await sb.run('cat /tmp/up/top.txt /tmp/up/sub/deep.txt /tmp/up/rel; readlink /tmp/up/secret');
      assert.strictEqual(r.stdout, 'top\ndeep\ntop\n/etc/shadow\n');
      await f.remove('/tmp/up/secret');
      const d = await f.download('/tmp/up', path.join(base, 'dst'));
      assert.deepStrictEqual(d.paths.sort(), ['rel', 'sub/', 'sub/deep.txt', 'top.txt']);
      assert.strictEqual(fs.readlinkSync(path.join(base, 'dst', 'rel')), 'top.txt');
    });
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test('overlay, snapshots, fork, network rules, events, lifecycle', async () => {
  const ws = scratch('brig-sdk-ws-ts-');
  fs.writeFileSync(path.join(ws, 'old.txt'), 'old\n');
  try {
    await brig.Sandbox.with({ client, workspace: ws, overlay: true }, async (sb) => {
      await sb.run(['sh', '-c', 'echo new > new.txt; echo changed > old.txt'], { cwd: ws });
      assert.deepStrictEqual((await sb.diff()).map((x) => [x.path, x.change]).sort(), [['new.txt', 'added'], ['old.txt', 'modified']]);
      assert.deepStrictEqual((await sb.commit({ paths: ['new.txt'] })).map((x) => x.path), ['new.txt']);
      assert.strictEqual(fs.readFileSync(path.join(ws, 'new.txt'), 'utf8'), 'new\n');
      assert.strictEqual(fs.readFileSync(path.join(ws, 'old.txt'), 'utf8'), 'old\n');
      await sb.run('echo before > /tmp/state');
      assert.strictEqual((await sb.snapshot('t1')).tag, 't1');
      await sb.run('echo after > /tmp/state');
      await sb.restore('t1');
      assert.strictEqual((await sb.run('cat /tmp/state')).stdout, 'before\n');
      const other = await sb.fork('t1');
      try {
        assert.strictEqual((await other.run('cat /tmp/state')).stdout, 'before\n');
      } finally {
        await other.remove();
      }
      await sb.removeSnapshot('t1');
      assert.deepStrictEqual(await sb.snapshots(), []);
      const net = await sb.network.get();
      if (net.mode === 'none') {
        await assert.rejects(sb.network.allow('example.org'), brig.Conflict);
      } else {
        assert.ok((await sb.network.allow('example.org')).live.some((x) => x.host === 'example.org'));
        assert.ok(!(await sb.network.remove('example.org')).live.some((x) => x.host === 'example.org'));
      }
      const events = await collect(sb.events({ follow: false }));
      assert.ok(events.length > 0, 'no audit events');
      try {
        assert.strictEqual((await sb.pause()).info.status, 'paused');
        assert.strictEqual((await sb.resume()).info.status, 'running');
      } catch (e) {
        // rootless on a host without a delegated cgroup v2 freezer
        if (!(e instanceof brig.BrigError && /freezer/.test(e.message) && process.geteuid() !== 0)) throw e;
        console.log(`# PAUSE NOT TESTED ROOTLESS: no delegated cgroup v2 freezer on this host: ${e.message}`);
      }
      assert.strictEqual((await sb.stop()).info.status, 'stopped');
      await assert.rejects(sb.run('true'), brig.Conflict);
      await sb.reset();
      assert.deepStrictEqual(await sb.diff(), []);
      assert.strictEqual((await sb.startSandbox()).info.status, 'running');
    });
  } finally {
    fs.rmSync(ws, { recursive: true, force: true });
  }
});

const FORGED = '{"type":"exit","result":{"exit_code":0,"signal":0,"reason":"exited","refusals":[]}}\n{"type":"stdout","data":"forged"}\n';

test('a command cannot forge stream events [forged-output]', async () => {
  const script = `printf '%s' '${FORGED}'; printf '%s' '${FORGED}' >&2; exit 7`;
  await brig.Sandbox.with({ client, overlay: false }, async (sb) => {
    const r = await sb.run(['sh', '-c', script]);
    assert.deepStrictEqual([r.exitCode, r.stdout, r.stderr], [7, FORGED, FORGED]);
    const st = sb.stream(['sh', '-c', script]);
    const res = await st.collect();
    assert.deepStrictEqual([res.exitCode, res.stdout], [7, FORGED]);
    const p = await sb.start(['sh', '-c', script], { stdin: false });
    const text = (await collect(p.output())).filter((c) => c.stream === 'stdout').map((c) => c.text).join('');
    assert.deepStrictEqual([(await p.wait()).exitCode, text], [7, FORGED]);
  });
});

const HOSTILE = `set -e
mkdir -p /tmp/chain/d /tmp/plain /tmp/modes/w
ln -s .. /tmp/chain/d/up
ln -s up/../outside /tmp/chain/d/esc
ln -s ../outside /tmp/plain/out
echo hi > /tmp/modes/f
chmod 4777 /tmp/modes/f 2>/dev/null || chmod 0777 /tmp/modes/f
chmod 0777 /tmp/modes/w
mkfifo /tmp/modes/fifo`;

test('download from a hostile sandbox stays inside [sdk-hostile-sandbox-download]', async () => {
  const base = scratch('brig-sdk-hostile-ts-');
  fs.mkdirSync(path.join(base, 'outside'));
  try {
    await brig.Sandbox.with({ client, overlay: false }, async (sb) => {
      assert.strictEqual((await sb.run(['sh', '-c', HOSTILE])).exitCode, 0);
      // each link out alone: through d/up -> .. (inside by itself), and plain
      for (const what of ['chain', 'plain']) {
        await assert.rejects(sb.files.download(`/tmp/${what}`, path.join(base, `dest-${what}`)), brig.UnsafeArchive, what);
      }
      const d = await sb.files.download('/tmp/modes', path.join(base, 'dest-modes'));
      assert.deepStrictEqual([d.paths.sort(), d.skipped.map(([n]) => n)], [['f', 'w/'], ['fifo']]);
    });
    assert.deepStrictEqual(fs.readdirSync(path.join(base, 'outside')), []);
    for (const what of ['chain', 'plain', 'modes']) assert.deepStrictEqual(linksLeaving(path.join(base, `dest-${what}`)), [], what);
    for (const name of ['f', 'w']) {
      const st = fs.statSync(path.join(base, 'dest-modes', name));
      assert.strictEqual(st.mode & 0o7777, 0o755, name);
      assert.strictEqual(st.uid, process.geteuid());
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test('loopback TCP with a token (url, tokenFile); a wrong token is Unauthorized', async () => {
  const dir = scratch('brig-sdk-tcp-ts-');
  fs.chmodSync(dir, 0o700);
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, `s3cret-${Date.now()}\n`, { mode: 0o600 });
  const port = await new Promise((resolve) => {
    const s = require('node:net').createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
  const tcp = await startServe(['--listen', `127.0.0.1:${port}`, '--token-file', tokenFile]);
  const url = `http://127.0.0.1:${port}`;
  const c = new brig.Client({ url, tokenFile });
  try {
    for (let i = 0; ; i++) {
      try {
        assert.strictEqual((await c.health()).status, 'ok');
        break;
      } catch (e) {
        if (i > 200) throw e;
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    await brig.Sandbox.with({ client: c, overlay: false }, async (sb) => {
      assert.strictEqual((await sb.run('echo over tcp')).stdout, 'over tcp\n');
    });
    const wrong = new brig.Client({ url, token: 'wrong' });
    await assert.rejects(wrong.list(), (e) => e instanceof brig.Unauthorized && e.status === 401 && e.code === 'unauthorized');
    wrong.close();
  } finally {
    c.close();
    await tcp.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
