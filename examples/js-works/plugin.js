// js-works: static-works in JavaScript. A conductor source serving ManifestWorks declared in its
// configuration, one table per cluster, under the source name `js`:
//
//     [plugins.js.config.clusters.cluster1.web]
//     generation = 1
//     manifests = [{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "web", namespace = "default" } }]
//
// - resync (`list`) answers with the cluster's works;
// - status updates from work agents are kept in the host's `kv` (shared by all instances and kept
//   across reloads) and logged, an identical one as unchanged; a status that is not a
//   ManifestBundleStatus is refused with a clear error; a status for a work it does not serve
//   (any more) is answered OK and ignored, as OCM's own work service does;
// - with `announce_after_ms`, a timer (set once, in `start`) emits every work once to the
//   subscribed agents;
// - with `raise_uncaught_for = "<resource id>"`, a status update for that resource throws an error
//   nobody catches, as a bug would: the SDK's `guard` turns it into the contract's `internal`
//   error carrying the stack, and the instance serves on (off unless configured;
//   tests/polyglot.rs uses it).
//
// Built with componentize-js against the world plugin-sdk/tools/plugin_wit.py derives from the
// contract for the capabilities emit, log, timer and kv (scripts/build-polyglot-plugins.sh): the
// `conductor:plugin/…` imports below are bound at build time; the SDK (plugin-sdk/js/sdk.mjs: its
// glue, and its `ocm` encoders for the events) is imported by its relative path — a project of
// its own imports the npm package `conductor-plugin-sdk` instead. plugin.test.js runs this module
// under node:test against the SDK's JavaScript fakes.

import { emit } from 'conductor:plugin/emit@0.6.4';
import { log } from 'conductor:plugin/log@0.6.4';
import { set as setTimer } from 'conductor:plugin/timer@0.6.4';
import { get as kvGet, set as kvSet } from 'conductor:plugin/kv@0.6.4';
import { PluginError, guard, ocm, uuid5 } from '../../plugin-sdk/js/sdk.mjs';

export { PluginError };

export const NAME = 'js-works';
export const VERSION = '0.1.0';
// The contract this module is written against (plugin.test.js checks it against plugin-sdk/wit).
export const CONTRACT = '0.6.4';
// The source name agents echo back as `originalsource`.
export const SOURCE = 'js';
export const MANIFEST_BUNDLES = ocm.MANIFEST_BUNDLES;
const ANNOUNCE = 'announce';
const S32_MAX = 2 ** 31 - 1;
// The namespace of the works' UIDs (a UUID of our own, fixed: static-works and python-works use it too).
export const WORKS_NAMESPACE = 'e20657af-4e0b-4517-81e3-7b0c5931e4e4';

const invalid = (message) => new PluginError('invalid', message);
const isTable = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const sorted = (o) => Object.keys(o).sort();

/**
 * A stable UID for a work: the same on every instance, every restart, and in every language —
 * the name-based UUID (version 5) of "cluster/name" in WORKS_NAMESPACE, as static-works and
 * python-works compute it.
 */
export function uidOf(cluster, name) {
  return uuid5(WORKS_NAMESPACE, `${cluster}/${name}`);
}

/** What `raise_uncaught_for` runs: an error nobody catches (and a `console.log`, which goes to the
 * plugin's log). */
function deliberateBug(resource) {
  console.log(`raise_uncaught_for: raising for ${resource}`);
  throw new Error(`a deliberate bug for ${resource} (config.raise_uncaught_for)`);
}

/** The plugin's configuration (JSON), checked: a bad value is refused naming its key. */
export function parseConfig(text) {
  let config;
  try {
    config = JSON.parse(text);
  } catch (e) {
    throw invalid(`config: not JSON: ${e.message}`);
  }
  if (!isTable(config)) throw invalid('config: must be a table');
  const known = ['clusters', 'announce_after_ms', 'raise_uncaught_for'];
  const unknown = sorted(config).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw invalid(
      `config.${unknown[0]}: unknown field, expected \`clusters\`, \`announce_after_ms\` or \`raise_uncaught_for\``,
    );
  }
  const raiseFor = config.raise_uncaught_for;
  if (raiseFor !== undefined && raiseFor !== null && typeof raiseFor !== 'string') {
    throw invalid(`config.raise_uncaught_for: must be a resource id, not ${JSON.stringify(raiseFor)}`);
  }
  const announce = config.announce_after_ms;
  if (announce !== undefined && announce !== null && !(Number.isSafeInteger(announce) && announce >= 0)) {
    throw invalid(`config.announce_after_ms: must be a number of milliseconds, not ${JSON.stringify(announce)}`);
  }
  const clusters = config.clusters ?? {};
  if (!isTable(clusters)) throw invalid('config.clusters: must be a table of clusters');
  const works = [];
  for (const cluster of sorted(clusters)) {
    const named = clusters[cluster];
    if (!isTable(named)) throw invalid(`config.clusters.${cluster}: must be a table of works`);
    for (const name of sorted(named)) {
      const at = `config.clusters.${cluster}.${name}`;
      const work = named[name];
      if (!isTable(work)) throw invalid(`${at}: must be a table`);
      const unknown = sorted(work).filter((k) => k !== 'generation' && k !== 'manifests');
      if (unknown.length) throw invalid(`${at}.${unknown[0]}: unknown field, expected \`generation\` or \`manifests\``);
      const generation = work.generation ?? 1;
      if (!Number.isInteger(generation)) throw invalid(`${at}.generation: must be an integer, not ${JSON.stringify(generation)}`);
      if (generation < 1) throw invalid(`${at}.generation: must be at least 1`);
      if (generation > S32_MAX) throw invalid(`${at}.generation: must be at most ${S32_MAX}`);
      if (!('manifests' in work)) throw invalid(`${at}: missing field \`manifests\``);
      if (!Array.isArray(work.manifests)) throw invalid(`${at}.manifests: must be a list of Kubernetes objects`);
      works.push({ cluster, name, uid: uidOf(cluster, name), generation, manifests: work.manifests });
    }
  }
  return { works, announceAfter: announce ?? undefined, raiseFor: raiseFor ?? undefined };
}

