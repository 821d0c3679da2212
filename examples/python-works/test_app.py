"""Unit tests of python-works with the SDK's Python fakes (`conductor_sdk.fakes`, plugin-sdk/python):
no host, no WebAssembly. scripts/build-polyglot-plugins.sh runs them before building the
component, with the generated `wit_world` stubs on the path:

    python3 -m unittest discover -s examples/python-works    # or: pytest examples/python-works
"""

import json
import pathlib
import re
import unittest
import uuid

import app
from componentize_py_types import Err, Ok
from conductor_sdk.fakes import FakeHost
from wit_world.exports.plugin import HostEvent_Timer, ListOptions, Request
from wit_world.imports.types import (
    CloudEvent,
    Error_Internal,
    Error_Invalid,
    Extension,
    ExtensionValue_Integer,
    ExtensionValue_String,
    Identity,
)

CONFIG = {
    "announce_after_ms": 10,
    "clusters": {
        "cluster1": {
            "web": {
                "generation": 2,
                "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}],
            }
        },
        "cluster2": {"db": {"manifests": []}},
    },
}
ANONYMOUS = Identity(user="system:anonymous", groups=[])


def extension(event, name):
    return next(e.value for e in event.extensions if e.name == name)


def status_event(resource_id, data):
    return CloudEvent(
        id="1",
        source="cluster1-work-agent",
        spec_version="1.0",
        type=f"{app.MANIFEST_BUNDLES}.status.update_request",
        data_content_type="application/json",
        data_schema=None,
        subject=None,
        time=None,
        extensions=[
            Extension("clustername", ExtensionValue_String("cluster1")),
            Extension("resourceid", ExtensionValue_String(resource_id)),
        ],
        data=data,
    )


