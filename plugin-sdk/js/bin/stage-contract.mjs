#!/usr/bin/env node
// `npm pack` (prepack): copies the contract, ../wit/plugin.wit, into wit/ so the package carries
// it (npm packs no symbolic link); `--remove` (postpack) removes the copy again. In the repository
// the SDK reads ../wit/plugin.wit itself (wit.mjs).
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const staged = fileURLToPath(new URL('../wit/', import.meta.url));
if (process.argv.includes('--remove')) {
  rmSync(staged, { recursive: true, force: true });
} else {
  mkdirSync(staged, { recursive: true });
  copyFileSync(fileURLToPath(new URL('../../wit/plugin.wit', import.meta.url)), `${staged}plugin.wit`);
}
