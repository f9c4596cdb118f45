/** @type {import('jest').Config} */
module.exports = {
  preset: '@react-native/jest-preset',
  // Hook tests drive real HTTP downloads; a busy 2-core CI machine needs more than jest's 5 s.
  testTimeout: 30000,
  testMatch: ['<rootDir>/__tests__/**/*.test.ts?(x)'],
};
