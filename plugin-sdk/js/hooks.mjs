// Module hooks (see register.mjs): `conductor:plugin/<interface>@<version>` resolves to
// fakes/<interface>.mjs when <version> is the contract's own (plugin-sdk/wit/plugin.wit).
import { existsSync, readFileSync } from 'node:fs';

const wit = new URL('../wit/plugin.wit', import.meta.url);
const CONTRACT = /^package conductor:plugin@([0-9.]+);/m.exec(readFileSync(wit, 'utf8'))?.[1];
if (!CONTRACT) throw new Error(`${wit.pathname} declares no \`package conductor:plugin@<version>;\``);

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
