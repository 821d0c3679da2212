// conductor:plugin/kv, faked (see ../fake-host.mjs).
import { host } from '../fake-host.mjs';

export function get(key) {
  const value = host.kv.get(key);
  return value === undefined ? undefined : Uint8Array.from(value);
}

export function set(key, value) {
  if (!(value instanceof Uint8Array)) throw new TypeError('kv.set: the value must be a Uint8Array');
  host.kv.set(key, Uint8Array.from(value));
}

function remove(key) {
  return host.kv.delete(key);
}
export { remove as delete };
