"""python-works: static-works in Python. A conductor source serving ManifestWorks declared in its
configuration, one table per cluster, under the source name `python`:

    [plugins.python.config.clusters.cluster1.web]
    generation = 1
    manifests = [{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "web", namespace = "default" } }]

- resync (`list`) answers with the cluster's works;
- status updates from work agents are kept in the host's `kv` (shared by all instances and kept
  across reloads) and logged, an identical one as unchanged; a status that is not a
  ManifestBundleStatus is refused with a clear error; a status for a work it does not serve (any
  more) is answered OK and ignored, as OCM's own work service does;
- with `announce_after_ms`, a timer (set once, in `start`) emits every work once to the
  subscribed agents;
- with `raise_uncaught_for = "<resource id>"`, a status update for that resource raises an
  exception nobody catches, as a bug would: the SDK's `conductor_sdk.Plugin` turns it into the
  contract's `internal` error carrying the traceback, and the instance serves on (off unless
  configured; tests/polyglot.rs uses it).

Built with componentize-py against the world plugin-sdk/tools/plugin_wit.py derives from the
contract for the capabilities emit, log, timer and kv (scripts/build-polyglot-plugins.sh), with
the SDK's package `conductor_sdk` (plugin-sdk/python/src) staged beside it: its glue, and its
`ocm` encoders for the events. The `wit_world` modules are generated at build time; `test_app.py`
runs this module against the SDK's Python fakes (`conductor_sdk.fakes`).
"""

import json

import conductor_sdk
from componentize_py_types import Err
from conductor_sdk import ocm
from wit_world.exports.plugin import Description, HostEvent_Timer
from wit_world.imports import emit, kv, log, timer
from wit_world.imports.types import Error_Invalid

NAME = "python-works"
VERSION = "0.1.0"
# The contract this module is written against (test_app.py checks it against plugin-sdk/wit).
CONTRACT = "0.6.4"
# The source name agents echo back as `originalsource`.
SOURCE = "python"
MANIFEST_BUNDLES = ocm.MANIFEST_BUNDLES
ANNOUNCE = "announce"
S32_MAX = 2**31 - 1
# The namespace of the works' UIDs (a UUID of our own, fixed: static-works and js-works use it too).
WORKS_NAMESPACE = "e20657af-4e0b-4517-81e3-7b0c5931e4e4"


def invalid(message):
    """The contract's `error.invalid`, raised: agents see it as a 422 `Invalid` status."""
    return Err(Error_Invalid(message))


def uid_of(cluster, name):
    """A stable UID for a work: the same on every instance, every restart, and in every language —
    the name-based UUID (version 5) of "cluster/name" in WORKS_NAMESPACE, as static-works and
    js-works compute it."""
    return conductor_sdk.uuid5(WORKS_NAMESPACE, f"{cluster}/{name}")


def deliberate_bug(resource):
    """What `raise_uncaught_for` runs: an exception nobody catches (and a `print`, which goes to
    the plugin's log)."""
    print(f"raise_uncaught_for: raising for {resource}")
    raise RuntimeError(f"a deliberate bug for {resource} (config.raise_uncaught_for)")


def parse_config(text):
    """The plugin's configuration (JSON), checked: a bad value is refused naming its key."""
    try:
        config = json.loads(text)
    except ValueError as e:
        raise invalid(f"config: not JSON: {e}")
    if not isinstance(config, dict):
        raise invalid("config: must be a table")
    unknown = sorted(set(config) - {"clusters", "announce_after_ms", "raise_uncaught_for"})
    if unknown:
        raise invalid(
            f"config.{unknown[0]}: unknown field, expected `clusters`, `announce_after_ms` or `raise_uncaught_for`"
        )
    raise_for = config.get("raise_uncaught_for")
    if raise_for is not None and not isinstance(raise_for, str):
        raise invalid(f"config.raise_uncaught_for: must be a resource id, not {raise_for!r}")
    announce = config.get("announce_after_ms")
    if announce is not None and (not isinstance(announce, int) or isinstance(announce, bool) or announce < 0):
        raise invalid(f"config.announce_after_ms: must be a number of milliseconds, not {announce!r}")
    clusters = config.get("clusters", {})
    if not isinstance(clusters, dict):
        raise invalid("config.clusters: must be a table of clusters")
    works = []
    for cluster, named in sorted(clusters.items()):
        if not isinstance(named, dict):
            raise invalid(f"config.clusters.{cluster}: must be a table of works")
        for name, work in sorted(named.items()):
            at = f"config.clusters.{cluster}.{name}"
            if not isinstance(work, dict):
                raise invalid(f"{at}: must be a table")
            unknown = sorted(set(work) - {"generation", "manifests"})
            if unknown:
                raise invalid(f"{at}.{unknown[0]}: unknown field, expected `generation` or `manifests`")
            generation = work.get("generation", 1)
            if not isinstance(generation, int) or isinstance(generation, bool):
                raise invalid(f"{at}.generation: must be an integer, not {generation!r}")
            if generation < 1:
                raise invalid(f"{at}.generation: must be at least 1")
            if generation > S32_MAX:
                raise invalid(f"{at}.generation: must be at most {S32_MAX}")
            if "manifests" not in work:
                raise invalid(f"{at}: missing field `manifests`")
            if not isinstance(work["manifests"], list):
                raise invalid(f"{at}.manifests: must be a list of Kubernetes objects")
            works.append(
                {
                    "cluster": cluster,
                    "name": name,
                    "uid": uid_of(cluster, name),
                    "generation": generation,
                    "manifests": work["manifests"],
                }
            )
    return works, announce, raise_for


