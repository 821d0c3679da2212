"""`conductor_sdk.ocm`: Open Cluster Management conventions on top of CloudEvents, as the Rust SDK's
`ocm` module has them — data and event types, the OCM extensions (`originalsource`,
`clustername`, `resourceid`, `resourceversion` as an integer for manifest bundles, `metadata` as
JSON, `logtracing`), the encoders of hub → agent spec events, and the parsers of what agents send
(statuses and their conditions, resync requests).

    from conductor_sdk import ocm

    def list(self, options):
        return [ocm.manifest_work_event(work, SOURCE, ocm.CREATE_REQUEST) for work in works_of(options.cluster_name)]

    def handle(self, identity, event):
        kind = ocm.EventType.parse(event.type)          # raises Err(invalid) for a malformed type
        cluster, resource = ocm.cluster_name(event), ocm.resource_id(event)
        status = ocm.status_of(event)                    # the ManifestBundleStatus, checked
        if ocm.is_deleted(status):
            ...

Readers of what an agent sent raise the contract's `invalid` error (`Err(Error_Invalid(…))`,
naming what is wrong), so an uncaught one answers the agent as OCM's own server would. The
encoders raise `CodecError` (a `ValueError`) for an object of the plugin's own that cannot be
encoded: a bug, which the SDK's glue answers as `internal` with its traceback. JSON is written as
the Rust SDK writes it (compact, keys sorted), so the three SDKs put the same bytes on the wire
for the same object (plugin-sdk/tests/ocm-vectors.json holds the cases all three are tested
against).
"""

from __future__ import annotations

import datetime as _datetime
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from componentize_py_types import Err
from wit_world.imports.types import (
    CloudEvent,
    Error_Invalid,
    Extension,
    ExtensionValue_Boolean,
    ExtensionValue_Bytes,
    ExtensionValue_Integer,
    ExtensionValue_String,
    ExtensionValue_Timestamp,
    ExtensionValue_Uri,
    ExtensionValue_UriRef,
    Timestamp,
)

try:  # `kube` keeps its types in every derived world; imported now, so a component holds it
    from wit_world.imports import kube as _kube
except ImportError:  # pragma: no cover - bindings of another world
    _kube = None

# --- data and event types --------------------------------------------------------------------

#: The type of the heartbeat the broker sends on every subscription.
HEARTBEAT_TYPE = "io.open-cluster-management.cloudevents.heartbeat"

# The data types OCM agents speak.
MANIFEST_BUNDLES = "io.open-cluster-management.works.v1alpha1.manifestbundles"
MANAGED_CLUSTERS = "cluster.open-cluster-management.io.v1.managedclusters"
CSRS = "certificates.k8s.io.v1.certificatesigningrequests"
LEASES = "coordination.k8s.io.v1.leases"
EVENTS = "events.k8s.io.v1.events"
ADDONS_V1ALPHA1 = "addon.open-cluster-management.io.v1alpha1.managedclusteraddons"
ADDONS_V1BETA1 = "addon.open-cluster-management.io.v1beta1.managedclusteraddons"
TOKEN_REQUESTS = "authentication.k8s.io.v1.tokenrequests"

# Subresources: `spec` (hub → agent desired state), `status` (agent → hub observed state).
SPEC = "spec"
STATUS = "status"

# The actions of OCM event types (not validated by the parser, as sdk-go does not).
CREATE_REQUEST = "create_request"
UPDATE_REQUEST = "update_request"
DELETE_REQUEST = "delete_request"
RESYNC_REQUEST = "resync_request"
RESYNC_RESPONSE = "resync_response"

# --- extensions ------------------------------------------------------------------------------

CLUSTER_NAME = "clustername"
ORIGINAL_SOURCE = "originalsource"
RESOURCE_ID = "resourceid"
RESOURCE_VERSION = "resourceversion"
DELETION_TIMESTAMP = "deletiontimestamp"
SEQUENCE_ID = "sequenceid"
STATUS_HASH = "statushash"
METADATA = "metadata"
LOG_TRACING = "logtracing"

#: The annotation prefix whose entries travel in `logtracing`.
LOG_TRACING_PREFIX = "logging.open-cluster-management.io/"
#: The label naming a CSR's cluster.
CLUSTER_NAME_LABEL = "open-cluster-management.io/cluster-name"
#: The condition a work agent sets once it has deleted a resource from its cluster.
DELETED = "Deleted"

