#!/usr/bin/env node
/**
 * Bundles driver.ts with the package's src/ the way a React Native release build does: Metro
 * (the pinned one React Native depends on) with the package's Babel config
 * (@react-native/babel-preset, Hermes transform profile), not minified, no dev code. Unlike an app
 * bundle there is no InitializeCore prelude (it sets up React Native's native modules, which a
 * bare Hermes host does not have); driver.ts installs the one global of it the package needs.
 *
 * usage: node bundle.js OUT.js   (then `hermesc -emit-binary -O -out OUT.hbc OUT.js`)
 */
const { resolve } = require('node:path');

const Metro = require('metro');
const { getDefaultConfig, mergeConfig } = require('metro-config');

const PACKAGE = resolve(__dirname, '../..');
const REPO = resolve(PACKAGE, '../..');
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

async function main() {
  const out = process.argv[2];
  if (!out) {
    console.error('usage: node bundle.js OUT.js');
    process.exit(2);
  }
  const defaults = await getDefaultConfig(PACKAGE);
  const config = mergeConfig(defaults, {
    projectRoot: PACKAGE,
    // The hoisted dependencies live at the workspace root.
    watchFolders: [PACKAGE, resolve(REPO, 'node_modules')],
    cacheStores: [],
    resetCache: true,
    resolver: {
      nodeModulesPaths: [resolve(PACKAGE, 'node_modules'), resolve(REPO, 'node_modules')],
      // The package's build output and native trees: nothing the bundle imports.
      blockList: [new RegExp(`^${escape(PACKAGE)}/(lib|android|ios|cpp|node_modules/\\.cache)/.*`)],
    },
    transformer: { babelTransformerPath: require.resolve('metro-babel-transformer') },
    reporter: { update() {} },
  });
  await Metro.runBuild(config, {
    entry: resolve(__dirname, 'driver.ts'),
    out,
    platform: 'android',
    dev: false,
    minify: false,
    sourceMap: false,
    unstable_transformProfile: 'hermes-stable',
  });
}

main().catch((error) => {
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
