// The JavaScript side of the conductor plugin SDK, for plugins built with componentize-js: what
// every plugin needs and the engine in a component does not give it.
//
// - `guard(plugin)`: the plugin's exported object with every export that has an error channel
//   (`checkConfig`, `init`, `start`, `list`, `handle`, `onEvents`) wrapped: a thrown error with a
//   `payload` (a `PluginError`) goes to the host as it is, and anything else thrown — a bug —
//   becomes the contract's `internal` error whose message is the error and its stack. Without the
//   wrapper componentize-js traps on it: the agent sees `wasm trap: wasm 'unreachable'
//   instruction executed` and the instance is replaced. With it the agent sees an InternalError
//   (500) holding the stack, the host logs it and counts it in the plugin's last error, and the
//   instance serves on. `describe` has no error channel: a throw there still traps, and what the
//   engine prints of it is in what `plugins inspect` and the log show (the host keeps the plugin's
//   stderr).
//   `guard` also gives the plugin `handleBatch` (requests that waited for the plugin together)
//   unless it has one: each request goes to `handle` in turn and answers with its own result —
//   `{ tag: 'ok' }`, or `{ tag: 'err', val: <error> }` for what it threw (anything but a
//   `PluginError` as `internal`) — so a refused request fails alone and the others still run. A
//   plugin's own `handleBatch` returns one such result per request, in their order; what it throws
//   answers every request of the batch (`guardBatch`).
// - `PluginError(tag, message)`: the contract's `error`, to throw from an export
//   (`new PluginError('invalid', 'config.x: must be …')`).
// - `sha1(data)`, `uuid5(namespace, name)`: SHA-1 and name-based UUIDs, the same as CPython's
//   `hashlib.sha1` and `uuid.uuid5` (as a string). The engine has no synchronous digest
//   (`crypto.subtle.digest` answers a Promise, and exports cannot wait): SHA-1 is written out here.
// - `stableHash(data)`: a 64-bit FNV-1a hash of a string or bytes, as a BigInt: the same in every
//   process and every language.
// - `ocm`: OCM's event encoders and status parsers (ocm.mjs), as the Rust SDK's `ocm` module.
// - `CONTRACT`: the contract version this SDK is built for (`conductor:plugin@CONTRACT`).
//
// The npm package `conductor-plugin-sdk` (this folder; its version is the contract's): a plugin
// imports it by name and is bundled before componentize-js builds it (componentize-js loads
// relative modules only), as `conductor plugins new --lang js` sets up; its fakes
// (`conductor-plugin-sdk/fakes`, `node --import conductor-plugin-sdk/register --test`) run its
// unit tests in Node, its world generator (`conductor-plugin-wit`) derives the WIT to build
// against. Within the repository the examples import this file by a relative path instead:
//
//     import { guard, PluginError, uuid5 } from 'conductor-plugin-sdk';   // or '../../plugin-sdk/js/sdk.mjs'
//     export const plugin = guard({ describe() { … }, handle(identity, event) { … }, … });

import { PluginError } from './error.mjs';

/** The exports of `interface plugin` that answer `result<_, error>`, by their JavaScript names. */
export const EXPORTS = ['checkConfig', 'init', 'start', 'list', 'handle', 'onEvents'];

/**
 * The exports of `interface plugin` that answer one `result<_, error>` per request
 * (`list<result<_, error>>`): `{ tag: 'ok' }` or `{ tag: 'err', val: <error> }`, in the requests'
 * order (componentize-js's form of a `result` inside a value; only an export's own `result` is
 * thrown).
 */
export const BATCH_EXPORTS = ['handleBatch'];

/** RFC 4122's namespaces, as CPython's `uuid` names them. */
export const NAMESPACE_DNS = '6ba7b810-9dad-11d1-80b4-00c04fd430c8';
export const NAMESPACE_URL = '6ba7b811-9dad-11d1-80b4-00c04fd430c8';
export const NAMESPACE_OID = '6ba7b812-9dad-11d1-80b4-00c04fd430c8';
export const NAMESPACE_X500 = '6ba7b814-9dad-11d1-80b4-00c04fd430c8';

export { PluginError };
export * as ocm from './ocm.mjs';

/**
 * The contract this SDK is built for, and the package's version (the same: a test fails if
 * package.json's version, this or plugin-sdk/wit/plugin.wit's package declaration differ).
 */
