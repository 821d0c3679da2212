"""Unit tests of {{name}} against the SDK's fakes (`conductor_sdk.fakes`): plain CPython, no host,
no WebAssembly; build.sh runs them with the generated bindings on the path:

    PYTHONPATH=build/bindings:src .venv/bin/python -m unittest discover -s tests
"""

import json
import unittest

import app
import conductor_sdk
from componentize_py_types import Err
from conductor_sdk import ocm
from conductor_sdk.fakes import FakeHost
from wit_world.exports.plugin import ListOptions
from wit_world.imports.types import CloudEvent, Error_Invalid, Extension, ExtensionValue_String, Identity

CONFIG = {"clusters": {"cluster1": {"web": {"generation": 2, "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}]}}}}
ANONYMOUS = Identity(user="system:anonymous", groups=[])


def status(resource_id, data):
    return CloudEvent(
        id="1",
        source="cluster1-work-agent",
        spec_version="1.0",
        type=f"{ocm.MANIFEST_BUNDLES}.status.update_request",
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


class Plugin(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost().install()
        self.addCleanup(self.host.uninstall)
        self.plugin = app.Plugin()
        self.plugin.init(json.dumps(CONFIG))

    def test_describes_itself_against_the_sdks_contract(self):
        d = self.plugin.describe()
        self.assertEqual(d.sdk_version, conductor_sdk.CONTRACT, "written against another contract: review, then move CONTRACT")
        self.assertEqual((d.name, d.sources), (app.NAME, [app.NAME]))

    def test_a_bad_configuration_names_its_key(self):
        with self.assertRaises(Err) as refused:
            self.plugin.check_config(json.dumps({"clusters": {"c1": {"w": {"generation": 0, "manifests": []}}}}))
        self.assertIsInstance(refused.exception.value, Error_Invalid)
        self.assertIn("config.clusters.c1.w.generation", refused.exception.value.value)
        with self.assertRaises(Err) as refused:
            self.plugin.check_config(json.dumps({"source": ""}))
        self.assertIn("config.source", refused.exception.value.value)

    def test_resync_answers_with_the_clusters_works(self):
        listed = self.plugin.list(ListOptions(cluster_name="cluster1", data_type=ocm.MANIFEST_BUNDLES))
        self.assertEqual(len(listed), 1)
        self.assertEqual(listed[0].source, app.NAME)
        self.assertEqual(ocm.resource_id(listed[0]), app.uid_of(app.NAME, "cluster1", "web"))
        self.assertEqual(ocm.resource_version(listed[0]), 2)
        self.assertEqual(listed[0].type, f"{ocm.MANIFEST_BUNDLES}.spec.create_request")
        self.assertEqual(self.plugin.list(ListOptions(cluster_name="cluster2", data_type=ocm.MANIFEST_BUNDLES)), [])

    def test_a_copy_configured_with_another_source_sends_its_works_from_it(self):
        self.plugin.init(json.dumps({**CONFIG, "source": "copy"}))
        listed = self.plugin.list(ListOptions(cluster_name="cluster1", data_type=ocm.MANIFEST_BUNDLES))
        self.assertEqual(listed[0].source, "copy", "agents send its status updates to the source's plugin")
        self.assertEqual(ocm.resource_id(listed[0]), app.uid_of("copy", "cluster1", "web"))
        self.assertNotEqual(app.uid_of("copy", "cluster1", "web"), app.uid_of(app.NAME, "cluster1", "web"))

    def test_keeps_the_status_forgets_it_when_deleted_and_refuses_a_bad_one(self):
        web = app.uid_of(app.NAME, "cluster1", "web")
        applied = b'{"conditions":[{"type":"Applied","status":"True"}]}'
        self.plugin.handle(ANONYMOUS, status(web, applied))
        self.assertEqual(self.host.kv, {"status/cluster1/web": applied})
        with self.assertRaises(Err) as refused:
            self.plugin.handle(ANONYMOUS, status(web, b"not a status"))
        self.assertIn("is not JSON", refused.exception.value.value)
        self.plugin.handle(ANONYMOUS, status(web, b'{"conditions":[{"type":"Deleted","status":"True"}]}'))
        self.assertEqual(self.host.kv, {})
        self.assertEqual(self.host.logs[-1], ("info", "cluster1/web deleted by its agent"))
        self.plugin.handle(ANONYMOUS, status("nope", applied))
        self.assertEqual(self.host.kv, {}, "a status for a work not served is not kept")


if __name__ == "__main__":
    unittest.main()
