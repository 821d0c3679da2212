// Module hooks (see register.mjs): `conductor:plugin/<interface>@<version>` resolves to
// fakes/<interface>.mjs when the contract serves <version>: its own (`CONTRACT` of sdk.mjs, the
// package's version) or an earlier patch of its minor, as the host's linker does.
import { existsSync } from 'node:fs';

import { CONTRACT } from './sdk.mjs';

export async function resolve(specifier, context, nextResolve) {
  const m = /^conductor:plugin\/([a-z-]+)@(.+)$/.exec(specifier);
  if (!m) return nextResolve(specifier, context);
  const [, iface, version] = m;
  if (!served(version)) {
    throw new Error(`${specifier}: the SDK's contract is conductor:plugin@${CONTRACT} (the host refuses another 0.x minor or a later patch)`);
  }
  const fake = new URL(`./fakes/${iface}.mjs`, import.meta.url);
  if (!existsSync(fake)) {
    throw new Error(`${specifier}: no fake for \`${iface}\` (the fakes are emit, log, timer, kv, metrics, blob and requests)`);
  }
  return { url: fake.href, shortCircuit: true };
}

/** Whether the contract serves imports of `version`: the same major and minor, no later patch. */
export function served(version) {
  const [major, minor, patch] = CONTRACT.split('.').map(Number);
  const v = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  return v !== null && Number(v[1]) === major && Number(v[2]) === minor && Number(v[3]) <= patch;
}
