// conductor:plugin/emit, faked (see ../fake-host.mjs).
import { host } from '../fake-host.mjs';

export function emit(event) {
  host.emitted.push(event);
  return host.subscribers;
}
