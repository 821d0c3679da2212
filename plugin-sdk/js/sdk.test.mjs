// Unit tests of sdk.mjs under node:test (scripts/build-polyglot-plugins.sh runs them):
//
//     node --test plugin-sdk/js/
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';

import {
  NAMESPACE_DNS,
  NAMESPACE_OID,
  NAMESPACE_URL,
  NAMESPACE_X500,
  PluginError,
  guard,
  internalError,
  sha1,
  stableHash,
  uuid5,
} from './sdk.mjs';

const hex = (bytes) => Buffer.from(bytes).toString('hex');

test('sha1 is SHA-1', () => {
  // FIPS 180 examples, then every length across the padding boundaries and pseudo-random data.
  assert.equal(hex(sha1('abc')), 'a9993e364706816aba3e25717850c26c9cd0d89d');
  assert.equal(hex(sha1('')), 'da39a3ee5e6b4b0d3255bfef95601890afd80709');
  assert.equal(
    hex(sha1('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')),
    '84983e441c3bd26ebaae4aa1f95129e5e54670f1',
  );
  let seed = 26;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) & 0xff;
  for (const n of [...Array(200).keys(), 1000, 4096, 10001]) {
    const data = Uint8Array.from({ length: n }, next);
    assert.equal(hex(sha1(data)), createHash('sha1').update(data).digest('hex'), `length ${n}`);
  }
  assert.equal(hex(sha1('é')), createHash('sha1').update('é', 'utf8').digest('hex'));
  assert.equal(hex(sha1(new Uint8Array([1, 2, 3]).buffer)), createHash('sha1').update(Buffer.from([1, 2, 3])).digest('hex'));
});

test("uuid5 is CPython's uuid.uuid5", () => {
  // Computed by CPython: str(uuid.uuid5(namespace, name)).
  const custom = '0f5e6a4c-2d1b-4e8a-9c3f-7a1b2c3d4e5f';
  for (const [namespace, name, expected] of [
    [NAMESPACE_DNS, 'python.org', '886313e1-3b8a-5372-9b90-0c9aee199e5d'],
    [NAMESPACE_URL, '', '1b4db7eb-4057-5ddf-91e0-36dec72071f5'],
    [NAMESPACE_OID, 'cluster1/web', '3b56fcd0-486e-542b-83a9-13f290dc5c1e'],
    [NAMESPACE_X500, 'ünïcødé/名前', '354c91ff-b27f-5b1f-9c36-147bf677b4f6'],
    [custom, 'web', '3321ffa7-0a12-5f79-87f1-56e8ef5073d8'],
    [custom.toUpperCase(), 'web', '3321ffa7-0a12-5f79-87f1-56e8ef5073d8'],
    [`urn:uuid:${custom}`, 'web', '3321ffa7-0a12-5f79-87f1-56e8ef5073d8'],
    [Uint8Array.from(Buffer.from(custom.replaceAll('-', ''), 'hex')), 'web', '3321ffa7-0a12-5f79-87f1-56e8ef5073d8'],
    [custom, 'x'.repeat(300), 'f91f427c-f48e-5552-b17b-c43544af519e'],
  ]) {
    assert.equal(uuid5(namespace, name), expected, `${namespace} ${name}`);
  }
  assert.throws(() => uuid5('not-a-uuid', 'x'), TypeError);
  assert.throws(() => uuid5(NAMESPACE_DNS, 12), TypeError);
});

test('stableHash is FNV-1a 64', () => {
  assert.equal(stableHash(''), 0xcbf29ce484222325n);
  assert.equal(stableHash('a'), 0xaf63dc4c8601ec8cn);
  assert.equal(stableHash(new TextEncoder().encode('foobar')), 0x85944171f73967e8n);
});

function helper(n) {
  if (n === 0) throw new RangeError('n must not be 0');
  return 10 / n;
}

const plugin = () =>
  guard({
    describe() {
      return 'described';
    },
    checkConfig(config) {
      if (config === 'bad') throw new PluginError('invalid', 'config: bad');
    },
    init(config) {
      return helper(Number(config));
    },
    start() {
      throw 'a string';
    },
    list(options) {
      return [options, this.describe()];
    },
    handle() {
      throw null;
    },
  });

test('an uncaught exception is the internal error, with its stack', () => {
  const p = plugin();
  assert.throws(
    () => p.init('0'),
    (e) => {
      assert.equal(e.payload.tag, 'internal');
      const lines = e.payload.val.split('\n');
      assert.equal(lines[0], 'uncaught exception in init:');
      assert.equal(lines[1], 'RangeError: n must not be 0');
      assert.match(e.payload.val, /helper/);
      assert.match(e.payload.val, /sdk\.test\.mjs/);
      return true;
    },
  );
  // In a component (SpiderMonkey's stacks) the stack ends at the export: the glue's frame and
  // what called it are left out.
  const error = new Error('a deliberate bug');
  error.stack =
    'handle@build/plugin.bundle.js:569:35\nconductorGuarded@build/plugin.bundle.js:366:14\n' +
    'export_plugin_0_6_0$handle@/tmp/bd404ff5597d/sources/initializer.js:1864:29\n';
  assert.equal(
    internalError('handle', error).payload.val,
    'uncaught exception in handle:\nError: a deliberate bug\nhandle@build/plugin.bundle.js:569:35',
  );
  assert.throws(() => p.start(), { payload: { tag: 'internal', val: 'uncaught exception in start:\nstring thrown: a string' } });
  assert.throws(() => p.handle(), { payload: { tag: 'internal', val: 'uncaught exception in handle:\nobject thrown: null' } });
});

