"""Unit tests of `conductor_sdk.ocm`, in plain CPython against the generated `wit_world` stubs
(scripts/build-polyglot-plugins.sh runs them with the bindings on the path). The encoders are
checked against plugin-sdk/tests/ocm-vectors.json, which the Rust SDK's encoders are checked
against too: the same objects make the same events in every language.
"""

import json
import pathlib
import unittest

from componentize_py_types import Err
from conductor_sdk import ocm
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

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "ocm-vectors.json"

WIRE_NAMES = {
    ExtensionValue_Boolean: "boolean",
    ExtensionValue_Integer: "integer",
    ExtensionValue_String: "string",
    ExtensionValue_Bytes: "bytes",
    ExtensionValue_Uri: "uri",
    ExtensionValue_UriRef: "uri-ref",
    ExtensionValue_Timestamp: "timestamp",
}


def observed(event):
    """What a vector compares: everything but the id and the time."""
    extensions = {}
    for e in event.extensions:
        value = e.value.value
        if isinstance(e.value, ExtensionValue_Timestamp):
            value = [value.seconds, value.nanos]
        elif isinstance(e.value, ExtensionValue_Bytes):
            value = list(value)
        extensions[e.name] = {WIRE_NAMES[type(e.value)]: value}
    return {
        "type": event.type,
        "source": event.source,
        "extensions": extensions,
        "data_content_type": event.data_content_type,
        "data": None if event.data is None else event.data.decode("utf-8"),
    }


def agent_event(type_, extensions, data=None):
    return CloudEvent(
        id="1",
        source="cluster1-work-agent",
        spec_version="1.0",
        type=type_,
        data_content_type="application/json",
        data_schema=None,
        subject=None,
        time=None,
        extensions=[Extension(n, v) for n, v in extensions.items()],
        data=data,
    )


class Vectors(unittest.TestCase):
    def test_the_encoders_make_what_the_rust_sdk_makes(self):
        cases = json.loads(VECTORS.read_text())["cases"]
        self.assertGreaterEqual(len(cases), 10)
        for case in cases:
            with self.subTest(case["name"]):
                expected = case["expected"]

                def encode():
                    if case["encoder"] == "manifest_work":
                        return ocm.manifest_work_event(case["object"], case["source"], case["action"])
                    return ocm.kube_object_event(case["data_type"], case["object"], case["source"], case["action"])

                if "error" in expected:
                    with self.assertRaises(ocm.CodecError) as refused:
                        encode()
                    self.assertEqual(str(refused.exception).split(": ")[0], expected["error"].split(": ")[0])
                    continue
                event = encode()
                self.assertEqual(observed(event), expected)
                self.assertEqual(event.spec_version, "1.0")
                self.assertEqual(len(event.id), 36)
                self.assertIsInstance(event.time, Timestamp)


class Types(unittest.TestCase):
    def test_data_types_keep_the_dots_of_their_group(self):
        dt = ocm.DataType.parse(ocm.MANIFEST_BUNDLES)
        self.assertEqual((dt.group, dt.version, dt.resource), ("io.open-cluster-management.works", "v1alpha1", "manifestbundles"))
        self.assertTrue(dt.has_integer_version())
        self.assertFalse(ocm.DataType.parse(ocm.LEASES).has_integer_version())
        self.assertEqual(str(dt), ocm.MANIFEST_BUNDLES)
        self.assertEqual(dt.event_type(ocm.STATUS, ocm.UPDATE_REQUEST), f"{ocm.MANIFEST_BUNDLES}.status.update_request")

    def test_event_types_are_parsed_as_sdk_go_parses_them(self):
        t = ocm.EventType.parse("coordination.k8s.io.v1.leases.status.update_request")
        self.assertEqual((str(t.data_type), t.subresource, t.action), (ocm.LEASES, "status", "update_request"))
        self.assertEqual(ocm.EventType.parse("test.v1.tests.spec.").action, "")
        for bad, message in [
            ("v1.leases", "want <group>.<version>.<resource>.<subresource>.<action>"),
            ("a.v1.things.cloudevents.heartbeat", "unsupported subresource 'cloudevents'"),
            (ocm.HEARTBEAT_TYPE, "unsupported"),
        ]:
            with self.assertRaises(Err) as refused:
                ocm.EventType.parse(bad)
            self.assertIsInstance(refused.exception.value, Error_Invalid)
            self.assertIn(message, refused.exception.value.value)
        with self.assertRaises(Err):
            ocm.DataType.parse("v1.leases")


