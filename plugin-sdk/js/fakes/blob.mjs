// The fake `blob` capability: the files a test put in `host.blobs` (name → Uint8Array).
import { host } from '../fake-host.mjs';

export function read(name) {
  const contents = host.blobs.get(name);
  if (contents === undefined) throw new Error(`no file named ${JSON.stringify(name)} (put it in host.blobs)`);
  return contents;
}
