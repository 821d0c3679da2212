// A fake conductor host for unit tests of JavaScript plugins: the plugin's own module, run in
// Node (node:test), with no host, no WebAssembly and no componentize-js at test time.
//
//     node --import <sdk>/js/register.mjs --test
//
// register.mjs installs a module hook: the plugin's `conductor:plugin/<capability>@<version>`
// imports load the fakes in fakes/ (emit, log, timer, kv, metrics, blob, requests), which record into `host` below. A
// version the contract does not serve (another minor, or a later patch than plugin-sdk/wit/plugin.wit's)
// fails the import, as the host refuses such a component. What it records, like the Rust SDK's `fakes::FakeHost`: `kv` (a Map
// of Uint8Arrays), `logs` ([level, message] pairs), `timers` (name → [afterMs, repeat]),
// `emitted` (the events; `takeEmitted()` empties it), `metrics` (`name{label,…}` → value) and
// `blobs` (name → Uint8Array, for the plugin to read); `waiting` holds the requests (`{ identity,
// event }`) that `takeWaiting` of `requests` hands the running `handleBatch`. `emit` answers `subscribers` (1 unless
// set). `pg` and `kube` are not faked: test SQL against a real PostgreSQL, as tests/maestro.rs
// does.
//
//     import { host, reset } from '<sdk>/js/fake-host.mjs';
//     beforeEach(reset);
//     plugin.handle(identity, event);
//     assert.deepEqual(host.logs.at(-1), ['info', 'status of cluster1/web stored (17 bytes)']);
//     // requests that waited together, as the host hands them over: one result each
//     assert.deepEqual(plugin.handleBatch([{ identity, event }]), [{ tag: 'ok', val: undefined }]);

export const host = {
  kv: new Map(),
  logs: [],
  timers: new Map(),
  emitted: [],
  metrics: new Map(),
  blobs: new Map(),
  waiting: [],
  subscribers: 1,
};

/** Forgets everything recorded (call it before each test). */
export function reset() {
  host.kv.clear();
  host.logs.length = 0;
  host.timers.clear();
  host.emitted.length = 0;
  host.metrics.clear();
  host.blobs.clear();
  host.waiting.length = 0;
  host.subscribers = 1;
}

/** The events emitted since the last call. */
export function takeEmitted() {
  return host.emitted.splice(0);
}