test('what the plugin answers is unchanged', () => {
  const p = plugin();
  assert.throws(() => p.checkConfig('bad'), { payload: { tag: 'invalid', val: 'config: bad' } });
  assert.equal(p.checkConfig('good'), undefined);
  assert.equal(p.init('2'), 5);
  assert.deepEqual(p.list('options'), ['options', 'described']);
  assert.equal(p.describe(), 'described');
  assert.equal(p.init.name, 'init');
  // Guarding twice wraps once.
  const again = guard(p);
  assert.throws(() => again.init('0'), (e) => e.payload.val.split('uncaught exception').length === 2);
});

/** A plugin recording what `handle` saw, refusing events starting with `bad`, throwing a bug for `bug`. */
const batching = (own = {}) => {
  const handled = [];
  const p = guard({
    handle(identity, event) {
      handled.push([identity, event]);
      if (event.startsWith('bad')) throw new PluginError('invalid', `${event}: refused`);
      if (event === 'bug') helper(0);
    },
    ...own,
  });
  return { p, handled };
};

const ok = { tag: 'ok', val: undefined };

test('the default handleBatch hands each request to handle in turn: a refused one fails alone', () => {
  const { p, handled } = batching();
  const requests = [
    { identity: 'cluster1', event: 'first' },
    { identity: 'cluster2', event: 'bad second' },
    { identity: 'cluster3', event: 'third' },
  ];
  assert.deepEqual(p.handleBatch(requests), [
    ok,
    { tag: 'err', val: { tag: 'invalid', val: 'bad second: refused' } },
    ok,
  ]);
  assert.deepEqual(handled, [
    ['cluster1', 'first'],
    ['cluster2', 'bad second'],
    ['cluster3', 'third'],
  ]);
  assert.deepEqual(p.handleBatch([]), []);
  // Called as componentize-js may call it, not as a method.
  const { handleBatch } = p;
  assert.deepEqual(handleBatch([{ identity: 'c', event: 'x' }]), [ok]);
});

test("an uncaught exception in handle is its request's internal error, with its stack", () => {
  const { p, handled } = batching();
  const [bug, next] = p.handleBatch([
    { identity: 'c', event: 'bug' },
    { identity: 'c', event: 'next' },
  ]);
  assert.equal(bug.tag, 'err');
  assert.equal(bug.val.tag, 'internal');
  const lines = bug.val.val.split('\n');
  assert.deepEqual(lines.slice(0, 2), ['uncaught exception in handle:', 'RangeError: n must not be 0']);
  assert.match(bug.val.val, /helper/);
  assert.deepEqual(next, ok);
  assert.deepEqual(
    handled.map(([, e]) => e),
    ['bug', 'next'],
  );
  // Guarding again keeps the default.
  assert.equal(guard(p).handleBatch, p.handleBatch);
});

test("what a plugin's own handleBatch throws answers every request", () => {
  const { p } = batching({
    handleBatch(requests) {
      if (requests[0].event === 'refuse all') throw new PluginError('unavailable', 'the batch is refused');
      if (requests[0].event === 'bug') throw new TypeError('a bug in the batch');
      return requests.map((r) => (r.event === 'bad' ? { tag: 'err', val: { tag: 'invalid', val: 'bad' } } : ok));
    },
  });
  assert.equal(p.handleBatch.name, 'handleBatch');
  assert.deepEqual(
    p.handleBatch([
      { identity: 'c', event: 'x' },
      { identity: 'c', event: 'bad' },
    ]),
    [ok, { tag: 'err', val: { tag: 'invalid', val: 'bad' } }],
  );
  const refused = { tag: 'err', val: { tag: 'unavailable', val: 'the batch is refused' } };
  assert.deepEqual(
    p.handleBatch([
      { identity: 'c', event: 'refuse all' },
      { identity: 'c', event: 'x' },
    ]),
    [refused, refused],
  );
  const results = p.handleBatch([
    { identity: 'c', event: 'bug' },
    { identity: 'c', event: 'x' },
    { identity: 'c', event: 'y' },
  ]);
  assert.equal(results.length, 3);
  for (const r of results) {
    assert.equal(r.tag, 'err');
    assert.equal(r.val.tag, 'internal');
    assert.match(r.val.val, /^uncaught exception in handleBatch:\nTypeError: a bug in the batch/);
  }
  // Guarding twice wraps once.
  assert.equal(guard(p).handleBatch, p.handleBatch);
});
