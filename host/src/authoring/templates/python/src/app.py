"""{{name}}: a conductor source plugin. It serves the ManifestWorks its configuration names, by
cluster, to the clusters' work agents, and keeps what the agents report about them:

    [plugins.{{name}}.config]
    source = "{{name}}"       # the source of its events (the default)
    [plugins.{{name}}.config.clusters.cluster1.web]
    generation = 1
    manifests = [{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "web", namespace = "default" } }]

- its events carry the configured `source`, which agents echo back as `originalsource` in their
  status updates: conductor routes those to the plugin that owns the source. The plugin declares
  its name; a second copy of it (another `[plugins.<name>]` loading the same file) takes a source
  of its own, routed to it in `[routes]`, or its agents' status updates go to the first;
- a resync (`list`) answers with the cluster's works, encoded by the SDK as OCM's work agents read
  them (`ocm.manifest_work_event`);
- a status update is kept in `kv` (`status/<cluster>/<work>`), a status reporting the work deleted
  (`Deleted=True`) removes it, and a status that is not one is refused (`invalid`); a status for a
  work not served is answered OK, as OCM's own work service does.

Grants: `log`, `kv` (conductor.toml; build.sh builds against a world of exactly these). An
exception this module does not catch answers `internal` with its traceback (`conductor_sdk.Plugin`).
Import at the top everything the module uses: the component keeps only what was imported when
componentize-py ran it.
"""

import json

import conductor_sdk
from componentize_py_types import Err
from conductor_sdk import ocm
from wit_world.exports.plugin import Description
from wit_world.imports import kv, log
from wit_world.imports.types import Error_Invalid

NAME = "{{name}}"
VERSION = "0.1.0"
# The contract this module is written against (its tests compare it with the SDK's).
CONTRACT = "{{contract}}"
# The source the plugin declares, and its events' source unless `source` is configured: agents
# echo it back as `originalsource`.
DEFAULT_SOURCE = NAME
S32_MAX = 2**31 - 1


def invalid(message):
    """The contract's `invalid` error, to raise: the agent sees a 422 `Invalid` status."""
    return Err(Error_Invalid(message))


def uid_of(source, cluster, name):
    """A work's id: the same on every instance and every restart, and another for a copy of the
    plugin with another source (a name-based UUID)."""
    return conductor_sdk.uuid5(conductor_sdk.NAMESPACE_URL, f"{source}/{cluster}/{name}")


def parse_config(text):
    """The plugin's configuration (JSON), checked: a bad value is refused naming its key. Returns
    the source of its events and its works."""
    try:
        config = json.loads(text)
    except ValueError as e:
        raise invalid(f"config: not JSON: {e}")
    if not isinstance(config, dict):
        raise invalid("config: must be a table")
    unknown = sorted(set(config) - {"source", "clusters"})
    if unknown:
        raise invalid(f"config.{unknown[0]}: unknown field, expected `source` or `clusters`")
    source = config.get("source", DEFAULT_SOURCE)
    if not isinstance(source, str) or not source:
        raise invalid("config.source: must be a non-empty string")
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
            if not isinstance(generation, int) or isinstance(generation, bool) or not 1 <= generation <= S32_MAX:
                raise invalid(f"{at}.generation: must be from 1 to {S32_MAX}")
            if not isinstance(work.get("manifests"), list):
                raise invalid(f"{at}.manifests: a list of Kubernetes objects is required")
            works.append(
                {"cluster": cluster, "name": name, "uid": uid_of(source, cluster, name), "generation": generation, "manifests": work["manifests"]}
            )
    return source, works


def work_event(source, work, action):
    """The work as the spec event its agent reads, from `source`."""
    manifest_work = {
        "metadata": {
            "name": work["name"],
            "namespace": work["cluster"],
            "uid": work["uid"],
            "generation": work["generation"],
            "labels": {"app.kubernetes.io/managed-by": NAME},
        },
        "spec": {"workload": {"manifests": work["manifests"]}},
    }
    return ocm.manifest_work_event(manifest_work, source, action)


# One component instance runs one Python interpreter: the instance's state lives here.
_source = DEFAULT_SOURCE
_works = []


class Plugin(conductor_sdk.Plugin):
    def describe(self):
        return Description(
            name=NAME,
            version=VERSION,
            sdk_version=CONTRACT,
            sources=[DEFAULT_SOURCE],
            data_types=[ocm.MANIFEST_BUNDLES],
            concurrent_notifications=0,
            metrics=[],
        )

    def check_config(self, config):
        parse_config(config)

    def init(self, config):
        global _source, _works
        _source, _works = parse_config(config)
        log.log(log.Level.DEBUG, f"serving {len(_works)} works")

    def start(self):
        pass

    def list(self, options):
        if options.data_type != ocm.MANIFEST_BUNDLES:
            return []
        return [work_event(_source, w, ocm.CREATE_REQUEST) for w in _works if w["cluster"] == options.cluster_name]

    # Status updates that waited for the plugin together come in one `handle_batch` call, which
    # `conductor_sdk.Plugin` answers by calling this for each (one answer each): override
    # `handle_batch` only to do a batch's work at once.
    def handle(self, identity, event):
        kind = ocm.EventType.parse(event.type)
        if kind.subresource != ocm.STATUS or kind.action != ocm.UPDATE_REQUEST:
            raise invalid(f"{NAME} takes status updates only, not {event.type}")
        cluster, resource = ocm.cluster_name(event), ocm.resource_id(event)
        work = next((w for w in _works if w["cluster"] == cluster and w["uid"] == resource), None)
        if work is None:
            log.log(log.Level.INFO, f"status of unknown work {resource} in {cluster} ignored")
            return
        status = ocm.status_of(event)
        key = f"status/{cluster}/{work['name']}"
        if ocm.is_deleted(status):
            kv.delete(key)
            log.log(log.Level.INFO, f"{cluster}/{work['name']} deleted by its agent")
            return
        data = bytes(event.data or b"")
        # Raises Err past the plugin's kv limits: the agent hears `unavailable` and sends it again.
        kv.set(key, data)
        log.log(log.Level.INFO, f"status of {cluster}/{work['name']} stored ({len(data)} bytes)")

    def on_events(self, events):
        pass
