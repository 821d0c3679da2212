// Unit tests of ocm.mjs under node:test (scripts/build-polyglot-plugins.sh runs them). The
// encoders are checked against plugin-sdk/tests/ocm-vectors.json, which the Rust SDK's and the
// Python package's encoders are checked against too: the same objects make the same events in
// every language.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as ocm from './ocm.mjs';
import { ocm as reexported } from './sdk.mjs';

const vectors = JSON.parse(readFileSync(new URL('../tests/ocm-vectors.json', import.meta.url), 'utf8'));
const text = (bytes) => new TextDecoder().decode(bytes);
const bytes = (s) => new TextEncoder().encode(s);

/** What a vector compares: everything but the id and the time. */
function observed(event) {
  const extensions = {};
  for (const { name, value } of event.extensions) {
    let val = value.val;
    if (value.tag === 'timestamp') val = [Number(val.seconds), val.nanos];
    if (value.tag === 'bytes') val = [...val];
    extensions[name] = { [value.tag]: val };
  }
  return {
    type: event.type,
    source: event.source,
    extensions,
    data_content_type: event.dataContentType ?? null,
    data: event.data === undefined ? null : text(event.data),
  };
}

const agentEvent = (type, extensions, data) => ({
  id: '1',
  source: 'cluster1-work-agent',
  specVersion: '1.0',
  type,
  dataContentType: 'application/json',
  extensions: Object.entries(extensions).map(([name, value]) => ({ name, value })),
  data,
});

/** Runs `call`, which must throw the contract's `invalid` error containing `message`. */
function assertInvalid(call, message) {
  assert.throws(call, (e) => {
    assert.equal(e.payload?.tag, 'invalid', `${e}`);
    assert.ok(e.payload.val.includes(message), `${JSON.stringify(e.payload.val)} lacks ${JSON.stringify(message)}`);
    return true;
  });
}

test('the encoders make what the Rust SDK makes', () => {
  assert.ok(vectors.cases.length >= 10);
  for (const c of vectors.cases) {
    const encode = () =>
      c.encoder === 'manifest_work'
        ? ocm.manifestWorkEvent(c.object, c.source, c.action)
        : ocm.kubeObjectEvent(c.data_type, c.object, c.source, c.action);
    if ('error' in c.expected) {
      assert.throws(encode, (e) => {
        assert.ok(e instanceof ocm.CodecError, `${c.name}: ${e}`);
        assert.equal(e.message.split(': ')[0], c.expected.error.split(': ')[0], c.name);
        return true;
      });
      continue;
    }
    const event = encode();
    assert.deepEqual(observed(event), c.expected, c.name);
    assert.equal(event.specVersion, '1.0');
    assert.equal(event.id.length, 36);
    assert.equal(typeof event.time.seconds, 'bigint', 'an s64 is a BigInt in the bindings');
  }
  assert.equal(reexported.manifestWorkEvent, ocm.manifestWorkEvent, "the SDK's `ocm` is this module");
});

test('data types keep the dots of their group; event types parse as sdk-go parses them', () => {
  const dt = ocm.DataType.parse(ocm.MANIFEST_BUNDLES);
  assert.deepEqual([dt.group, dt.version, dt.resource], ['io.open-cluster-management.works', 'v1alpha1', 'manifestbundles']);
  assert.ok(dt.hasIntegerVersion());
  assert.ok(!ocm.DataType.parse(ocm.LEASES).hasIntegerVersion());
  assert.equal(`${dt}`, ocm.MANIFEST_BUNDLES);
  assert.equal(dt.eventType(ocm.STATUS, ocm.UPDATE_REQUEST), `${ocm.MANIFEST_BUNDLES}.status.update_request`);
  const t = ocm.EventType.parse('coordination.k8s.io.v1.leases.status.update_request');
  assert.deepEqual([`${t.dataType}`, t.subresource, t.action], [ocm.LEASES, 'status', 'update_request']);
  assert.equal(ocm.EventType.parse('test.v1.tests.spec.').action, '');
  assertInvalid(() => ocm.EventType.parse('v1.leases'), 'want <group>.<version>.<resource>.<subresource>.<action>');
  assertInvalid(() => ocm.EventType.parse('a.v1.things.cloudevents.heartbeat'), "unsupported subresource 'cloudevents'");
  assertInvalid(() => ocm.EventType.parse(ocm.HEARTBEAT_TYPE), 'unsupported');
  assertInvalid(() => ocm.DataType.parse('v1.leases'), 'want <group>.<version>.<resource>');
});

