// Expo config plugin (source: plugin/src/index.ts, built by `npm run build`).
module.exports = require('./plugin/build').default;
