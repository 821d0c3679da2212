// The WIT world a JavaScript (or Python) plugin is built against, derived from the SDK's contract:
// the same generator as the Python package's `conductor_plugin_wit`, writing the same bytes (a
// test compares them).
//
//     npx conductor-plugin-wit --capabilities emit,log,timer,kv OUT_DIR
//
// writes OUT_DIR/plugin.wit: the contract package (`conductor:plugin`, the version this SDK
// ships; `--wit DIR` for another) with one world, `conductor-source` (or `--world`), that imports
// the capabilities named and exports `plugin`. The capabilities not named keep their types but
// lose their functions and resources.
//
// Why: a component's capabilities are the conductor interfaces it imports functions from, and
// the host refuses a plugin that imports one it was not granted. componentize-js binds every
// function of every interface in the world it builds against — and `plugin` uses types of `pg`
// and `kube` (notifications, watch events), so any world exporting it imports `pg` and `kube`
// too. Built against this world, a plugin imports exactly the capabilities it names.
//
// Generated at build time, never committed: the contract stays the one source. Node built-ins
// only; not for the component (it runs in Node, at build time).

import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The world every capability is imported by (the host's own bindings are generated from it). */
export const FULL_WORLD = 'conductor-plugin';

export class WitError extends Error {
  constructor(message) {
    super(message);
    this.name = 'WitError';
  }
}

/**
 * The folder of the contract this SDK ships: `wit/` in the package (staged from the repository's
 * plugin-sdk/wit by `npm pack`), or the repository's plugin-sdk/wit beside this folder.
 */
export function defaultWitDir() {
  for (const candidate of ['./wit/', '../wit/']) {
    const dir = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(join(dir, 'plugin.wit'))) return dir;
  }
  throw new WitError(`no plugin.wit beside ${fileURLToPath(import.meta.url)} (in wit/ or ../wit/)`);
}

/**
 * Splits a WIT body into its items: each ends at a `;` or at the `}` that closes its block, at
 * nesting depth 0, and carries the comments before it. Returns [items, rest]: `rest` is what
 * follows the last item (comments, whitespace).
 */
export function splitItems(text) {
  const items = [];
  let depth = 0;
  let start = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    if (text.startsWith('//', i)) {
      const end = text.indexOf('\n', i);
      i = end < 0 ? n : end + 1;
      continue;
    }
    if (text.startsWith('/*', i)) {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) throw new WitError('unterminated block comment');
      i = end + 2;
      continue;
    }
    const c = text[i];
    if (c === '{') {
      depth += 1;
    } else if (c === '}') {
      depth -= 1;
      if (depth < 0) throw new WitError('unbalanced `}`');
      if (depth === 0) {
        items.push(text.slice(start, i + 1));
        start = i + 1;
      }
    } else if (c === ';' && depth === 0) {
      items.push(text.slice(start, i + 1));
      start = i + 1;
    }
    i += 1;
  }
  if (depth !== 0) throw new WitError('unbalanced `{`');
  return [items, text.slice(start)];
}

/** An item without its comments and attributes (`@since(…)`, `@unstable(…)`), trimmed. */
export function codeOf(item) {
  let code = item.replace(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g, '').trim();
  while (code.startsWith('@')) code = code.replace(/^@[\w-]+(\([^)]*\))?\s*/, '');
  return code;
}

/** Where an item's code starts: past the whitespace and comments before it. */
function codeStart(item) {
  let i = 0;
  while (i < item.length) {
    if (/\s/.test(item[i])) {
      i += 1;
    } else if (item.startsWith('//', i)) {
      const end = item.indexOf('\n', i);
      i = end < 0 ? item.length : end + 1;
    } else if (item.startsWith('/*', i)) {
      i = item.indexOf('*/', i + 2) + 2;
    } else {
      break;
    }
  }
  return i;
}

/** [header, body] of `interface x { body }` / `world x { body }`. */
export function blockParts(item) {
  const openAt = item.indexOf('{', codeStart(item));
  return [item.slice(0, openAt), item.slice(openAt + 1, item.lastIndexOf('}'))];
}

