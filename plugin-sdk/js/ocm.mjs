// Open Cluster Management conventions on top of CloudEvents, as the Rust SDK's `ocm` module has
// them: data and event types, the OCM extensions (`originalsource`, `clustername`, `resourceid`,
// `resourceversion` as an integer for manifest bundles, `metadata` as JSON, `logtracing`), the
// encoders of hub → agent spec events, and the parsers of what agents send (statuses and their
// conditions, resync requests). Runs in the component (no Node API) and in Node.
//
//     import { ocm } from 'conductor-plugin-sdk';
//
//     list(options) {
//       return worksOf(options.clusterName).map((w) => ocm.manifestWorkEvent(w, SOURCE, ocm.CREATE_REQUEST));
//     },
//     handle(identity, event) {
//       const status = ocm.statusOf(event);          // the status, checked (throws `invalid`)
//       if (ocm.isDeleted(status)) { … }
//     },
//
// Readers of what an agent sent throw the contract's `invalid` error (a `PluginError`), so an
// uncaught one answers the agent as OCM's own server would. The encoders throw `CodecError` for
// an object of the plugin's own that cannot be encoded: a bug, which `guard` answers as
// `internal`. JSON is written as the Rust SDK writes it (compact, keys sorted), so the three SDKs
// put the same bytes on the wire for the same object (plugin-sdk/tests/ocm-vectors.json).

import { PluginError } from './error.mjs';

/** The type of the heartbeat the broker sends on every subscription. */
export const HEARTBEAT_TYPE = 'io.open-cluster-management.cloudevents.heartbeat';

// The data types OCM agents speak.
export const MANIFEST_BUNDLES = 'io.open-cluster-management.works.v1alpha1.manifestbundles';
export const MANAGED_CLUSTERS = 'cluster.open-cluster-management.io.v1.managedclusters';
export const CSRS = 'certificates.k8s.io.v1.certificatesigningrequests';
export const LEASES = 'coordination.k8s.io.v1.leases';
export const EVENTS = 'events.k8s.io.v1.events';
export const ADDONS_V1ALPHA1 = 'addon.open-cluster-management.io.v1alpha1.managedclusteraddons';
export const ADDONS_V1BETA1 = 'addon.open-cluster-management.io.v1beta1.managedclusteraddons';
export const TOKEN_REQUESTS = 'authentication.k8s.io.v1.tokenrequests';

// Subresources: `spec` (hub → agent desired state), `status` (agent → hub observed state).
export const SPEC = 'spec';
export const STATUS = 'status';

// The actions of OCM event types (not validated by the parser, as sdk-go does not).
export const CREATE_REQUEST = 'create_request';
export const UPDATE_REQUEST = 'update_request';
export const DELETE_REQUEST = 'delete_request';
export const RESYNC_REQUEST = 'resync_request';
export const RESYNC_RESPONSE = 'resync_response';

// The extensions.
export const CLUSTER_NAME = 'clustername';
export const ORIGINAL_SOURCE = 'originalsource';
export const RESOURCE_ID = 'resourceid';
export const RESOURCE_VERSION = 'resourceversion';
export const DELETION_TIMESTAMP = 'deletiontimestamp';
export const SEQUENCE_ID = 'sequenceid';
export const STATUS_HASH = 'statushash';
export const METADATA = 'metadata';
export const LOG_TRACING = 'logtracing';

/** The annotation prefix whose entries travel in `logtracing`. */
export const LOG_TRACING_PREFIX = 'logging.open-cluster-management.io/';
/** The label naming a CSR's cluster. */
export const CLUSTER_NAME_LABEL = 'open-cluster-management.io/cluster-name';
/** The condition a work agent sets once it has deleted a resource from its cluster. */
export const DELETED = 'Deleted';

const S32_MIN = -(2 ** 31);
const S32_MAX = 2 ** 31 - 1;

/** An object of the plugin's own that cannot be encoded (a missing uid, a bad timestamp). */
export class CodecError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CodecError';
  }
}

