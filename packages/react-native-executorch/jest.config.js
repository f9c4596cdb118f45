/** @type {import('jest').Config} */
module.exports = {
  preset: '@react-native/jest-preset',
  // Hook tests drive real HTTP downloads; a busy 2-core CI machine needs more than jest's 5 s.
  testTimeout: 30000,
  testMatch: ['<rootDir>/__tests__/**/*.test.ts?(x)'],
  // The end-to-end suites need the host build and a real export: jest.e2e.config.js runs them.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/__tests__/e2e/'],
  // ChatTemplate renders through the native module: the fake one's template double here.
  setupFiles: ['<rootDir>/__tests__/support/nativeTemplateEngine.ts'],
  // A React update outside act() fails its test instead of printing a warning.
  setupFilesAfterEnv: ['<rootDir>/__tests__/support/noActWarnings.ts'],
};