/**
 * A work as the `manifestbundles` spec event OCM's work agents read, encoded by the SDK
 * (`ocm.manifestWorkEvent`): `resourceid` = uid, `resourceversion` = generation (an integer),
 * `metadata` = the ObjectMeta JSON, and the ManifestBundle as data.
 */
export function workEvent(work, action) {
  const manifestWork = {
    metadata: {
      generation: work.generation,
      labels: { 'app.kubernetes.io/managed-by': NAME },
      name: work.name,
      namespace: work.cluster,
      uid: work.uid,
    },
    spec: { workload: { manifests: work.manifests } },
  };
  return ocm.manifestWorkEvent(manifestWork, SOURCE, action);
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Whether `stored` (bytes from kv, or undefined) is the UTF-8 encoding of `text`: decoding is
 * native and exact (a valid encoding decodes to one string only), a loop over the bytes in
 * interpreted JavaScript costs ~30 ms for 100 KiB. */
function storedIs(stored, text) {
  if (stored === undefined) return false;
  try {
    return UTF8.decode(stored) === text;
  } catch {
    return false;
  }
}

// One component instance runs one JavaScript engine: the instance's state lives here.
let works = [];
let announceAfter;
let raiseFor;

export const plugin = guard({
  describe() {
    return { name: NAME, version: VERSION, sdkVersion: CONTRACT, sources: [SOURCE], dataTypes: [MANIFEST_BUNDLES], concurrentNotifications: 0, metrics: [] };
  },

  checkConfig(config) {
    parseConfig(config);
  },

  init(config) {
    ({ works, announceAfter, raiseFor } = parseConfig(config));
    log('debug', `serving ${works.length} works`);
  },

  start() {
    if (announceAfter !== undefined) setTimer(ANNOUNCE, BigInt(announceAfter), false);
  },

  list(options) {
    if (options.dataType !== MANIFEST_BUNDLES) return [];
    return works.filter((w) => w.cluster === options.clusterName).map((w) => workEvent(w, 'create_request'));
  },

  handle(identity, event) {
    if (!event.type.endsWith('.status.update_request')) {
      throw invalid(`${NAME} is read-only: ${event.type} is not supported`);
    }
    const cluster = ocm.clusterName(event);
    const resource = ocm.resourceId(event);
    if (resource === raiseFor) deliberateBug(resource);
    const work = works.find((w) => w.cluster === cluster && w.uid === resource);
    if (!work) {
      // As OCM's work service: a status for a work no longer served is answered OK.
      log('info', `status of unknown work ${resource} in ${cluster} ignored`);
      return;
    }
    const status = event.data ?? new Uint8Array();
    let text, parsed;
    try {
      text = UTF8.decode(status);
      parsed = JSON.parse(text);
    } catch (e) {
      throw invalid(`status of ${cluster}/${work.name} is not JSON: ${e.message}`);
    }
    const conditions = isTable(parsed) ? parsed.conditions : undefined;
    if (!isTable(parsed) || !(conditions === undefined || conditions === null || Array.isArray(conditions))) {
      throw invalid(
        `status of ${cluster}/${work.name} is not a ManifestBundleStatus (want an object with a \`conditions\` list)`,
      );
    }
    const key = `status/${cluster}/${work.name}`;
    if (storedIs(kvGet(key), text)) {
      log('info', `status of ${cluster}/${work.name} unchanged`);
      return;
    }
    kvSet(key, status);
    log('info', `status of ${cluster}/${work.name} stored (${status.length} bytes)`);
  },

  onEvents(events) {
    for (const event of events) {
      if (event.tag === 'timer' && event.val === ANNOUNCE) {
        let reached = 0;
        for (const w of works) reached += emit(workEvent(w, 'update_request'));
        log('info', `announced ${works.length} works to ${reached} subscribers`);
      }
    }
  },
});