function isFunctionOrResource(item) {
  const code = codeOf(item);
  return /^%?[A-Za-z][\w-]*\s*:\s*(async\s+)?func\b/.test(code) || /^resource\b/.test(code);
}

const word = (code, at) => code.split(/\s+/)[at] ?? '';
const stripNewlines = (s) => s.replace(/^\n+|\n+$/g, '');

/** The derived WIT (one file's text) for `capabilities` under the world name `world`. */
export function generate(witDir, capabilities, world) {
  const files = readdirSync(witDir)
    .filter((f) => f.endsWith('.wit'))
    .sort();
  if (files.length === 0) throw new WitError(`no .wit files in ${witDir}`);
  let pkg = null;
  let fullWorld = null;
  const interfaces = [];
  for (const f of files) {
    const [items, rest] = splitItems(readFileSync(join(witDir, f), 'utf8'));
    if (codeOf(rest)) throw new WitError(`${join(witDir, f)}: unexpected text at the end: '${codeOf(rest).slice(0, 40)}'`);
    for (const item of items) {
      const code = codeOf(item);
      if (code.startsWith('package ')) {
        if (pkg !== null && pkg !== code) throw new WitError(`${join(witDir, f)}: a second package declaration: ${code}`);
        pkg = code;
      } else if (code.startsWith('interface ')) {
        interfaces.push([word(code, 1).replace(/\{+$/, ''), item]);
      } else if (code.startsWith('world ')) {
        if (word(code, 1).replace(/\{+$/, '') === FULL_WORLD) fullWorld = item;
      } else {
        throw new WitError(`${join(witDir, f)}: unsupported top-level item: '${code.slice(0, 60)}'`);
      }
    }
  }
  if (pkg === null) throw new WitError(`${witDir}: no package declaration`);
  if (fullWorld === null) throw new WitError(`${witDir}: no world '${FULL_WORLD}' (the world importing every capability)`);
  const [bodyItems] = splitItems(blockParts(fullWorld)[1]);
  const known = bodyItems
    .filter((i) => codeOf(i).startsWith('import '))
    .map((i) => word(codeOf(i), 1).replace(/;+$/, ''));
  const unknown = capabilities.filter((c) => !known.includes(c));
  if (unknown.length) {
    throw new WitError(`unknown capabilities [${unknown.map((u) => `'${u}'`).join(', ')}]: the contract's are ${known.join(', ')}`);
  }

  const out = [
    `// Generated by conductor-plugin-wit from ${files.join(', ')} (${pkg.slice('package '.length).replace(/;+$/, '')})`,
    `// for the capabilities: ${capabilities.join(', ') || 'none'}. Do not edit, do not commit.`,
    '',
    pkg,
    '',
  ];
  for (const [name, item] of interfaces) {
    if (!known.includes(name) || capabilities.includes(name)) {
      out.push(stripNewlines(item));
    } else {
      const [header, body] = blockParts(item);
      const [kept, rest] = splitItems(body);
      out.push(
        stripNewlines(header) +
          '{' +
          kept.filter((i) => !isFunctionOrResource(i)).join('') +
          rest.trimEnd() +
          `\n    // (functions and resources left out: \`${name}\` is not a capability of this plugin)\n}`,
      );
    }
    out.push('');
  }
  const imports = capabilities.map((c) => `    import ${c};\n`).join('');
  out.push(`/// A plugin using ${capabilities.join(', ') || 'no capability'}.\nworld ${world} {\n${imports}    export plugin;\n}\n`);
  return out.join('\n');
}

/** The version of the contract package in `witDir` (`package conductor:plugin@<version>;`). */
export function contractVersion(witDir = defaultWitDir()) {
  for (const f of readdirSync(witDir).filter((f) => f.endsWith('.wit')).sort()) {
    const m = /^package conductor:plugin@([0-9][0-9A-Za-z.+-]*);/m.exec(readFileSync(join(witDir, f), 'utf8'));
    if (m) return m[1];
  }
  throw new WitError(`${witDir}: no \`package conductor:plugin@<version>;\``);
}
