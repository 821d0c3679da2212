// Module hooks (see register.mjs): `conductor:plugin/<interface>@<version>` resolves to
// fakes/<interface>.mjs when <version> is the contract's own (`CONTRACT` of sdk.mjs, the
// package's version).
import { existsSync } from 'node:fs';

import { CONTRACT } from './sdk.mjs';

export async function resolve(specifier, context, nextResolve) {
  const m = /^conductor:plugin\/([a-z-]+)@(.+)$/.exec(specifier);
  if (!m) return nextResolve(specifier, context);
  const [, iface, version] = m;
  if (version !== CONTRACT) {
    throw new Error(`${specifier}: the SDK's contract is conductor:plugin@${CONTRACT} (the host refuses another 0.x minor)`);
  }
  const fake = new URL(`./fakes/${iface}.mjs`, import.meta.url);
  if (!existsSync(fake)) {
    throw new Error(`${specifier}: no fake for \`${iface}\` (the fakes are emit, log, timer, kv, metrics and blob)`);
  }
  return { url: fake.href, shortCircuit: true };
}
