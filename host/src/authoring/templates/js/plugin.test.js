// Unit tests of {{name}} under node:test, against the SDK's fakes: the `conductor:plugin/…`
// imports load conductor-plugin-sdk's fakes (`--import conductor-plugin-sdk/register`). No host,
// no WebAssembly:
//
//     npm test
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';

import { CONTRACT as SDK_CONTRACT, ocm } from 'conductor-plugin-sdk';
import { host, reset } from 'conductor-plugin-sdk/fakes';

import { CONTRACT, NAME, plugin, uidOf } from './plugin.js';

const CONFIG = { clusters: { cluster1: { web: { generation: 2, manifests: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web' } }] } } } };
const ANONYMOUS = { user: 'system:anonymous', groups: [] };
const bytes = (text) => new TextEncoder().encode(text);

const status = (resourceId, data) => ({
  id: '1',
  source: 'cluster1-work-agent',
  specVersion: '1.0',
  type: `${ocm.MANIFEST_BUNDLES}.status.update_request`,
  dataContentType: 'application/json',
  extensions: [
    { name: 'clustername', value: { tag: 'string', val: 'cluster1' } },
    { name: 'resourceid', value: { tag: 'string', val: resourceId } },
  ],
  data,
});

beforeEach(() => {
  reset();
  plugin.init(JSON.stringify(CONFIG));
});

test("describes itself against the SDK's contract", () => {
  const d = plugin.describe();
  assert.equal(d.sdkVersion, SDK_CONTRACT, 'written against another contract: review, then move CONTRACT');
  assert.equal(CONTRACT, SDK_CONTRACT);
  assert.deepEqual([d.name, d.sources], [NAME, [NAME]]);
});

test('a bad configuration names its key', () => {
  assert.throws(
    () => plugin.checkConfig(JSON.stringify({ clusters: { c1: { w: { generation: 0, manifests: [] } } } })),
    (e) => e.payload?.tag === 'invalid' && e.payload.val.includes('config.clusters.c1.w.generation'),
  );
  assert.throws(
    () => plugin.checkConfig(JSON.stringify({ source: '' })),
    (e) => e.payload?.tag === 'invalid' && e.payload.val.includes('config.source'),
  );
});

test("resync answers with the cluster's works", () => {
  const listed = plugin.list({ clusterName: 'cluster1', dataType: ocm.MANIFEST_BUNDLES });
  assert.equal(listed.length, 1);
  assert.equal(listed[0].source, NAME);
  assert.equal(ocm.resourceId(listed[0]), uidOf(NAME, 'cluster1', 'web'));
  assert.equal(ocm.resourceVersion(listed[0]), 2);
  assert.equal(listed[0].type, `${ocm.MANIFEST_BUNDLES}.spec.create_request`);
  assert.deepEqual(plugin.list({ clusterName: 'cluster2', dataType: ocm.MANIFEST_BUNDLES }), []);
});

test('a copy configured with another source sends its works from it', () => {
  plugin.init(JSON.stringify({ ...CONFIG, source: 'copy' }));
  const listed = plugin.list({ clusterName: 'cluster1', dataType: ocm.MANIFEST_BUNDLES });
  assert.equal(listed[0].source, 'copy', "agents send its status updates to the source's plugin");
  assert.equal(ocm.resourceId(listed[0]), uidOf('copy', 'cluster1', 'web'));
  assert.notEqual(uidOf('copy', 'cluster1', 'web'), uidOf(NAME, 'cluster1', 'web'));
});

test('keeps the status, forgets it when deleted and refuses a bad one', () => {
  const web = uidOf(NAME, 'cluster1', 'web');
  const applied = bytes('{"conditions":[{"type":"Applied","status":"True"}]}');
  plugin.handle(ANONYMOUS, status(web, applied));
  assert.deepEqual([...host.kv.keys()], ['status/cluster1/web']);
  assert.deepEqual(host.kv.get('status/cluster1/web'), applied);
  assert.throws(
    () => plugin.handle(ANONYMOUS, status(web, bytes('not a status'))),
    (e) => e.payload?.tag === 'invalid' && e.payload.val.includes('is not JSON'),
  );
  plugin.handle(ANONYMOUS, status(web, bytes('{"conditions":[{"type":"Deleted","status":"True"}]}')));
  assert.equal(host.kv.size, 0);
  assert.deepEqual(host.logs.at(-1), ['info', 'cluster1/web deleted by its agent']);
  plugin.handle(ANONYMOUS, status('nope', applied));
  assert.equal(host.kv.size, 0, 'a status for a work not served is not kept');
});
