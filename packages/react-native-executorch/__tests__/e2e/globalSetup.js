// Finds (or exports once) the real SmolLM2 files before the e2e suites run, unless the caller
// already set RNE_E2E_PTE / RNE_E2E_TOKENIZER_DIR. Workers inherit the environment.
const { execFileSync } = require('node:child_process');
const { join, resolve } = require('node:path');

module.exports = async function globalSetup() {
  if (process.env.RNE_E2E_PTE && process.env.RNE_E2E_TOKENIZER_DIR) return;
  const repo = resolve(__dirname, '../../../..');
  const output = execFileSync(join(repo, '.venv/bin/python'), [join(__dirname, 'smollm2_paths.py')], {
    cwd: repo,
    env: { ...process.env, PYTHONPATH: join(repo, 'tools') },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  Object.assign(process.env, JSON.parse(output));
};