/** The contract's `invalid` error, to throw: the agent sees a 422 `Invalid` status. */
export const invalid = (message) => new PluginError('invalid', message);

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const quoted = (s) => `'${String(s).replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/** `<group>.<version>.<resource>`; the group may contain dots. */
export class DataType {
  constructor(group, version, resource) {
    this.group = group;
    this.version = version;
    this.resource = resource;
  }

  static parse(text) {
    const at = String(text).split('.');
    if (at.length < 3) throw invalid(`unsupported cloudevents data type format ${quoted(text)}: want <group>.<version>.<resource>`);
    const resource = at.pop();
    const version = at.pop();
    return new DataType(at.join('.'), version, resource);
  }

  /** Whether events of this type carry `resourceversion` as an integer (the generation). */
  hasIntegerVersion() {
    return this.toString() === MANIFEST_BUNDLES;
  }

  /** The event type `<this>.<subresource>.<action>`. */
  eventType(subresource, action) {
    return `${this}.${subresource}.${action}`;
  }

  toString() {
    return `${this.group}.${this.version}.${this.resource}`;
  }
}

/** `<group>.<version>.<resource>.<subresource>.<action>`, parsed as sdk-go parses it. */
export class EventType {
  constructor(dataType, subresource, action) {
    this.dataType = dataType;
    this.subresource = subresource;
    this.action = action;
  }

  static parse(text) {
    const at = String(text).split('.');
    if (at.length < 5) {
      throw invalid(
        `unsupported cloudevents type format ${quoted(text)}: want <group>.<version>.<resource>.<subresource>.<action>`,
      );
    }
    const action = at.pop();
    const subresource = at.pop();
    const resource = at.pop();
    const version = at.pop();
    if (subresource !== SPEC && subresource !== STATUS) {
      throw invalid(`unsupported subresource ${quoted(subresource)}: want spec or status`);
    }
    return new EventType(new DataType(at.join('.'), version, resource), subresource, action);
  }

  toString() {
    return `${this.dataType}.${this.subresource}.${this.action}`;
  }
}

// --- reading extensions ----------------------------------------------------------------------

const TYPE_NAMES = {
  boolean: 'Boolean',
  integer: 'Integer',
  string: 'String',
  bytes: 'Binary',
  uri: 'URI',
  'uri-ref': 'URIRef',
  timestamp: 'Timestamp',
};

/** The value of the extension `name` (`{ tag, val }`), or undefined. */
export function extension(event, name) {
  return (event.extensions ?? []).find((e) => e.name === name)?.value;
}

const wrongType = (name, wanted, found) => invalid(`extension ${name} is not a ${wanted} but a ${TYPE_NAMES[found.tag] ?? found.tag}`);

function required(event, name) {
  const value = extension(event, name);
  if (value === undefined) throw invalid(`the event has no ${name} extension`);
  return value;
}

/** The string extension `name`; throws `invalid` when it is missing or not a string. */
export function extensionStr(event, name) {
  const value = required(event, name);
  if (value.tag !== 'string') throw wrongType(name, 'String', value);
  return value.val;
}

/**
 * The extension `name` as an integer (a Number): an Integer, or a String holding a decimal number
 * (the Go SDK's `ToInteger`, which parses a float and truncates it).
 */
export function extensionInt(event, name) {
  const value = required(event, name);
  if (value.tag === 'integer') return value.val;
  if (value.tag === 'string') {
    const text = value.val.trim();
    const number = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) ? Number(text) : NaN;
    if (Number.isFinite(number)) return Math.trunc(number);
    throw invalid(`extension ${name} is not an Integer but the string ${quoted(value.val)}`);
  }
  throw wrongType(name, 'Integer', value);
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 time as the contract's timestamp (`{ seconds: BigInt, nanos }`); throws `RangeError`. */
export function parseTime(text) {
  const m = RFC3339.exec(String(text).trim());
  if (!m) throw new RangeError(`${quoted(text)} is not an RFC 3339 time`);
  const [, y, mo, d, h, mi, s, fraction = '', zone] = m;
  let offset = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone[0] === '-' ? -1 : 1;
    offset = sign * (Number(zone.slice(1, 3)) * 3600 + Number(zone.slice(4, 6)) * 60);
  }
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  if (Number.isNaN(ms)) throw new RangeError(`${quoted(text)} is not an RFC 3339 time`);
  return { seconds: BigInt(ms / 1000 - offset), nanos: Number((fraction + '000000000').slice(0, 9)) };
}

/** A timestamp in RFC 3339, UTC (`2025-06-01T11:00:00Z`, with the nanoseconds when there are some). */
export function formatTime(t) {
  const base = new Date(Number(t.seconds) * 1000).toISOString().slice(0, 19);
  if (!t.nanos) return `${base}Z`;
  return `${base}.${String(t.nanos).padStart(9, '0').replace(/0+$/, '')}Z`;
}

/** The extension `name` as a time: a Timestamp, or an RFC 3339 String (the Go SDK's `ToTime`). */
export function extensionTime(event, name) {
  const value = required(event, name);
  if (value.tag === 'timestamp') return value.val;
  if (value.tag === 'string') {
    try {
      return parseTime(value.val);
    } catch {
      throw invalid(`extension ${name} is not a Timestamp but the string ${quoted(value.val)}`);
    }
  }
  throw wrongType(name, 'Timestamp', value);
}

/** `clustername`: the managed cluster the event is for or from. */
export const clusterName = (event) => extensionStr(event, CLUSTER_NAME);

/** `originalsource`: for agent events, the source of the spec event the resource came from. */
export function originalSource(event) {
  const value = extension(event, ORIGINAL_SOURCE);
  return value?.tag === 'string' ? value.val : undefined;
}

/** `resourceid`: the resource's UID (kube) or UUID (maestro). */
export const resourceId = (event) => extensionStr(event, RESOURCE_ID);

/**
 * `resourceversion` as a number: an integer for manifest bundles (the generation), a decimal
 * string for the other types (the Kubernetes resourceVersion).
 */
export const resourceVersion = (event) => extensionInt(event, RESOURCE_VERSION);

/** `deletiontimestamp`: present while the resource is being deleted. */
export function deletionTimestamp(event) {
  try {
    return extensionTime(event, DELETION_TIMESTAMP);
  } catch {
    return undefined;
  }
}

/** `metadata`: the JSON of the resource's ObjectMeta. */
export function metadataJson(event) {
  const value = extension(event, METADATA);
  return value?.tag === 'string' ? value.val : undefined;
}

// --- writing extensions ----------------------------------------------------------------------

/**
 * A value as an extension value: a string → String, a boolean → Boolean, an integer → Integer
 * (the int32 range), a Uint8Array → Binary, `{ seconds, nanos }` → Timestamp; a `{ tag, val }` as
 * it is.
 */
export function extensionValue(value) {
  if (isObject(value) && value.tag in TYPE_NAMES && 'val' in value) return value;
  if (typeof value === 'boolean') return { tag: 'boolean', val: value };
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < S32_MIN || value > S32_MAX) {
      throw new CodecError(`${value} does not fit an Integer extension (int32)`);
    }
    return { tag: 'integer', val: value };
  }
  if (typeof value === 'string') return { tag: 'string', val: value };
  if (value instanceof Uint8Array) return { tag: 'bytes', val: value };
  if (isObject(value) && typeof value.seconds === 'bigint') return { tag: 'timestamp', val: value };
  throw new CodecError(`no extension type for ${value === null ? 'null' : typeof value}`);
}

/** Sets the extension `name` (replacing one of that name) to `value` (see `extensionValue`). */
export function setExtension(event, name, value) {
  const converted = extensionValue(value);
  event.extensions ??= [];
  const found = event.extensions.find((e) => e.name === name);
  if (found) found.value = converted;
  else event.extensions.push({ name, value: converted });
}

/**
 * Sets `resourceversion` with the wire type `dataType` uses: an Integer for manifest bundles
 * (saturated to the int32 range), a String for the others.
 */
export function setResourceVersion(event, dataType, version) {
  if (DataType.parse(String(dataType)).hasIntegerVersion()) {
    setExtension(event, RESOURCE_VERSION, { tag: 'integer', val: Math.max(S32_MIN, Math.min(S32_MAX, Math.trunc(Number(version)))) });
  } else {
    setExtension(event, RESOURCE_VERSION, { tag: 'string', val: String(version) });
  }
}

// --- data ------------------------------------------------------------------------------------

/** Orders strings by code point, as the Rust SDK (UTF-8 bytes) and Python do. */
function byCodePoint(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d) return d;
  }
  return x.length - y.length;
}

/** `value` as the Rust SDK writes JSON: compact, keys sorted, non-ASCII as it is. */
export function toJson(value) {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : toJson(v))).join(',')}]`;
  if (isObject(value) && typeof value.toJSON !== 'function') {
    const keys = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort(byCodePoint);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${toJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const UTF8_ENCODER = new TextEncoder();
const UTF8_DECODER = new TextDecoder('utf-8', { fatal: true });

/** Sets the event's data to `value` as JSON, and its content type to `application/json`. */
export function setJsonData(event, value) {
  event.data = UTF8_ENCODER.encode(toJson(value));
  event.dataContentType = 'application/json';
}

/** The event's data parsed as JSON; throws `invalid` naming the event type when it is not. */
export function dataJson(event) {
  try {
    return JSON.parse(UTF8_DECODER.decode(event.data ?? new Uint8Array()));
  } catch (e) {
    throw invalid(`the data of ${event.type} is not JSON: ${e.message}`);
  }
}

/** The current time as the contract's timestamp. */
export function now() {
  const ms = Date.now();
  return { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

function uuid4() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = Array.from(b, (v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * An event of `<dataType>.<subresource>.<action>` from `source`: a new id, the time now, and an
 * empty `originalsource` (what OCM's hub encoders send).
 */
export function newEvent(source, dataType, action, subresource = SPEC) {
  return {
    id: uuid4(),
    source,
    specVersion: '1.0',
    type: DataType.parse(String(dataType)).eventType(subresource, action),
    dataContentType: undefined,
    dataSchema: undefined,
    subject: undefined,
    time: now(),
    extensions: [{ name: ORIGINAL_SOURCE, value: { tag: 'string', val: '' } }],
    data: undefined,
  };
}

// --- encoders (hub → agent) -------------------------------------------------------------------

function strAt(value, ...path) {
  for (const key of path) {
    if (!isObject(value)) return undefined;
    value = value[key];
  }
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function deletionTimestampOf(meta) {
  const text = strAt(meta, 'deletionTimestamp');
  if (text === undefined) return undefined;
  try {
    return parseTime(text);
  } catch (e) {
    throw new CodecError(`invalid metadata.deletionTimestamp: ${e.message}`);
  }
}

/**
 * A ManifestWork (an object) as the `manifestbundles` spec event OCM's work agents read:
 * `clustername` = namespace, `resourceid` = uid, `resourceversion` = generation (an integer),
 * `metadata` = the ObjectMeta JSON, `logtracing` (its `logging.open-cluster-management.io/`
 * annotations), and the ManifestBundle (`manifests` of `spec.workload`, `deleteOption`,
 * `manifestConfigs`, `executer`) as data — or `deletiontimestamp` and no data while deleting.
 */
export function manifestWorkEvent(work, source, action) {
  const meta = isObject(work) ? work.metadata : undefined;
  if (!isObject(meta)) throw new CodecError('ManifestWork has no metadata');
  const uid = strAt(meta, 'uid');
  if (uid === undefined) throw new CodecError('ManifestWork has no metadata.uid');
  const namespace = strAt(meta, 'namespace');
  if (namespace === undefined) throw new CodecError('ManifestWork has no metadata.namespace');
  const generation = Number.isInteger(meta.generation) ? meta.generation : 0;
  const e = newEvent(source, MANIFEST_BUNDLES, action);
  setExtension(e, CLUSTER_NAME, namespace);
  setExtension(e, RESOURCE_ID, uid);
  setResourceVersion(e, MANIFEST_BUNDLES, generation);
  setExtension(e, METADATA, toJson(meta));
  const annotations = isObject(meta.annotations) ? meta.annotations : {};
  const tracing = Object.fromEntries(Object.entries(annotations).filter(([k]) => k.startsWith(LOG_TRACING_PREFIX)));
  setExtension(e, LOG_TRACING, toJson(tracing));
  const deleting = deletionTimestampOf(meta);
  if (deleting !== undefined) {
    setExtension(e, DELETION_TIMESTAMP, deleting);
    return e;
  }
  const spec = isObject(work.spec) ? work.spec : {};
  const workload = isObject(spec.workload) ? spec.workload : {};
  const bundle = { manifests: workload.manifests ?? null };
  for (const [field, wire] of [
    ['deleteOption', 'deleteOption'],
    ['manifestConfigs', 'manifestConfigs'],
    ['executor', 'executer'],
  ]) {
    if (spec[field] !== undefined && spec[field] !== null) bundle[wire] = spec[field];
  }
  setJsonData(e, bundle);
  return e;
}

const KINDS = {
  [MANAGED_CLUSTERS]: 'ManagedCluster',
  [CSRS]: 'CertificateSigningRequest',
  [LEASES]: 'Lease',
  [EVENTS]: 'Event',
  [ADDONS_V1ALPHA1]: 'ManagedClusterAddOn',
  [ADDONS_V1BETA1]: 'ManagedClusterAddOn',
  [TOKEN_REQUESTS]: 'TokenRequest',
};

/**
 * Any other Kubernetes object as a spec event of `dataType`: `apiVersion` and `kind` stamped on a
 * copy of the object, `resourceid` = uid, `resourceversion` = the resourceVersion string,
 * `clustername` from the object (a cluster's name, a CSR's cluster-name label, or the namespace).
 */
export function kubeObjectEvent(dataType, object, source, action) {
  const dt = DataType.parse(String(dataType));
  const name = dt.toString();
  const meta = isObject(object) ? object.metadata : undefined;
  if (!isObject(meta)) throw new CodecError('object has no metadata');
  const cluster =
    name === MANAGED_CLUSTERS
      ? strAt(meta, 'name')
      : name === CSRS
        ? strAt(meta, 'labels', CLUSTER_NAME_LABEL)
        : strAt(meta, 'namespace');
  if (cluster === undefined) throw new CodecError('object has no cluster name (name, cluster-name label or namespace)');
  const e = newEvent(source, dt, action);
  setExtension(e, CLUSTER_NAME, cluster);
  const uid = strAt(meta, 'uid');
  if (uid !== undefined) setExtension(e, RESOURCE_ID, uid);
  const version = strAt(meta, 'resourceVersion');
  if (version !== undefined) setExtension(e, RESOURCE_VERSION, version);
  const deleting = deletionTimestampOf(meta);
  if (deleting !== undefined) setExtension(e, DELETION_TIMESTAMP, deleting);
  const stamped = { ...object };
  if (name !== TOKEN_REQUESTS) {
    const kind = KINDS[name];
    if (kind === undefined) throw new CodecError(`no known kind for data type ${name}`);
    stamped.apiVersion = `${dt.group}/${dt.version}`;
    stamped.kind = kind;
  }
  setJsonData(e, stamped);
  return e;
}

// --- parsers (agent → hub) --------------------------------------------------------------------

/**
 * The status an agent reports (a `status.update_request`'s data): a JSON object whose
 * `conditions`, when present, is a list. Throws `invalid` otherwise, naming the resource.
 */
export function statusOf(event) {
  const named = [CLUSTER_NAME, RESOURCE_ID].map((n) => extension(event, n)).map((v) => (v?.tag === 'string' ? v.val : '?'));
  const what = `status of ${named.join('/')}`;
  let status;
  try {
    status = JSON.parse(UTF8_DECODER.decode(event.data ?? new Uint8Array()));
  } catch (e) {
    throw invalid(`${what} is not JSON: ${e.message}`);
  }
  const conditions = isObject(status) ? status.conditions : undefined;
  if (!isObject(status) || !(conditions === undefined || conditions === null || Array.isArray(conditions))) {
    throw invalid(`${what} is not a status (want an object with a \`conditions\` list)`);
  }
  return status;
}

/** Whether `status` (an object with a `conditions` list) holds the condition `kind` with status `"True"`. */
export function isTrue(status, kind) {
  const conditions = isObject(status) ? status.conditions : undefined;
  return Array.isArray(conditions) && conditions.some((c) => isObject(c) && c.type === kind && c.status === 'True');
}

/** Whether the agent reports the resource deleted: the condition `Deleted=True`. */
export const isDeleted = (status) => isTrue(status, DELETED);

/**
 * The resources a spec resync request says the agent holds, as `[{ resourceId, resourceVersion }]`
 * (`{"resourceVersions":[{"resourceID":"…","resourceVersion":3}]}`; null or missing: none).
 */
export function resourceVersions(event) {
  if (!event.data || event.data.length === 0) return [];
  const payload = dataJson(event);
  if (!isObject(payload)) throw invalid(`the data of ${event.type} is not an object`);
  const listed = payload.resourceVersions ?? [];
  if (!Array.isArray(listed)) throw invalid(`resourceVersions of ${event.type} is not a list`);
  return listed.map((item, i) => {
    const id = isObject(item) ? item.resourceID : undefined;
    const version = isObject(item) ? item.resourceVersion : undefined;
    if (typeof id !== 'string' || !Number.isInteger(version)) {
      throw invalid(`resourceVersions[${i}] of ${event.type}: want resourceID (a string) and resourceVersion (an integer)`);
    }
    return { resourceId: id, resourceVersion: version };
  });
}

// --- OCM's own resources, as the `kube` capability names them ---------------------------------

/** `ManagedCluster` (cluster-scoped): a cluster registered with the hub. */
export const managedClusters = () => ({
  group: 'cluster.open-cluster-management.io',
  version: 'v1',
  kind: 'ManagedCluster',
  plural: 'managedclusters',
});

/** `ManifestWork` (in the cluster's namespace): what the work agent applies. */
export const manifestWorks = () => ({ group: 'work.open-cluster-management.io', version: 'v1', kind: 'ManifestWork', plural: 'manifestworks' });
