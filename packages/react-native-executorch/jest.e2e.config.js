/**
 * The end-to-end suites (__tests__/e2e/): LLMModule and useLLM through the Node-API addon on the
 * real runner and SmolLM2, and the same suites on the fake native module. Needs the host build
 * (build/host/node/rne_node.node) and the cached export; run by scripts/test.sh after the C++ step.
 * @type {import('jest').Config}
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/__tests__/e2e/**/*.test.ts?(x)'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/__tests__/e2e/globalSetup.js',
  // ChatTemplate renders through the native module: the addon's C++ engine here.
  setupFiles: ['<rootDir>/__tests__/e2e/support/realTemplateEngine.ts'],
  // Loads of a 540 MB program and real generations on a busy 2-core machine.
  testTimeout: 120000,
};
