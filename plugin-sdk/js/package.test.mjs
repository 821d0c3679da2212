// The npm package (scripts/build-polyglot-plugins.sh runs these): its version is the contract's,
// its world generator writes what the Python package's writes, and what `npm pack` puts in the
// tarball is the SDK with the contract and nothing of the repository's tooling.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

import { CONTRACT } from './sdk.mjs';
import { contractVersion, defaultWitDir, generate } from './wit.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const repoWit = fileURLToPath(new URL('../wit/', import.meta.url));
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
const declared = /^package conductor:plugin@([0-9.]+);/m.exec(readFileSync(join(repoWit, 'plugin.wit'), 'utf8'))[1];

test("the package's version is the contract's", () => {
  assert.equal(pkg.version, declared, 'package.json: move the version with the contract');
  assert.equal(CONTRACT, declared, 'sdk.mjs CONTRACT: move it with the contract');
  assert.equal(contractVersion(), declared);
  assert.equal(contractVersion(defaultWitDir()), declared);
});

test("the world generator writes what the Python package's writes", () => {
  const out = mkdtempSync(join(tmpdir(), 'wit-'));
  try {
    for (const capabilities of [[], ['kv'], ['emit', 'log', 'timer', 'kv'], ['log', 'kv', 'metrics', 'blob'], ['pg', 'kube']]) {
      execFileSync('python3', [join(here, '../tools/plugin_wit.py'), '--capabilities', capabilities.join(','), out]);
      const python = readFileSync(join(out, 'plugin.wit'), 'utf8');
      assert.equal(generate(repoWit, capabilities, 'conductor-source'), python, capabilities.join(','));
      execFileSync(process.execPath, [join(here, 'bin/conductor-plugin-wit.mjs'), '--capabilities', capabilities.join(','), out]);
      assert.equal(readFileSync(join(out, 'plugin.wit'), 'utf8'), python, `the command, ${capabilities.join(',')}`);
    }
    assert.throws(
      () => execFileSync(process.execPath, [join(here, 'bin/conductor-plugin-wit.mjs'), '--capabilities', 'kv,http', out], { stdio: 'pipe' }),
      (e) => e.status === 1 && e.stderr.toString().includes("unknown capabilities ['http']"),
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('npm pack makes a tarball of the SDK and the contract', () => {
  const out = mkdtempSync(join(tmpdir(), 'pack-'));
  try {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: here, stdio: ['ignore', 'pipe', 'pipe'] }));
    const files = packed[0].files.map((f) => f.path).sort();
    assert.equal(packed[0].name, 'conductor-plugin-sdk');
    assert.equal(packed[0].version, declared);
    for (const f of ['sdk.mjs', 'ocm.mjs', 'error.mjs', 'fake-host.mjs', 'fakes/kv.mjs', 'register.mjs', 'hooks.mjs', 'wit.mjs', 'bin/conductor-plugin-wit.mjs', 'wit/plugin.wit', 'package.json']) {
      assert.ok(files.includes(f), `${f} in ${files}`);
    }
    assert.ok(!files.some((f) => f.startsWith('tools/') || f.endsWith('.test.mjs')), `${files}`);
    // The staged copy of the contract is removed again (postpack).
    assert.throws(() => readFileSync(join(here, 'wit/plugin.wit')));
    // The tarball's generator reads the contract it carries.
    execFileSync('tar', ['-xzf', join(out, packed[0].filename), '-C', out]);
    const unpacked = join(out, 'package');
    assert.equal(readFileSync(join(unpacked, 'wit/plugin.wit'), 'utf8'), readFileSync(join(repoWit, 'plugin.wit'), 'utf8'));
    execFileSync(process.execPath, [join(unpacked, 'bin/conductor-plugin-wit.mjs'), '--capabilities', 'kv', join(out, 'w')]);
    assert.equal(readFileSync(join(out, 'w/plugin.wit'), 'utf8'), generate(repoWit, ['kv'], 'conductor-source'));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
