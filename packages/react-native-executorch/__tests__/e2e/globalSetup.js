// Finds (or exports once) the real SmolLM2 files and the tiny Gemma 4 files before the e2e
// suites run, unless the caller already set their variables. Workers inherit the environment.
const { execFileSync } = require('node:child_process');
const { join, resolve } = require('node:path');

const SUITES = [
  { script: 'smollm2_paths.py', vars: ['RNE_E2E_PTE', 'RNE_E2E_TOKENIZER_DIR'] },
  {
    script: 'gemma4_paths.py',
    vars: [
      'RNE_E2E_GEMMA4_PTE',
      'RNE_E2E_GEMMA4_TOKENIZER',
      'RNE_E2E_GEMMA4_MM_PTE',
      'RNE_E2E_GEMMA4_VISION_PTE',
      'RNE_E2E_GEMMA4_AUDIO_PTE',
    ],
  },
];

module.exports = async function globalSetup() {
  const repo = resolve(__dirname, '../../../..');
  for (const { script, vars } of SUITES) {
    if (vars.every((name) => process.env[name])) continue;
    const output = execFileSync(join(repo, '.venv/bin/python'), [join(__dirname, script)], {
      cwd: repo,
      env: { ...process.env, PYTHONPATH: join(repo, 'tools') },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    Object.assign(process.env, JSON.parse(output));
  }
};