class PythonWorks(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost().install()
        self.addCleanup(self.host.uninstall)
        self.plugin = app.Plugin()
        self.plugin.init(json.dumps(CONFIG))

    def test_describes_itself_against_the_contract_of_the_sdk(self):
        wit = pathlib.Path(__file__).resolve().parents[2] / "plugin-sdk/wit/plugin.wit"
        contract = re.search(r"^package conductor:plugin@([\d.]+);", wit.read_text(), re.M).group(1)
        d = self.plugin.describe()
        self.assertEqual(d.sdk_version, contract, "written against another contract: review, then bump CONTRACT")
        self.assertEqual((d.name, d.sources, d.data_types), ("python-works", ["python"], [app.MANIFEST_BUNDLES]))

    def test_check_config_names_the_key_at_fault(self):
        for config, message in [
            ({"clusters": {"c1": {"w": {"generation": 0, "manifests": []}}}}, "config.clusters.c1.w.generation: must be at least 1"),
            ({"clusters": {"c1": {"w": {}}}}, "config.clusters.c1.w: missing field `manifests`"),
            ({"clusters": {}, "colour": "blue"}, "config.colour: unknown field"),
            ({"announce_after_ms": "soon"}, "config.announce_after_ms: must be a number"),
            ({"raise_uncaught_for": 3}, "config.raise_uncaught_for: must be a resource id"),
        ]:
            with self.assertRaises(Err) as refused:
                self.plugin.check_config(json.dumps(config))
            self.assertIsInstance(refused.exception.value, Error_Invalid)
            self.assertIn(message, refused.exception.value.value)
        self.plugin.check_config(json.dumps(CONFIG))
        self.plugin.check_config("{}")

    def test_lists_the_works_of_a_cluster_and_sets_its_timer_in_start(self):
        self.plugin.start()
        listed = self.plugin.list(ListOptions(cluster_name="cluster1", data_type=app.MANIFEST_BUNDLES))
        self.assertEqual(len(listed), 1)
        work = listed[0]
        self.assertEqual(work.source, "python")
        self.assertEqual(work.type, f"{app.MANIFEST_BUNDLES}.spec.create_request")
        self.assertEqual(extension(work, "resourceversion"), ExtensionValue_Integer(2))
        self.assertEqual(extension(work, "resourceid").value, app.uid_of("cluster1", "web"))
        metadata = json.loads(extension(work, "metadata").value)
        self.assertEqual((metadata["name"], metadata["namespace"]), ("web", "cluster1"))
        self.assertEqual(json.loads(work.data)["manifests"][0]["kind"], "ConfigMap")
        self.assertEqual(self.host.timers, {"announce": (10, False)})
        other = ListOptions(cluster_name="cluster1", data_type="coordination.k8s.io.v1.leases")
        self.assertEqual(self.plugin.list(other), [])

    def test_work_uids_are_the_uuid5_every_language_derives(self):
        uid = app.uid_of("cluster1", "web")
        # CPython's own uuid5, and the value static-works' and js-works' tests pin.
        self.assertEqual(uid, str(uuid.uuid5(uuid.UUID(app.WORKS_NAMESPACE), "cluster1/web")))
        self.assertEqual(uid, "41c88e70-99b2-599a-8b94-e770d3a8540f")
        self.assertNotEqual(uid, app.uid_of("cluster1", "db"))

    def test_an_uncaught_exception_answers_internal_with_its_traceback(self):
        self.plugin.init(json.dumps({**CONFIG, "raise_uncaught_for": "boom"}))
        with self.assertRaises(Err) as failed:
            self.plugin.handle(ANONYMOUS, status_event("boom", b"{}"))
        error = failed.exception.value
        self.assertIsInstance(error, Error_Internal)
        self.assertIn("uncaught exception in handle:\nTraceback (most recent call last):", error.value)
        self.assertIn("in deliberate_bug", error.value)
        self.assertTrue(
            error.value.endswith("RuntimeError: a deliberate bug for boom (config.raise_uncaught_for)"), error.value
        )
        # The next call is served.
        self.plugin.handle(ANONYMOUS, status_event(app.uid_of("cluster1", "web"), b'{"conditions":[]}'))
        self.assertEqual(self.host.logs[-1], ("info", "status of cluster1/web stored (17 bytes)"))

    def test_stores_status_and_refuses_a_malformed_one(self):
        uid = app.uid_of("cluster1", "web")
        self.plugin.handle(ANONYMOUS, status_event(uid, b'{"conditions":[]}'))
        self.assertEqual(self.host.kv["status/cluster1/web"], b'{"conditions":[]}')
        self.assertEqual(self.host.logs[-1], ("info", "status of cluster1/web stored (17 bytes)"))
        self.plugin.handle(ANONYMOUS, status_event(uid, b'{"conditions":[]}'))
        self.assertEqual(self.host.logs[-1], ("info", "status of cluster1/web unchanged"))
        for bad, message in [
            (b'["not", "a", "status"]', "not a ManifestBundleStatus"),
            (b'{"conditions": 3}', "not a ManifestBundleStatus"),
            (b"{", "is not JSON"),
            (None, "is not JSON"),
        ]:
            with self.assertRaises(Err) as refused:
                self.plugin.handle(ANONYMOUS, status_event(uid, bad))
            self.assertIsInstance(refused.exception.value, Error_Invalid)
            self.assertIn(message, refused.exception.value.value)
        self.assertEqual(self.host.kv["status/cluster1/web"], b'{"conditions":[]}', "a refused status is not kept")

    def test_a_batch_is_handled_in_order_and_a_refused_status_fails_alone(self):
        # The SDK's default handle_batch (the host's call for requests that waited together).
        web = app.uid_of("cluster1", "web")
        results = self.plugin.handle_batch(
            [
                Request(ANONYMOUS, status_event(web, b'{"conditions":[]}')),
                Request(ANONYMOUS, status_event(web, b'["not", "a", "status"]')),
                Request(ANONYMOUS, status_event("nope", b'{"conditions":[]}')),
            ]
        )
        self.assertEqual(results[0], Ok(None))
        self.assertIsInstance(results[1], Err)
        self.assertIn("status of cluster1/web is not a ManifestBundleStatus", results[1].value.value)
        self.assertEqual(results[2], Ok(None))
        self.assertEqual(
            self.host.logs[-2:],
            [("info", "status of cluster1/web stored (17 bytes)"), ("info", "status of unknown work nope in cluster1 ignored")],
        )
        self.assertEqual(self.host.kv, {"status/cluster1/web": b'{"conditions":[]}'})

    def test_a_status_for_a_work_not_served_is_answered_ok(self):
        self.plugin.handle(ANONYMOUS, status_event("nope", b'{"conditions":[]}'))
        self.assertEqual(self.host.logs[-1], ("info", "status of unknown work nope in cluster1 ignored"))
        self.assertEqual(self.host.kv, {})

    def test_other_event_types_are_refused(self):
        event = status_event(app.uid_of("cluster1", "web"), b"{}")
        event.type = f"{app.MANIFEST_BUNDLES}.spec.create_request"
        with self.assertRaises(Err) as refused:
            self.plugin.handle(ANONYMOUS, event)
        self.assertIn("python-works is read-only", refused.exception.value.value)

    def test_the_announce_timer_emits_every_work(self):
        self.host.subscribers = 3
        self.plugin.on_events([HostEvent_Timer("announce")])
        emitted = self.host.take_emitted()
        self.assertEqual(len(emitted), 2)
        self.assertTrue(all(e.type.endswith(".spec.update_request") for e in emitted))
        self.assertEqual(self.host.logs[-1], ("info", "announced 2 works to 6 subscribers"))
        self.plugin.on_events([HostEvent_Timer("something-else")])
        self.assertEqual(self.host.take_emitted(), [])


if __name__ == "__main__":
    unittest.main()
