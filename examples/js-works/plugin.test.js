// Unit tests of js-works with the SDK's JavaScript fakes (plugin-sdk/js): no host, no
// WebAssembly. scripts/build-polyglot-plugins.sh runs them before building the component:
//
//     cd examples/js-works && node --import ../../plugin-sdk/js/register.mjs --test
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { beforeEach, test } from 'node:test';

import { host, reset, takeEmitted } from '../../plugin-sdk/js/fake-host.mjs';
import { CONTRACT, MANIFEST_BUNDLES, plugin, uidOf } from './plugin.js';

const CONFIG = {
  announce_after_ms: 10,
  clusters: {
    cluster1: { web: { generation: 2, manifests: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web' } }] } },
    cluster2: { db: { manifests: [] } },
  },
};
const ANONYMOUS = { user: 'system:anonymous', groups: [] };
const bytes = (text) => new TextEncoder().encode(text);
const extension = (event, name) => event.extensions.find((e) => e.name === name).value;

function statusEvent(resourceId, data) {
  return {
    id: '1',
    source: 'cluster1-work-agent',
    specVersion: '1.0',
    type: `${MANIFEST_BUNDLES}.status.update_request`,
    dataContentType: 'application/json',
    extensions: [
      { name: 'clustername', value: { tag: 'string', val: 'cluster1' } },
      { name: 'resourceid', value: { tag: 'string', val: resourceId } },
    ],
    data,
  };
}

/** Runs `call`, which must throw the contract's `invalid` error containing `message`. */
function assertInvalid(call, message) {
  assert.throws(call, (e) => {
    assert.equal(e.payload?.tag, 'invalid', `${e}`);
    assert.ok(e.payload.val.includes(message), `${JSON.stringify(e.payload.val)} lacks ${JSON.stringify(message)}`);
    return true;
  });
}

beforeEach(() => {
  reset();
  plugin.init(JSON.stringify(CONFIG));
});

test('describes itself against the contract of the SDK', () => {
  const wit = readFileSync(new URL('../../plugin-sdk/wit/plugin.wit', import.meta.url), 'utf8');
  const contract = /^package conductor:plugin@([0-9.]+);/m.exec(wit)[1];
  const d = plugin.describe();
  assert.equal(d.sdkVersion, contract, 'written against another contract: review, then bump CONTRACT');
  assert.equal(CONTRACT, contract);
  assert.deepEqual([d.name, d.sources, d.dataTypes], ['js-works', ['js'], [MANIFEST_BUNDLES]]);
});

test('check-config names the key at fault', () => {
  for (const [config, message] of [
    [{ clusters: { c1: { w: { generation: 0, manifests: [] } } } }, 'config.clusters.c1.w.generation: must be at least 1'],
    [{ clusters: { c1: { w: {} } } }, 'config.clusters.c1.w: missing field `manifests`'],
    [{ clusters: {}, colour: 'blue' }, 'config.colour: unknown field'],
    [{ announce_after_ms: 'soon' }, 'config.announce_after_ms: must be a number'],
    [{ raise_uncaught_for: 3 }, 'config.raise_uncaught_for: must be a resource id'],
  ]) {
    assertInvalid(() => plugin.checkConfig(JSON.stringify(config)), message);
  }
  plugin.checkConfig(JSON.stringify(CONFIG));
  plugin.checkConfig('{}');
});

test('lists the works of a cluster and sets its timer in start', () => {
  plugin.start();
  const listed = plugin.list({ clusterName: 'cluster1', dataType: MANIFEST_BUNDLES });
  assert.equal(listed.length, 1);
  const [work] = listed;
  assert.equal(work.source, 'js');
  assert.equal(work.type, `${MANIFEST_BUNDLES}.spec.create_request`);
  assert.deepEqual(extension(work, 'resourceversion'), { tag: 'integer', val: 2 });
  assert.equal(extension(work, 'resourceid').val, uidOf('cluster1', 'web'));
  const metadata = JSON.parse(extension(work, 'metadata').val);
  assert.deepEqual([metadata.name, metadata.namespace], ['web', 'cluster1']);
  assert.equal(JSON.parse(new TextDecoder().decode(work.data)).manifests[0].kind, 'ConfigMap');
  assert.equal(typeof work.time.seconds, 'bigint', 'an s64 is a BigInt in the bindings');
  assert.deepEqual([...host.timers], [['announce', [10n, false]]]);
  assert.deepEqual(plugin.list({ clusterName: 'cluster1', dataType: 'coordination.k8s.io.v1.leases' }), []);
});

test('work uids are the uuid5 every language derives', () => {
  // CPython: str(uuid.uuid5(uuid.UUID(WORKS_NAMESPACE), "cluster1/web")), as static-works' and
  // python-works' tests pin it.
  assert.equal(uidOf('cluster1', 'web'), '41c88e70-99b2-599a-8b94-e770d3a8540f');
  assert.equal(uidOf('cluster2', 'db'), '461ee096-6995-56d3-8329-76778dad7bf4');
});

test('an uncaught exception answers internal with its stack', () => {
  plugin.init(JSON.stringify({ ...CONFIG, raise_uncaught_for: 'boom' }));
  assert.throws(
    () => plugin.handle(ANONYMOUS, statusEvent('boom', bytes('{}'))),
    (e) => {
      assert.equal(e.payload?.tag, 'internal', `${e}`);
      const lines = e.payload.val.split('\n');
      assert.equal(lines[0], 'uncaught exception in handle:');
      assert.equal(lines[1], 'Error: a deliberate bug for boom (config.raise_uncaught_for)');
      assert.match(e.payload.val, /deliberateBug/);
      assert.match(e.payload.val, /plugin\.js/);
      return true;
    },
  );
  // The next call is served.
  plugin.handle(ANONYMOUS, statusEvent(uidOf('cluster1', 'web'), bytes('{"conditions":[]}')));
  assert.deepEqual(host.logs.at(-1), ['info', 'status of cluster1/web stored (17 bytes)']);
});

test('stores status and refuses a malformed one', () => {
  const uid = uidOf('cluster1', 'web');
  plugin.handle(ANONYMOUS, statusEvent(uid, bytes('{"conditions":[]}')));
  assert.deepEqual(host.kv.get('status/cluster1/web'), bytes('{"conditions":[]}'));
  assert.deepEqual(host.logs.at(-1), ['info', 'status of cluster1/web stored (17 bytes)']);
  plugin.handle(ANONYMOUS, statusEvent(uid, bytes('{"conditions":[]}')));
  assert.deepEqual(host.logs.at(-1), ['info', 'status of cluster1/web unchanged']);
  for (const [bad, message] of [
    [bytes('["not", "a", "status"]'), 'not a ManifestBundleStatus'],
    [bytes('{"conditions": 3}'), 'not a ManifestBundleStatus'],
    [bytes('{'), 'is not JSON'],
    [undefined, 'is not JSON'],
  ]) {
    assertInvalid(() => plugin.handle(ANONYMOUS, statusEvent(uid, bad)), message);
  }
  assert.deepEqual(host.kv.get('status/cluster1/web'), bytes('{"conditions":[]}'), 'a refused status is not kept');
  // Whatever else kv holds (not even UTF-8) is a different status.
  host.kv.set('status/cluster1/web', Uint8Array.of(0xff));
  plugin.handle(ANONYMOUS, statusEvent(uid, bytes('{"conditions":[]}')));
  assert.deepEqual(host.logs.at(-1), ['info', 'status of cluster1/web stored (17 bytes)']);
});

test('a batch is handled in order and a refused status fails alone', () => {
  // The SDK's default handleBatch (the host's call for requests that waited together).
  const uid = uidOf('cluster1', 'web');
  const [stored, refused, ignored] = plugin.handleBatch([
    { identity: ANONYMOUS, event: statusEvent(uid, bytes('{"conditions":[]}')) },
    { identity: ANONYMOUS, event: statusEvent(uid, bytes('["not", "a", "status"]')) },
    { identity: ANONYMOUS, event: statusEvent('nope', bytes('{"conditions":[]}')) },
  ]);
  assert.deepEqual(stored, { tag: 'ok', val: undefined });
  assert.equal(refused.tag, 'err');
  assert.equal(refused.val.tag, 'invalid');
  assert.ok(refused.val.val.includes('status of cluster1/web is not a ManifestBundleStatus'), refused.val.val);
  assert.deepEqual(ignored, { tag: 'ok', val: undefined });
  assert.deepEqual(host.logs.slice(-2), [
    ['info', 'status of cluster1/web stored (17 bytes)'],
    ['info', 'status of unknown work nope in cluster1 ignored'],
  ]);
  assert.deepEqual([...host.kv.keys()], ['status/cluster1/web']);
});

test('a status for a work not served is answered ok', () => {
  plugin.handle(ANONYMOUS, statusEvent('nope', bytes('{"conditions":[]}')));
  assert.deepEqual(host.logs.at(-1), ['info', 'status of unknown work nope in cluster1 ignored']);
  assert.equal(host.kv.size, 0);
});

test('other event types are refused', () => {
  const event = { ...statusEvent(uidOf('cluster1', 'web'), bytes('{}')), type: `${MANIFEST_BUNDLES}.spec.create_request` };
  assertInvalid(() => plugin.handle(ANONYMOUS, event), 'js-works is read-only');
});

test('the announce timer emits every work', () => {
  host.subscribers = 3;
  plugin.onEvents([{ tag: 'timer', val: 'announce' }]);
  const emitted = takeEmitted();
  assert.equal(emitted.length, 2);
  assert.ok(emitted.every((e) => e.type.endsWith('.spec.update_request')));
  assert.deepEqual(host.logs.at(-1), ['info', 'announced 2 works to 6 subscribers']);
  plugin.onEvents([{ tag: 'timer', val: 'something-else' }]);
  assert.deepEqual(takeEmitted(), []);
});