export const CONTRACT = '0.6.4';

const GUARDED = Symbol('conductor.guarded');

// The frame of the glue's own wrapper (`conductorGuarded`, below) in SpiderMonkey's stacks, a
// component's (`name@file:line:column`, the function's own name). V8 names it by its `name`
// property, the export's: under node the stack is left whole.
const GLUE_FRAME = /^conductorGuarded@/;

/**
 * The frames of `stack` above the glue's wrapper: from where it was thrown to the export. What
 * called the wrapper (componentize-js's export adapter, in a folder that was gone once the
 * component was built) is left out.
 */
function pluginFrames(stack) {
  const lines = stack.split('\n');
  const glue = lines.findIndex((line) => GLUE_FRAME.test(line));
  return (glue < 0 ? lines : lines.slice(0, glue)).join('\n').trimEnd();
}

function describeThrown(thrown) {
  if (thrown instanceof Error) {
    const head = `${thrown.name}: ${thrown.message}`;
    const stack = typeof thrown.stack === 'string' ? pluginFrames(thrown.stack.trimEnd()) : '';
    // V8 starts its stack with the name and message, SpiderMonkey with the first frame.
    if (stack.startsWith(head)) return stack;
    return stack ? `${head}\n${stack}` : head;
  }
  let text;
  try {
    text = String(thrown);
  } catch {
    text = Object.prototype.toString.call(thrown);
  }
  return `${typeof thrown} thrown: ${text}`;
}

/** The contract's `internal` error for `thrown` escaping `exportName`: the error and its stack. */
export function internalError(exportName, thrown) {
  return new PluginError('internal', `uncaught exception in ${exportName}:\n${describeThrown(thrown)}`);
}

/** `fn` with anything thrown but an error with a `payload` turned into the `internal` error. */
export function guardFunction(exportName, fn) {
  if (fn[GUARDED]) return fn;
  // Named for its frame in stacks (GLUE_FRAME), its `name` the export's.
  const conductorGuarded = function (...args) {
    try {
      return fn.apply(this, args);
    } catch (e) {
      if (e !== null && typeof e === 'object' && 'payload' in e) throw e;
      throw internalError(exportName, e);
    }
  };
  Object.defineProperty(conductorGuarded, 'name', { value: fn.name });
  conductorGuarded[GUARDED] = true;
  return conductorGuarded;
}

/** What `thrown` answers as a `result<_, error>` inside a value: its `payload`, or `internal`. */
function errResult(exportName, thrown) {
  const payload =
    thrown !== null && typeof thrown === 'object' && 'payload' in thrown
      ? thrown.payload
      : internalError(exportName, thrown).payload;
  return { tag: 'err', val: payload };
}

/**
 * `fn` (which answers a list of requests with one result each) with anything it throws answered as
 * every request's result: an error with a `payload` as it is, anything else as the `internal`
 * error. `handle-batch` has no error channel of its own: without this a throw traps, and every
 * request of the batch hears the trap.
 */
export function guardBatch(exportName, fn) {
  if (fn[GUARDED]) return fn;
  // Named for its frame in stacks (GLUE_FRAME), its `name` the export's.
  const conductorGuarded = function (requests, ...rest) {
    try {
      return fn.call(this, requests, ...rest);
    } catch (e) {
      const result = errResult(exportName, e);
      return Array.from(requests, () => result);
    }
  };
  Object.defineProperty(conductorGuarded, 'name', { value: fn.name });
  conductorGuarded[GUARDED] = true;
  return conductorGuarded;
}

/**
 * The default `handleBatch` of `plugin`: agent → hub events that waited for the plugin together,
 * oldest first (each `{ identity, event }`), each handed to the plugin's `handle` in turn: one
 * result per request, in their order — `{ tag: 'ok' }`, or `{ tag: 'err', val }` for what `handle` threw (a
 * bug as the `internal` error with its stack) — so a refused request fails alone and the next
 * ones still run. A plugin defines its own to do the batch's work at once (one transaction for
 * many status updates), keeping each request's own answer.
 */
function defaultHandleBatch(plugin) {
  const handleBatch = (requests) =>
    Array.from(requests, ({ identity, event }) => {
      try {
        plugin.handle(identity, event);
        return { tag: 'ok', val: undefined };
      } catch (e) {
        return errResult('handle', e);
      }
    });
  handleBatch[GUARDED] = true;
  return handleBatch;
}

