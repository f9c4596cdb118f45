#!/usr/bin/env node
/**
 * Run by `npm pack`/`npm publish` (package.json `prepack`): copies into the package what its native
 * builds read from the repository root while developing here, so the tarball holds it too:
 * third-party/stb_image.lock.json (the pinned stb_image.h that cpp/cmake/stb_image.cmake fetches).
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const source = path.join(pkg, '..', '..', 'third-party', 'stb_image.lock.json');
const target = path.join(pkg, 'third-party', 'stb_image.lock.json');
if (!fs.existsSync(source)) {
  process.stderr.write(`prepack: ${source} is missing: pack the package from the repository checkout\n`);
  process.exit(1);
}
fs.mkdirSync(path.dirname(target), { recursive: true });
fs.copyFileSync(source, target);
