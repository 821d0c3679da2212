// conductor:plugin/timer, faked (see ../fake-host.mjs).
import { host } from '../fake-host.mjs';

export function set(name, afterMs, repeat) {
  // `after-ms` is a u64: the component's bindings take a BigInt, and so does the fake.
  if (typeof afterMs !== 'bigint') throw new TypeError(`timer.set: after-ms must be a BigInt, not ${typeof afterMs}`);
  host.timers.set(name, [afterMs, Boolean(repeat)]);
}

export function cancel(name) {
  host.timers.delete(name);
}
