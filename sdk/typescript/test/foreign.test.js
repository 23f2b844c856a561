'use strict';
// A server of another local user at the socket (a stale BRIG_SOCKET, a
// shared /tmp): the SDK must not send it a byte. BRIG_TEST_FOREIGN_SOCKET
// names one; tests/integration/test_sdk_typescript.py starts it as another
// uid and checks on the host that it received nothing.

const test = require('node:test');
const brig = require('..');
const { assert } = require('./helpers');

const sock = process.env.BRIG_TEST_FOREIGN_SOCKET;

test('a server of another user is refused [sdk-planted-socket]', { skip: sock ? false : 'NO FOREIGN SERVER: run through tests/integration/test_sdk_typescript.py (it starts one as another uid)' }, async () => {
  const client = new brig.Client({ socket: sock });
  try {
    await assert.rejects(client.connect('box'), (e) => e instanceof brig.ConnectionError && e.code === 'untrusted_server' &&
      /uid \d+/.test(e.message) && /socket=/.test(e.message));
    await assert.rejects(brig.Sandbox.create({ socket: sock }), (e) => e.code === 'untrusted_server');
  } finally {
    client.close();
  }
});