test('readers name what is missing or mistyped', () => {
  const e = agentEvent(`${ocm.MANIFEST_BUNDLES}.status.update_request`, {
    clustername: { tag: 'string', val: 'cluster1' },
    resourceid: { tag: 'integer', val: 7 },
    resourceversion: { tag: 'string', val: ' 12.9 ' },
    deletiontimestamp: { tag: 'string', val: '2025-06-01T11:00:00.25+02:00' },
    originalsource: { tag: 'string', val: 'widgets' },
  });
  assert.equal(ocm.clusterName(e), 'cluster1');
  assert.equal(ocm.originalSource(e), 'widgets');
  assert.equal(ocm.resourceVersion(e), 12, "a decimal string, truncated as sdk-go's ToInteger");
  assert.deepEqual(ocm.deletionTimestamp(e), { seconds: 1748768400n, nanos: 250_000_000 });
  assert.equal(ocm.metadataJson(e), undefined);
  assertInvalid(() => ocm.resourceId(e), 'extension resourceid is not a String but a Integer');
  assertInvalid(() => ocm.extensionStr(e, 'nope'), 'the event has no nope extension');
  ocm.setExtension(e, 'resourceversion', 'soon');
  assertInvalid(() => ocm.resourceVersion(e), "the string 'soon'");
});

test('resource version takes the wire type of its data type', () => {
  const e = ocm.newEvent('s', ocm.MANIFEST_BUNDLES, ocm.CREATE_REQUEST);
  assert.equal(e.type, `${ocm.MANIFEST_BUNDLES}.spec.create_request`);
  assert.equal(ocm.originalSource(e), '');
  ocm.setResourceVersion(e, ocm.MANIFEST_BUNDLES, 3);
  assert.deepEqual(ocm.extension(e, 'resourceversion'), { tag: 'integer', val: 3 });
  ocm.setResourceVersion(e, ocm.LEASES, 3101);
  assert.deepEqual(ocm.extension(e, 'resourceversion'), { tag: 'string', val: '3101' });
  assert.equal(ocm.resourceVersion(e), 3101);
  assert.equal(e.extensions.filter((x) => x.name === 'resourceversion').length, 1, 'set replaces');
  assert.throws(() => ocm.setExtension(e, 'big', 2 ** 40), ocm.CodecError);
});

test('times read and write RFC 3339', () => {
  assert.deepEqual(ocm.parseTime('2025-06-01T11:00:00Z'), { seconds: 1748775600n, nanos: 0 });
  assert.equal(ocm.formatTime({ seconds: 1748775600n, nanos: 0 }), '2025-06-01T11:00:00Z');
  assert.equal(ocm.formatTime({ seconds: 1748775600n, nanos: 500_000_000 }), '2025-06-01T11:00:00.5Z');
  assert.throws(() => ocm.parseTime('2025-06-01T11:00:00'), RangeError);
});

test('JSON is written compact with its keys sorted, as the Rust SDK writes it', () => {
  assert.equal(ocm.toJson({ b: 1, a: [{ d: null, c: 'é' }], u: undefined }), '{"a":[{"c":"é","d":null}],"b":1}');
});

test('status of an update: an object with a conditions list', () => {
  const statusEvent = (data) =>
    agentEvent(
      `${ocm.MANIFEST_BUNDLES}.status.update_request`,
      { clustername: { tag: 'string', val: 'cluster1' }, resourceid: { tag: 'string', val: 'web-id' } },
      data,
    );
  const applied = { conditions: [{ type: 'Applied', status: 'True' }] };
  assert.deepEqual(ocm.statusOf(statusEvent(bytes(JSON.stringify(applied)))), applied);
  assert.deepEqual(ocm.statusOf(statusEvent(bytes('{}'))), {});
  for (const [bad, message] of [
    [bytes('{'), 'status of cluster1/web-id is not JSON'],
    [undefined, 'status of cluster1/web-id is not JSON'],
    [bytes('[1]'), 'status of cluster1/web-id is not a status'],
    [bytes('{"conditions": 3}'), 'is not a status (want an object with a `conditions` list)'],
  ]) {
    assertInvalid(() => ocm.statusOf(statusEvent(bad)), message);
  }
  assert.ok(ocm.isDeleted({ conditions: [{ type: 'Applied', status: 'True' }, { type: 'Deleted', status: 'True' }] }));
  assert.ok(!ocm.isDeleted({ conditions: [{ type: 'Deleted', status: 'False' }] }));
  assert.ok(!ocm.isDeleted({ conditions: 'Deleted' }));
  assert.ok(!ocm.isDeleted(null));
  assert.ok(ocm.isTrue({ conditions: [{ type: 'Available', status: 'True' }] }, 'Available'));
});

test('resync requests list what the agent holds', () => {
  const request = (data) => agentEvent(`${ocm.MANIFEST_BUNDLES}.spec.resync_request`, {}, data);
  assert.deepEqual(ocm.resourceVersions(request(bytes('{"resourceVersions":[{"resourceID":"a","resourceVersion":3}]}'))), [
    { resourceId: 'a', resourceVersion: 3 },
  ]);
  assert.deepEqual(ocm.resourceVersions(request(bytes('{"resourceVersions":null}'))), []);
  assert.deepEqual(ocm.resourceVersions(request(undefined)), []);
  assertInvalid(() => ocm.resourceVersions(request(bytes('{"resourceVersions":[{"resourceID":1}]}'))), 'resourceVersions[0]');
  assert.equal(ocm.manifestWorks().plural, 'manifestworks');
  assert.equal(ocm.managedClusters().group, 'cluster.open-cluster-management.io');
});
