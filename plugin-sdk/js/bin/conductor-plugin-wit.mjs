#!/usr/bin/env node
// conductor-plugin-wit [--wit DIR] [--world NAME] --capabilities LIST OUT_DIR: the world a plugin is
// built against (see ../wit.mjs).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { WitError, defaultWitDir, generate } from '../wit.mjs';

const USAGE = 'usage: conductor-plugin-wit [--wit DIR] [--world NAME] --capabilities emit,log,timer,kv OUT_DIR';

function main(argv) {
  let wit;
  let world = 'conductor-source';
  let capabilities;
  let outDir;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new WitError(`${arg} needs a value\n${USAGE}`);
      return argv[++i];
    };
    if (arg === '--capabilities') capabilities = value();
    else if (arg.startsWith('--capabilities=')) capabilities = arg.slice('--capabilities='.length);
    else if (arg === '--wit') wit = value();
    else if (arg === '--world') world = value();
    else if (arg === '-h' || arg === '--help') {
      console.log(USAGE);
      return 0;
    } else if (arg.startsWith('-')) throw new WitError(`unknown option ${arg}\n${USAGE}`);
    else if (outDir === undefined) outDir = arg;
    else throw new WitError(`one OUT_DIR only, not also ${arg}\n${USAGE}`);
  }
  if (capabilities === undefined || outDir === undefined) throw new WitError(USAGE);
  const names = capabilities
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  const text = generate(wit ?? defaultWitDir(), names, world);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'plugin.wit'), text);
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof WitError) && e?.code === undefined) throw e;
  console.error(`conductor-plugin-wit: ${e.message}`);
  process.exitCode = 1;
}
