// `react-native-executorch/jest`: the useLLM mock for apps' jest tests (source: src/testing/jest.ts).
module.exports = require('./lib/testing/jest');
