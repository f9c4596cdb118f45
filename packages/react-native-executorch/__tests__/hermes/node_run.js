#!/usr/bin/env node
/**
 * Runs the driver bundle (bundle.js's output, the JavaScript hermesc compiles) on Node, over the
 * Node-API addon instead of the JSI binding: the same seam core, runner and model, so its
 * answers are the reference the Hermes host's must equal, and its numbers sit next to them.
 * Needs `--expose-gc` (the driver's garbage-collection step).
 *
 * usage: node --expose-gc node_run.js ADDON.node BUNDLE.js PTE TOKENIZER_DIR
 */
const { readFileSync, statSync } = require('node:fs');
const { runInThisContext } = require('node:vm');

const [addonPath, bundlePath, pte, tokenizerDir] = process.argv.slice(2);
if (!tokenizerDir) {
  console.error('usage: node --expose-gc node_run.js ADDON.node BUNDLE.js PTE TOKENIZER_DIR');
  process.exit(2);
}
if (typeof globalThis.gc !== 'function') {
  console.error('node_run.js needs --expose-gc');
  process.exit(2);
}

const addon = require(addonPath);
globalThis.__RNExecutorch = addon.create({ os: 'android', isSimulator: false, osVersion: '34' });
globalThis.__rneHost = {
  engine: `node ${process.version}`,
  args: { pte, tokenizerDir },
  print: (line) => process.stdout.write(`${line}\n`),
  now: () => performance.now(),
  readText: (path) => readFileSync(path, 'utf8'),
  stat: (path) => {
    try {
      const info = statSync(path);
      return { size: info.size, isDirectory: info.isDirectory(), mtimeMs: info.mtimeMs };
    } catch {
      return null;
    }
  },
  collectGarbage: () => globalThis.gc(),
  residentBytes: () => process.memoryUsage.rss(),
  finish: (code) => process.exit(code),
};
runInThisContext(readFileSync(bundlePath, 'utf8'), { filename: bundlePath });
