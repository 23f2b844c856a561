'use strict';
// What the SDK buffers is bounded whatever the server sends: a body
// declared 10 GiB, a chunked body that never ends, an NDJSON line that
// never ends (a server that lies, or a sandbox's bytes relayed by one).

const test = require('node:test');
const { Client, ProtocolError, ConnectionError } = require('..');
const { lyingServer, sandboxJson, assert } = require('./helpers');

const LIMIT = 512 << 20;

function endless(how, counter) {
  return (req, res) => {
    const headers = { 'Content-Type': how === 'line' ? 'application/x-ndjson' : 'application/octet-stream' };
    if (how === 'length') headers['Content-Length'] = String(10 * 2 ** 30);
    res.writeHead(200, headers);
    const block = Buffer.alloc(1 << 20, 65);
    if (how === 'line') res.write('{"type":"stdout","data":"');
    const pump = () => {
      while (counter.sent < LIMIT) {
        counter.sent += block.length;
        if (!res.write(block)) return res.once('drain', pump);
      }
      return res.end();
    };
    res.on('close', () => { counter.closed = true; });
    pump();
  };
}

test('the SDK bounds what it buffers [sdk-unbounded-answer]', async () => {
  for (const [how, route, call] of [['length', '/files', (sb) => sb.files.read('/big')],
    ['chunked', '/files', (sb) => sb.files.read('/big')],
    ['line', '/events', async (sb) => { for await (const _ of sb.events()) { /* never */ } }]]) {
    const counter = { sent: 0, closed: false };
    const liar = await lyingServer({ '/v1/sandboxes/box': [200, 'application/json', sandboxJson('box')], [route]: endless(how, counter) });
    // the default cap for a declared length (refused at once), a small one
    // for the bodies that would be read up to it (keeps the test quick)
    const client = new Client({ socket: liar.socket, maxBody: how === 'chunked' ? 8 << 20 : undefined });
    const before = process.memoryUsage().rss;
    try {
      const sb = await client.connect('box');
      await assert.rejects(call(sb), (e) => e instanceof ProtocolError && ['too_large', 'protocol'].includes(e.code), how);
      for (let i = 0; i < 100 && !counter.closed; i++) await new Promise((r) => setTimeout(r, 20));
    } finally {
      client.close();
      await liar.stop();
    }
    // it stopped at its cap (8 MiB of body here, 16 MiB of line); the server would have sent 512 MiB
    assert.ok(counter.sent < 200 << 20, `${how}: the server sent ${counter.sent} bytes`);
    assert.ok(process.memoryUsage().rss - before < 400 << 20, how);
  }
});

test('url: loopback only, with a token', () => {
  assert.throws(() => new Client({ url: 'http://10.1.2.3:7000', token: 't' }), (e) => e instanceof ConnectionError && e.code === 'bad_url' && /loopback/.test(e.message));
  assert.throws(() => new Client({ url: 'http://127.0.0.1:7000' }), (e) => e.code === 'no_token');
  assert.throws(() => new Client({ url: 'https://127.0.0.1:7000', token: 't' }), (e) => e.code === 'bad_url');
  assert.ok(new Client({ url: 'http://[::1]:7000', token: 't' }));
  assert.ok(new Client({ url: 'http://127.0.0.1:7000', token: 't' }));
});