_S32_MIN, _S32_MAX = -(2**31), 2**31 - 1


class CodecError(ValueError):
    """An object of the plugin's own that cannot be encoded (a missing uid, a bad timestamp)."""


def invalid(message: str) -> Err:
    """The contract's `invalid` error, to raise: the agent sees a 422 `Invalid` status."""
    return Err(Error_Invalid(message))


@dataclass(frozen=True)
class DataType:
    """`<group>.<version>.<resource>`; the group may contain dots."""

    group: str
    version: str
    resource: str

    @classmethod
    def parse(cls, text: str) -> "DataType":
        parts = text.rsplit(".", 2)
        if len(parts) != 3:
            raise invalid(f"unsupported cloudevents data type format {text!r}: want <group>.<version>.<resource>")
        return cls(*parts)

    def has_integer_version(self) -> bool:
        """Whether events of this type carry `resourceversion` as an integer (the generation)."""
        return str(self) == MANIFEST_BUNDLES

    def event_type(self, subresource: str, action: str) -> str:
        """The event type `<self>.<subresource>.<action>`."""
        return f"{self}.{subresource}.{action}"

    def __str__(self) -> str:
        return f"{self.group}.{self.version}.{self.resource}"


@dataclass(frozen=True)
class EventType:
    """`<group>.<version>.<resource>.<subresource>.<action>`, parsed as sdk-go parses it."""

    data_type: DataType
    subresource: str
    action: str

    @classmethod
    def parse(cls, text: str) -> "EventType":
        parts = text.rsplit(".", 4)
        if len(parts) != 5:
            raise invalid(
                f"unsupported cloudevents type format {text!r}: want <group>.<version>.<resource>.<subresource>.<action>"
            )
        group, version, resource, subresource, action = parts
        if subresource not in (SPEC, STATUS):
            raise invalid(f"unsupported subresource {subresource!r}: want spec or status")
        return cls(DataType(group, version, resource), subresource, action)

    def __str__(self) -> str:
        return f"{self.data_type}.{self.subresource}.{self.action}"


# --- reading extensions ----------------------------------------------------------------------

_TYPE_NAMES = {
    ExtensionValue_Boolean: "Boolean",
    ExtensionValue_Integer: "Integer",
    ExtensionValue_String: "String",
    ExtensionValue_Bytes: "Binary",
    ExtensionValue_Uri: "URI",
    ExtensionValue_UriRef: "URIRef",
    ExtensionValue_Timestamp: "Timestamp",
}


def extension(event: CloudEvent, name: str) -> Optional[Any]:
    """The value of the extension `name` (an `ExtensionValue_…`), or None."""
    for e in event.extensions:
        if e.name == name:
            return e.value
    return None


def _wrong_type(name: str, wanted: str, found: Any) -> Err:
    return invalid(f"extension {name} is not a {wanted} but a {_TYPE_NAMES.get(type(found), type(found).__name__)}")


def extension_str(event: CloudEvent, name: str) -> str:
    """The string extension `name`; raises `invalid` when it is missing or not a string."""
    value = extension(event, name)
    if value is None:
        raise invalid(f"the event has no {name} extension")
    if not isinstance(value, ExtensionValue_String):
        raise _wrong_type(name, "String", value)
    return value.value


def extension_int(event: CloudEvent, name: str) -> int:
    """The extension `name` as an integer: an Integer, or a String holding a decimal number (the
    Go SDK's `ToInteger`, which parses a float and truncates it)."""
    value = extension(event, name)
    if value is None:
        raise invalid(f"the event has no {name} extension")
    if isinstance(value, ExtensionValue_Integer):
        return value.value
    if isinstance(value, ExtensionValue_String):
        text = value.value.strip()
        if _DECIMAL.match(text):
            number = float(text) if any(c in text for c in ".eE") else int(text)
            if number == number and number not in (float("inf"), float("-inf")):
                return int(number)
        raise invalid(f"extension {name} is not an Integer but the string {value.value!r}")
    raise _wrong_type(name, "Integer", value)


_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")
_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_time(text: str) -> Timestamp:
    """An RFC 3339 time as the contract's `Timestamp`; raises `ValueError`."""
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    y, mo, d, h, mi, sec, fraction, zone = m.groups()
    offset = 0
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    moment = _datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), tzinfo=_datetime.timezone.utc)
    return Timestamp(int(moment.timestamp()) - offset, int(((fraction or "") + "000000000")[:9]))


