// {{name}}: a conductor source plugin. It serves the ManifestWorks its configuration names, by
// cluster, to the clusters' work agents, and keeps what the agents report about them:
//
//     [plugins.{{name}}.config]
//     source = "{{name}}"       # the source of its events (the default)
//     [plugins.{{name}}.config.clusters.cluster1.web]
//     generation = 1
//     manifests = [{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "web", namespace = "default" } }]
//
// - its events carry the configured `source`, which agents echo back as `originalsource` in their
//   status updates: conductor routes those to the plugin that owns the source. The plugin
//   declares its name; a second copy of it (another `[plugins.<name>]` loading the same file)
//   takes a source of its own, routed to it in `[routes]`, or its agents' status updates go to
//   the first;
// - a resync (`list`) answers with the cluster's works, encoded by the SDK as OCM's work agents
//   read them (`ocm.manifestWorkEvent`);
// - a status update is kept in `kv` (`status/<cluster>/<work>`), a status reporting the work
//   deleted (`Deleted=True`) removes it, and a status that is not one is refused (`invalid`); a
//   status for a work not served is answered OK, as OCM's own work service does.
//
// Grants: `log`, `kv` (conductor.toml; build.sh builds against a world of exactly these). The
// `conductor:plugin/…` imports are bound when componentize-js builds the component, and faked
// under node:test; `conductor-plugin-sdk` is bundled in by build.sh. An error this module does
// not catch answers `internal` with its stack (`guard`).

import { log } from 'conductor:plugin/log@{{contract}}';
import { delete as kvDelete, set as kvSet } from 'conductor:plugin/kv@{{contract}}';
import { NAMESPACE_URL, PluginError, guard, ocm, uuid5 } from 'conductor-plugin-sdk';

export const NAME = '{{name}}';
export const VERSION = '0.1.0';
// The contract this module is written against (its tests compare it with the SDK's).
export const CONTRACT = '{{contract}}';
// The source the plugin declares, and its events' source unless `source` is configured: agents
// echo it back as `originalsource`.
export const DEFAULT_SOURCE = NAME;
const S32_MAX = 2 ** 31 - 1;

const invalid = (message) => new PluginError('invalid', message);
const isTable = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A work's id: the same on every instance and every restart, and another for a copy of the plugin
 * with another source (a name-based UUID).
 */
export const uidOf = (source, cluster, name) => uuid5(NAMESPACE_URL, `${source}/${cluster}/${name}`);

/**
 * The plugin's configuration (JSON), checked: a bad value is refused naming its key. Returns the
 * source of its events and its works.
 */
export function parseConfig(text) {
  let config;
  try {
    config = JSON.parse(text);
  } catch (e) {
    throw invalid(`config: not JSON: ${e.message}`);
  }
  if (!isTable(config)) throw invalid('config: must be a table');
  const unknown = Object.keys(config).filter((k) => k !== 'source' && k !== 'clusters').sort();
  if (unknown.length) throw invalid(`config.${unknown[0]}: unknown field, expected \`source\` or \`clusters\``);
  const source = config.source ?? DEFAULT_SOURCE;
  if (typeof source !== 'string' || source === '') throw invalid('config.source: must be a non-empty string');
  const clusters = config.clusters ?? {};
  if (!isTable(clusters)) throw invalid('config.clusters: must be a table of clusters');
  const works = [];
  for (const cluster of Object.keys(clusters).sort()) {
    const named = clusters[cluster];
    if (!isTable(named)) throw invalid(`config.clusters.${cluster}: must be a table of works`);
    for (const name of Object.keys(named).sort()) {
      const at = `config.clusters.${cluster}.${name}`;
      const work = named[name];
      if (!isTable(work)) throw invalid(`${at}: must be a table`);
      const extra = Object.keys(work).filter((k) => k !== 'generation' && k !== 'manifests').sort();
      if (extra.length) throw invalid(`${at}.${extra[0]}: unknown field, expected \`generation\` or \`manifests\``);
      const generation = work.generation ?? 1;
      if (!Number.isInteger(generation) || generation < 1 || generation > S32_MAX) {
        throw invalid(`${at}.generation: must be from 1 to ${S32_MAX}`);
      }
      if (!Array.isArray(work.manifests)) throw invalid(`${at}.manifests: a list of Kubernetes objects is required`);
      works.push({ cluster, name, uid: uidOf(source, cluster, name), generation, manifests: work.manifests });
    }
  }
  return { source, works };
}

/** The work as the spec event its agent reads, from `source`. */
function workEvent(source, work, action) {
  const manifestWork = {
    metadata: {
      name: work.name,
      namespace: work.cluster,
      uid: work.uid,
      generation: work.generation,
      labels: { 'app.kubernetes.io/managed-by': NAME },
    },
    spec: { workload: { manifests: work.manifests } },
  };
  return ocm.manifestWorkEvent(manifestWork, source, action);
}

// One component instance runs one JavaScript engine: the instance's state lives here.
let source = DEFAULT_SOURCE;
let works = [];

export const plugin = guard({
  describe() {
    return {
      name: NAME,
      version: VERSION,
      sdkVersion: CONTRACT,
      sources: [DEFAULT_SOURCE],
      dataTypes: [ocm.MANIFEST_BUNDLES],
      concurrentNotifications: 0,
      metrics: [],
    };
  },

  checkConfig(config) {
    parseConfig(config);
  },

  init(config) {
    ({ source, works } = parseConfig(config));
    log('debug', `serving ${works.length} works`);
  },

  start() {},

  list(options) {
    if (options.dataType !== ocm.MANIFEST_BUNDLES) return [];
    return works.filter((w) => w.cluster === options.clusterName).map((w) => workEvent(source, w, ocm.CREATE_REQUEST));
  },

  // Status updates that waited for the plugin together come in one `handleBatch` call, which
  // `guard` answers by calling this for each (one answer each): define `handleBatch` only to do a
  // batch's work at once.
  handle(identity, event) {
    const kind = ocm.EventType.parse(event.type);
    if (kind.subresource !== ocm.STATUS || kind.action !== ocm.UPDATE_REQUEST) {
      throw invalid(`${NAME} takes status updates only, not ${event.type}`);
    }
    const cluster = ocm.clusterName(event);
    const resource = ocm.resourceId(event);
    const work = works.find((w) => w.cluster === cluster && w.uid === resource);
    if (!work) {
      log('info', `status of unknown work ${resource} in ${cluster} ignored`);
      return;
    }
    const status = ocm.statusOf(event);
    const key = `status/${cluster}/${work.name}`;
    if (ocm.isDeleted(status)) {
      kvDelete(key);
      log('info', `${cluster}/${work.name} deleted by its agent`);
      return;
    }
    const data = event.data ?? new Uint8Array();
    // Throws past the plugin's kv limits: the agent hears `unavailable` and sends it again.
    kvSet(key, data);
    log('info', `status of ${cluster}/${work.name} stored (${data.length} bytes)`);
  },

  onEvents(events) {},
});