/**
 * `plugin` (the exported object) with its exports (`EXPORTS`) guarded, its `handleBatch` guarded
 * too (`BATCH_EXPORTS`) or, when it has none, the default that hands each request to `handle`; in
 * place.
 */
export function guard(plugin) {
  for (const name of EXPORTS) {
    if (typeof plugin[name] === 'function') plugin[name] = guardFunction(name, plugin[name]);
  }
  for (const name of BATCH_EXPORTS) {
    if (typeof plugin[name] === 'function') plugin[name] = guardBatch(name, plugin[name]);
  }
  if (plugin.handleBatch === undefined) plugin.handleBatch = defaultHandleBatch(plugin);
  return plugin;
}

const UTF8 = new TextEncoder();

function bytesOf(data) {
  if (typeof data === 'string') return UTF8.encode(data);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  throw new TypeError(`expected a string or bytes, not ${data === null ? 'null' : typeof data}`);
}

const rotl = (x, n) => (x << n) | (x >>> (32 - n));

/** SHA-1 (FIPS 180-4) of `data` (a string as UTF-8, or bytes): the 20-byte digest. */
export function sha1(data) {
  const input = bytesOf(data);
  const length = input.length;
  const padded = new Uint8Array(Math.ceil((length + 9) / 64) * 64);
  padded.set(input);
  padded[length] = 0x80;
  const view = new DataView(padded.buffer);
  // The length in bits, as 64 bits big-endian.
  view.setUint32(padded.length - 8, Math.floor(length / 0x20000000));
  view.setUint32(padded.length - 4, (length * 8) >>> 0);
  const h = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0];
  const w = new Uint32Array(80);
  for (let at = 0; at < padded.length; at += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(at + i * 4);
    for (let i = 16; i < 80; i++) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    let [a, b, c, d, e] = h;
    for (let i = 0; i < 80; i++) {
      let f, k;
      if (i < 20) [f, k] = [(b & c) | (~b & d), 0x5a827999];
      else if (i < 40) [f, k] = [b ^ c ^ d, 0x6ed9eba1];
      else if (i < 60) [f, k] = [(b & c) | (b & d) | (c & d), 0x8f1bbcdc];
      else [f, k] = [b ^ c ^ d, 0xca62c1d6];
      const t = (rotl(a, 5) + f + e + k + w[i]) >>> 0;
      [a, b, c, d, e] = [t, a, rotl(b, 30) >>> 0, c, d];
    }
    [a, b, c, d, e].forEach((x, i) => {
      h[i] = (h[i] + x) >>> 0;
    });
  }
  const digest = new Uint8Array(20);
  const out = new DataView(digest.buffer);
  h.forEach((x, i) => out.setUint32(i * 4, x));
  return digest;
}

function uuidBytes(namespace) {
  if (namespace instanceof Uint8Array && namespace.length === 16) return namespace;
  const text = typeof namespace === 'string' ? namespace : '';
  const hex = text.replace(/^urn:uuid:/i, '').replaceAll('-', '').toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new TypeError(`not a UUID: ${String(namespace)}`);
  return Uint8Array.from(hex.match(/../g), (b) => parseInt(b, 16));
}

/** The 16 bytes `raw` as a UUID string (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`). */
export function formatUuid(raw) {
  const x = Array.from(raw, (v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * The name-based (SHA-1) UUID of `name` (a string as UTF-8, or bytes) in `namespace` (a UUID
 * string or 16 bytes), as a string: CPython's `str(uuid.uuid5(namespace, name))`.
 */
export function uuid5(namespace, name) {
  const ns = uuidBytes(namespace);
  const nameBytes = bytesOf(name);
  const input = new Uint8Array(16 + nameBytes.length);
  input.set(ns);
  input.set(nameBytes, 16);
  const digest = sha1(input).slice(0, 16);
  digest[6] = (digest[6] & 0x0f) | 0x50;
  digest[8] = (digest[8] & 0x3f) | 0x80;
  return formatUuid(digest);
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const U64 = (1n << 64n) - 1n;

/** 64-bit FNV-1a of `data` (a string as UTF-8, or bytes), a BigInt in [0, 2^64). */
export function stableHash(data) {
  let h = FNV_OFFSET;
  for (const b of bytesOf(data)) h = ((h ^ BigInt(b)) * FNV_PRIME) & U64;
  return h;
}