def work_event(work, action):
    """A work as the `manifestbundles` spec event OCM's work agents read, encoded by the SDK
    (`ocm.manifest_work_event`): `resourceid` = uid, `resourceversion` = generation (an integer),
    `metadata` = the ObjectMeta JSON, and the ManifestBundle as data."""
    manifest_work = {
        "metadata": {
            "generation": work["generation"],
            "labels": {"app.kubernetes.io/managed-by": NAME},
            "name": work["name"],
            "namespace": work["cluster"],
            "uid": work["uid"],
        },
        "spec": {"workload": {"manifests": work["manifests"]}},
    }
    return ocm.manifest_work_event(manifest_work, SOURCE, action)


# One component instance runs one Python interpreter: the instance's state lives here.
_works = []
_announce_after = None
_raise_for = None


class Plugin(conductor_sdk.Plugin):
    def describe(self):
        return Description(
            name=NAME,
            version=VERSION,
            sdk_version=CONTRACT,
            sources=[SOURCE],
            data_types=[MANIFEST_BUNDLES],
            concurrent_notifications=0,
            metrics=[],
        )

    def check_config(self, config):
        parse_config(config)

    def init(self, config):
        global _works, _announce_after, _raise_for
        _works, _announce_after, _raise_for = parse_config(config)
        log.log(log.Level.DEBUG, f"serving {len(_works)} works")

    def start(self):
        if _announce_after is not None:
            timer.set(ANNOUNCE, _announce_after, False)

    def list(self, options):
        if options.data_type != MANIFEST_BUNDLES:
            return []
        return [work_event(w, "create_request") for w in _works if w["cluster"] == options.cluster_name]

    def handle(self, identity, event):
        parts = event.type.rsplit(".", 2)
        if len(parts) != 3 or parts[1:] != ["status", "update_request"]:
            raise invalid(f"{NAME} is read-only: {event.type} is not supported")
        cluster = ocm.cluster_name(event)
        resource = ocm.resource_id(event)
        if resource == _raise_for:
            deliberate_bug(resource)
        work = next((w for w in _works if w["cluster"] == cluster and w["uid"] == resource), None)
        if work is None:
            # As OCM's work service: a status for a work no longer served is answered OK.
            log.log(log.Level.INFO, f"status of unknown work {resource} in {cluster} ignored")
            return
        status = event.data or b""
        try:
            parsed = json.loads(status)
        except ValueError as e:
            raise invalid(f"status of {cluster}/{work['name']} is not JSON: {e}")
        if not isinstance(parsed, dict) or not isinstance(parsed.get("conditions", []), (list, type(None))):
            raise invalid(
                f"status of {cluster}/{work['name']} is not a ManifestBundleStatus "
                "(want an object with a `conditions` list)"
            )
        key = f"status/{cluster}/{work['name']}"
        if kv.get(key) == status:
            log.log(log.Level.INFO, f"status of {cluster}/{work['name']} unchanged")
            return
        kv.set(key, status)
        log.log(log.Level.INFO, f"status of {cluster}/{work['name']} stored ({len(status)} bytes)")

    def on_events(self, events):
        for event in events:
            if isinstance(event, HostEvent_Timer) and event.value == ANNOUNCE:
                reached = sum(emit.emit(work_event(w, "update_request")) for w in _works)
                log.log(log.Level.INFO, f"announced {len(_works)} works to {reached} subscribers")
