// The fake `requests` capability: the requests a test put in `host.waiting` ({ identity, event }
// objects, oldest first), taken by the plugin's running `handleBatch` as the host hands over what
// arrives while a batch runs.
import { host } from '../fake-host.mjs';

export function takeWaiting(max) {
  return host.waiting.splice(0, Math.min(max, host.waiting.length));
}
