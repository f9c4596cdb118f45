/** @type {import('jest').Config} */
module.exports = {
  preset: '@react-native/jest-preset',
  testMatch: ['<rootDir>/__tests__/**/*.test.ts?(x)'],
  // UI tests drive real HTTP downloads; a busy 2-core CI machine needs more than jest's 5 s.
  testTimeout: 30000,
  setupFilesAfterEnv: ['<rootDir>/__tests__/support/setup.ts'],
  // The package's sources, as Metro resolves them (its "react-native" field), not its lib/ build.
  moduleNameMapper: {
    '^react-native-executorch$': '<rootDir>/../../packages/react-native-executorch/src',
    // The jest mock's source (a published package resolves its jest.js, which loads lib/).
    '^react-native-executorch/jest$': '<rootDir>/../../packages/react-native-executorch/src/testing/jest',
    '^react-native-executorch/(.*)$': '<rootDir>/../../packages/react-native-executorch/$1',
  },
};