def format_time(t: Timestamp) -> str:
    """`t` in RFC 3339, UTC (`2025-06-01T11:00:00Z`, with the nanoseconds when there are some)."""
    base = _datetime.datetime.fromtimestamp(t.seconds, _datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if not t.nanos:
        return base + "Z"
    return base + "." + f"{t.nanos:09d}".rstrip("0") + "Z"


def extension_time(event: CloudEvent, name: str) -> Timestamp:
    """The extension `name` as a time: a Timestamp, or an RFC 3339 String (the Go SDK's `ToTime`)."""
    value = extension(event, name)
    if value is None:
        raise invalid(f"the event has no {name} extension")
    if isinstance(value, ExtensionValue_Timestamp):
        return value.value
    if isinstance(value, ExtensionValue_String):
        try:
            return parse_time(value.value)
        except ValueError:
            raise invalid(f"extension {name} is not a Timestamp but the string {value.value!r}") from None
    raise _wrong_type(name, "Timestamp", value)


def cluster_name(event: CloudEvent) -> str:
    """`clustername`: the managed cluster the event is for or from."""
    return extension_str(event, CLUSTER_NAME)


def original_source(event: CloudEvent) -> Optional[str]:
    """`originalsource`: for agent events, the source of the spec event the resource came from."""
    value = extension(event, ORIGINAL_SOURCE)
    return value.value if isinstance(value, ExtensionValue_String) else None


def resource_id(event: CloudEvent) -> str:
    """`resourceid`: the resource's UID (kube) or UUID (maestro)."""
    return extension_str(event, RESOURCE_ID)


def resource_version(event: CloudEvent) -> int:
    """`resourceversion` as a number: an integer for manifest bundles (the generation), a decimal
    string for the other types (the Kubernetes resourceVersion)."""
    return extension_int(event, RESOURCE_VERSION)


def deletion_timestamp(event: CloudEvent) -> Optional[Timestamp]:
    """`deletiontimestamp`: present while the resource is being deleted."""
    try:
        return extension_time(event, DELETION_TIMESTAMP)
    except Err:
        return None


def metadata_json(event: CloudEvent) -> Optional[str]:
    """`metadata`: the JSON of the resource's ObjectMeta."""
    value = extension(event, METADATA)
    return value.value if isinstance(value, ExtensionValue_String) else None


# --- writing extensions ----------------------------------------------------------------------


def extension_value(value: Any) -> Any:
    """A Python value as an `ExtensionValue_…`: str → String, bool → Boolean, int → Integer (the
    int32 range), bytes → Binary, Timestamp → Timestamp; an `ExtensionValue_…` as it is."""
    if type(value) in _TYPE_NAMES:
        return value
    if isinstance(value, bool):
        return ExtensionValue_Boolean(value)
    if isinstance(value, int):
        if not _S32_MIN <= value <= _S32_MAX:
            raise CodecError(f"{value} does not fit an Integer extension (int32)")
        return ExtensionValue_Integer(value)
    if isinstance(value, str):
        return ExtensionValue_String(value)
    if isinstance(value, (bytes, bytearray)):
        return ExtensionValue_Bytes(bytes(value))
    if isinstance(value, Timestamp):
        return ExtensionValue_Timestamp(value)
    raise CodecError(f"no extension type for {type(value).__name__}")


def set_extension(event: CloudEvent, name: str, value: Any) -> None:
    """Sets the extension `name` (replacing one of that name) to `value` (see `extension_value`)."""
    converted = extension_value(value)
    for e in event.extensions:
        if e.name == name:
            e.value = converted
            return
    event.extensions.append(Extension(name, converted))


def set_resource_version(event: CloudEvent, data_type: Any, version: int) -> None:
    """Sets `resourceversion` with the wire type `data_type` uses: an Integer for manifest bundles
    (saturated to the int32 range), a String for the others."""
    if DataType.parse(str(data_type)).has_integer_version():
        set_extension(event, RESOURCE_VERSION, ExtensionValue_Integer(max(_S32_MIN, min(_S32_MAX, int(version)))))
    else:
        set_extension(event, RESOURCE_VERSION, ExtensionValue_String(str(version)))


# --- data ------------------------------------------------------------------------------------


def to_json(value: Any) -> str:
    """`value` as the Rust SDK writes JSON: compact, keys sorted, non-ASCII as it is."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def set_json_data(event: CloudEvent, value: Any) -> None:
    """Sets the event's data to `value` as JSON, and its content type to `application/json`."""
    event.data = to_json(value).encode("utf-8")
    event.data_content_type = "application/json"


def data_json(event: CloudEvent) -> Any:
    """The event's data parsed as JSON; raises `invalid` naming the event type when it is not."""
    try:
        return json.loads(bytes(event.data or b"").decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise invalid(f"the data of {event.type} is not JSON: {e}") from None


def now() -> Timestamp:
    """The current time as the contract's `Timestamp`."""
    ns = time.time_ns()
    return Timestamp(ns // 1_000_000_000, ns % 1_000_000_000)


def new_event(source: str, data_type: Any, action: str, subresource: str = SPEC) -> CloudEvent:
    """An event of `<data_type>.<subresource>.<action>` from `source`: a new id, the time now, and
    an empty `originalsource` (what OCM's hub encoders send)."""
    dt = DataType.parse(str(data_type))
    return CloudEvent(
        id=str(uuid.uuid4()),
        source=source,
        spec_version="1.0",
        type=dt.event_type(subresource, action),
        data_content_type=None,
        data_schema=None,
        subject=None,
        time=now(),
        extensions=[Extension(ORIGINAL_SOURCE, ExtensionValue_String(""))],
        data=None,
    )


# --- encoders (hub → agent) -------------------------------------------------------------------


def _str_at(value: Any, *path: str) -> Optional[str]:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, str) and value else None


def _deletion_timestamp(meta: Dict[str, Any]) -> Optional[Timestamp]:
    text = _str_at(meta, "deletionTimestamp")
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError as e:
        raise CodecError(f"invalid metadata.deletionTimestamp: {e}") from None


def manifest_work_event(work: Dict[str, Any], source: str, action: str) -> CloudEvent:
    """A ManifestWork (a dict) as the `manifestbundles` spec event OCM's work agents read:
    `clustername` = namespace, `resourceid` = uid, `resourceversion` = generation (an integer),
    `metadata` = the ObjectMeta JSON, `logtracing` (its `logging.open-cluster-management.io/`
    annotations), and the ManifestBundle (`manifests` of `spec.workload`, `deleteOption`,
    `manifestConfigs`, `executer`) as data — or `deletiontimestamp` and no data while deleting."""
    meta = work.get("metadata") if isinstance(work, dict) else None
    if not isinstance(meta, dict):
        raise CodecError("ManifestWork has no metadata")
    uid = _str_at(meta, "uid")
    if uid is None:
        raise CodecError("ManifestWork has no metadata.uid")
    namespace = _str_at(meta, "namespace")
    if namespace is None:
        raise CodecError("ManifestWork has no metadata.namespace")
    generation = meta.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        generation = 0
    e = new_event(source, MANIFEST_BUNDLES, action)
    set_extension(e, CLUSTER_NAME, namespace)
    set_extension(e, RESOURCE_ID, uid)
    set_resource_version(e, MANIFEST_BUNDLES, generation)
    set_extension(e, METADATA, to_json(meta))
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    tracing = {k: v for k, v in annotations.items() if k.startswith(LOG_TRACING_PREFIX)}
    set_extension(e, LOG_TRACING, to_json(tracing))
    deleting = _deletion_timestamp(meta)
    if deleting is not None:
        set_extension(e, DELETION_TIMESTAMP, deleting)
        return e
    spec = work.get("spec") if isinstance(work.get("spec"), dict) else {}
    workload = spec.get("workload") if isinstance(spec.get("workload"), dict) else {}
    bundle: Dict[str, Any] = {"manifests": workload.get("manifests")}
    for field, wire in (("deleteOption", "deleteOption"), ("manifestConfigs", "manifestConfigs"), ("executor", "executer")):
        if spec.get(field) is not None:
            bundle[wire] = spec[field]
    set_json_data(e, bundle)
    return e


_KINDS = {
    MANAGED_CLUSTERS: "ManagedCluster",
    CSRS: "CertificateSigningRequest",
    LEASES: "Lease",
    EVENTS: "Event",
    ADDONS_V1ALPHA1: "ManagedClusterAddOn",
    ADDONS_V1BETA1: "ManagedClusterAddOn",
    TOKEN_REQUESTS: "TokenRequest",
}


def kube_object_event(data_type: Any, obj: Dict[str, Any], source: str, action: str) -> CloudEvent:
    """Any other Kubernetes object (a dict) as a spec event of `data_type`: `apiVersion` and `kind`
    stamped on a copy of the object, `resourceid` = uid, `resourceversion` = the resourceVersion
    string, `clustername` from the object (a cluster's name, a CSR's cluster-name label, or the
    namespace)."""
    dt = DataType.parse(str(data_type))
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        raise CodecError("object has no metadata")
    if str(dt) == MANAGED_CLUSTERS:
        cluster = _str_at(meta, "name")
    elif str(dt) == CSRS:
        cluster = _str_at(meta, "labels", CLUSTER_NAME_LABEL)
    else:
        cluster = _str_at(meta, "namespace")
    if cluster is None:
        raise CodecError("object has no cluster name (name, cluster-name label or namespace)")
    e = new_event(source, dt, action)
    set_extension(e, CLUSTER_NAME, cluster)
    uid = _str_at(meta, "uid")
    if uid is not None:
        set_extension(e, RESOURCE_ID, uid)
    version = _str_at(meta, "resourceVersion")
    if version is not None:
        set_extension(e, RESOURCE_VERSION, version)
    deleting = _deletion_timestamp(meta)
    if deleting is not None:
        set_extension(e, DELETION_TIMESTAMP, deleting)
    stamped = dict(obj)
    if str(dt) != TOKEN_REQUESTS:
        kind = _KINDS.get(str(dt))
        if kind is None:
            raise CodecError(f"no known kind for data type {dt}")
        stamped["apiVersion"] = f"{dt.group}/{dt.version}"
        stamped["kind"] = kind
    set_json_data(e, stamped)
    return e


# --- parsers (agent → hub) --------------------------------------------------------------------


def status_of(event: CloudEvent) -> Dict[str, Any]:
    """The status an agent reports (a `status.update_request`'s data): a JSON object whose
    `conditions`, when present, is a list. Raises `invalid` otherwise, naming the resource."""
    named = [extension(event, n) for n in (CLUSTER_NAME, RESOURCE_ID)]
    what = "status of " + "/".join(v.value if isinstance(v, ExtensionValue_String) else "?" for v in named)
    try:
        status = json.loads(bytes(event.data or b"").decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise invalid(f"{what} is not JSON: {e}") from None
    if not isinstance(status, dict) or not isinstance(status.get("conditions", []), (list, type(None))):
        raise invalid(f"{what} is not a status (want an object with a `conditions` list)")
    return status


def is_true(status: Any, kind: str) -> bool:
    """Whether `status` (an object with a `conditions` list) holds the condition `kind` with status
    `"True"`."""
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True" for c in conditions
    )


def is_deleted(status: Any) -> bool:
    """Whether the agent reports the resource deleted: the condition `Deleted=True`."""
    return is_true(status, DELETED)


@dataclass(frozen=True)
class ResourceVersion:
    """A resource an agent holds, in a resync request: its id and version."""

    resource_id: str
    resource_version: int


def resource_versions(event: CloudEvent) -> List[ResourceVersion]:
    """The resources a spec resync request says the agent holds
    (`{"resourceVersions":[{"resourceID":"…","resourceVersion":3}]}`; null or missing: none)."""
    if not event.data:
        return []
    payload = data_json(event)
    if not isinstance(payload, dict):
        raise invalid(f"the data of {event.type} is not an object")
    listed = payload.get("resourceVersions") or []
    if not isinstance(listed, list):
        raise invalid(f"resourceVersions of {event.type} is not a list")
    out = []
    for i, item in enumerate(listed):
        rid = item.get("resourceID") if isinstance(item, dict) else None
        version = item.get("resourceVersion") if isinstance(item, dict) else None
        if not isinstance(rid, str) or not isinstance(version, int) or isinstance(version, bool):
            raise invalid(f"resourceVersions[{i}] of {event.type}: want resourceID (a string) and resourceVersion (an integer)")
        out.append(ResourceVersion(rid, version))
    return out


# --- OCM's own resources, as the `kube` capability names them ---------------------------------


def managed_clusters() -> Any:
    """`ManagedCluster` (cluster-scoped): a cluster registered with the hub."""
    return _kube.ApiResource("cluster.open-cluster-management.io", "v1", "ManagedCluster", "managedclusters")


def manifest_works() -> Any:
    """`ManifestWork` (in the cluster's namespace): what the work agent applies."""
    return _kube.ApiResource("work.open-cluster-management.io", "v1", "ManifestWork", "manifestworks")