class Extensions(unittest.TestCase):
    def test_readers_name_what_is_missing_or_mistyped(self):
        e = agent_event(
            f"{ocm.MANIFEST_BUNDLES}.status.update_request",
            {
                "clustername": ExtensionValue_String("cluster1"),
                "resourceid": ExtensionValue_Integer(7),
                "resourceversion": ExtensionValue_String(" 12.9 "),
                "deletiontimestamp": ExtensionValue_String("2025-06-01T11:00:00.25+02:00"),
                "originalsource": ExtensionValue_String("widgets"),
            },
        )
        self.assertEqual(ocm.cluster_name(e), "cluster1")
        self.assertEqual(ocm.original_source(e), "widgets")
        self.assertEqual(ocm.resource_version(e), 12, "a decimal string, truncated as sdk-go's ToInteger")
        self.assertEqual(ocm.deletion_timestamp(e), Timestamp(1748768400, 250_000_000))
        self.assertIsNone(ocm.metadata_json(e))
        for read, message in [
            (ocm.resource_id, "extension resourceid is not a String but a Integer"),
            (lambda ev: ocm.extension_str(ev, "nope"), "the event has no nope extension"),
        ]:
            with self.assertRaises(Err) as refused:
                read(e)
            self.assertEqual(refused.exception.value, Error_Invalid(message))
        ocm.set_extension(e, "resourceversion", "soon")
        with self.assertRaises(Err) as refused:
            ocm.resource_version(e)
        self.assertIn("the string 'soon'", refused.exception.value.value)

    def test_resource_version_takes_the_wire_type_of_its_data_type(self):
        e = ocm.new_event("s", ocm.MANIFEST_BUNDLES, ocm.CREATE_REQUEST)
        self.assertEqual(e.type, f"{ocm.MANIFEST_BUNDLES}.spec.create_request")
        self.assertEqual(ocm.original_source(e), "")
        ocm.set_resource_version(e, ocm.MANIFEST_BUNDLES, 3)
        self.assertEqual(ocm.extension(e, "resourceversion"), ExtensionValue_Integer(3))
        ocm.set_resource_version(e, ocm.LEASES, 3101)
        self.assertEqual(ocm.extension(e, "resourceversion"), ExtensionValue_String("3101"))
        self.assertEqual(ocm.resource_version(e), 3101)
        self.assertEqual([x.name for x in e.extensions].count("resourceversion"), 1, "set replaces")
        with self.assertRaises(ocm.CodecError):
            ocm.set_extension(e, "big", 2**40)

    def test_times_read_and_write_rfc_3339(self):
        self.assertEqual(ocm.parse_time("2025-06-01T11:00:00Z"), Timestamp(1748775600, 0))
        self.assertEqual(ocm.format_time(Timestamp(1748775600, 0)), "2025-06-01T11:00:00Z")
        self.assertEqual(ocm.format_time(Timestamp(1748775600, 500_000_000)), "2025-06-01T11:00:00.5Z")
        with self.assertRaises(ValueError):
            ocm.parse_time("2025-06-01T11:00:00")


class Parsers(unittest.TestCase):
    def status_event(self, data):
        return agent_event(
            f"{ocm.MANIFEST_BUNDLES}.status.update_request",
            {"clustername": ExtensionValue_String("cluster1"), "resourceid": ExtensionValue_String("web-id")},
            data,
        )

    def test_status_of_takes_an_object_with_a_conditions_list(self):
        applied = {"conditions": [{"type": "Applied", "status": "True"}]}
        self.assertEqual(ocm.status_of(self.status_event(json.dumps(applied).encode())), applied)
        self.assertEqual(ocm.status_of(self.status_event(b"{}")), {})
        for bad, message in [
            (b"{", "status of cluster1/web-id is not JSON"),
            (None, "status of cluster1/web-id is not JSON"),
            (b"[1]", "status of cluster1/web-id is not a status"),
            (b'{"conditions": 3}', "is not a status (want an object with a `conditions` list)"),
        ]:
            with self.assertRaises(Err) as refused:
                ocm.status_of(self.status_event(bad))
            self.assertIsInstance(refused.exception.value, Error_Invalid)
            self.assertIn(message, refused.exception.value.value)

    def test_deleted_only_when_the_condition_is_true(self):
        self.assertTrue(ocm.is_deleted({"conditions": [{"type": "Applied", "status": "True"}, {"type": "Deleted", "status": "True"}]}))
        self.assertFalse(ocm.is_deleted({"conditions": [{"type": "Deleted", "status": "False"}]}))
        self.assertFalse(ocm.is_deleted({"conditions": [{"type": "Applied", "status": "True"}]}))
        self.assertFalse(ocm.is_deleted({"conditions": "Deleted"}))
        self.assertFalse(ocm.is_deleted(None))
        self.assertTrue(ocm.is_true({"conditions": [{"type": "Available", "status": "True"}]}, "Available"))

    def test_resync_requests_list_what_the_agent_holds(self):
        def request(data):
            return agent_event(f"{ocm.MANIFEST_BUNDLES}.spec.resync_request", {"clustername": ExtensionValue_String("c1")}, data)

        held = request(b'{"resourceVersions":[{"resourceID":"a","resourceVersion":3}]}')
        self.assertEqual(ocm.resource_versions(held), [ocm.ResourceVersion("a", 3)])
        self.assertEqual(ocm.resource_versions(request(b'{"resourceVersions":null}')), [])
        self.assertEqual(ocm.resource_versions(request(b"{}")), [])
        self.assertEqual(ocm.resource_versions(request(None)), [])
        with self.assertRaises(Err) as refused:
            ocm.resource_versions(request(b'{"resourceVersions":[{"resourceID":1}]}'))
        self.assertIn("resourceVersions[0]", refused.exception.value.value)

    def test_ocms_own_resources(self):
        self.assertEqual(ocm.manifest_works().plural, "manifestworks")
        self.assertEqual(ocm.managed_clusters().group, "cluster.open-cluster-management.io")


if __name__ == "__main__":
    unittest.main()
