// Unit tests of the fakes' own logic under node:test (scripts/build-polyglot-plugins.sh runs them):
//
//     node --test plugin-sdk/js/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { host, reset } from './fake-host.mjs';
import { takeWaiting } from './fakes/requests.mjs';
import { served } from './hooks.mjs';
import { CONTRACT } from './sdk.mjs';

test('takeWaiting hands over what waits, oldest first, at most max', () => {
  reset();
  host.waiting.push({ identity: 'a', event: 1 }, { identity: 'b', event: 2 }, { identity: 'c', event: 3 });
  assert.deepEqual(takeWaiting(2).map((w) => w.event), [1, 2]);
  assert.deepEqual(takeWaiting(5).map((w) => w.event), [3]);
  assert.deepEqual(takeWaiting(5), []);
  host.waiting.push({ identity: 'd', event: 4 });
  reset();
  assert.deepEqual(takeWaiting(5), [], 'reset forgets what waits');
});

test('imports of the contract and of earlier patches of its minor are served, no other', () => {
  const [major, minor, patch] = CONTRACT.split('.').map(Number);
  assert.ok(served(CONTRACT));
  assert.ok(served(`${major}.${minor}.0`));
  assert.ok(!served(`${major}.${minor}.${patch + 1}`));
  assert.ok(!served(`${major}.${minor + 1}.0`));
  assert.ok(!served(`${major + 1}.${minor}.0`));
  assert.ok(!served('latest'));
});
