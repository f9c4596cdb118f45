// Times renderChatTemplate through the Node-API addon (the seam call phones make over JSI): Gemma
// 4's template, a 20-turn conversation with tool calls and 10 tools, plain and in parts (what
// LLMModule asks for). Prints numbers; asserts nothing.
//   node cpp/chat/tools/bench_render.js build/host/node/rne_node.node
'use strict';
const fs = require('fs');
const path = require('path');

const addonPath = process.argv[2];
if (!addonPath) {
  console.error('usage: node bench_render.js PATH/rne_node.node');
  process.exit(2);
}
const native = require(path.resolve(addonPath)).create({ os: 'android', isSimulator: false, osVersion: '34' });
const template = fs.readFileSync(path.join(__dirname, '../../../__tests__/fixtures/gemma4/gemma4.jinja'), 'utf8');

const tools = Array.from({ length: 10 }, (_, k) => ({
  type: 'function',
  function: {
    name: `tool_${k}`,
    description: `Tool number ${k} does something useful with its nested arguments.`,
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', description: 'A city' },
        opts: { type: 'object', properties: { unit: { type: 'string', enum: ['c', 'f'] }, days: { type: 'integer' } } },
        tags: { type: 'array', items: { type: 'string' } },
      },
      required: ['city'],
    },
  },
}));
const messages = [{ role: 'system', content: 'You are a helpful assistant.' }];
for (let turn = 0; turn < 20; turn += 1) {
  messages.push({ role: 'user', content: `Question ${turn}: what is the weather in city ${turn}, and what should I wear? `.repeat(3) });
  if (turn % 4 === 1) {
    messages.push({
      role: 'assistant',
      content: '',
      tool_calls: [{ type: 'function', function: { name: 'tool_1', arguments: { city: 'Kraków', opts: { unit: 'c', days: 3 } } } }],
      tool_responses: [{ name: 'tool_1', response: { temp: 21, sky: 'sunny' } }],
    });
  }
  messages.push({ role: 'assistant', content: `Answer ${turn}: it is sunny and warm; wear a t-shirt. `.repeat(3) });
}
messages.push({ role: 'user', content: 'Thanks, one more question.' });

for (const parts of [false, true]) {
  const request = () =>
    JSON.stringify({ template, specialTokens: { bos_token: '<bos>', eos_token: '<eos>' }, messages, tools, addGenerationPrompt: true, parts });
  let answer;
  for (let i = 0; i < 20; i += 1) answer = JSON.parse(native.renderChatTemplate(request()));
  if (answer.error) throw new Error(`${answer.error.kind}: ${answer.error.message}`);
  const n = 200;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i += 1) JSON.parse(native.renderChatTemplate(request()));
  const wall = Number(process.hrtime.bigint() - t0) / 1e6 / n;
  const cpu = process.cpuUsage(cpu0);
  console.log(
    `gemma4.jinja, ${messages.length} messages (20 user turns), ${tools.length} tools, parts=${parts}: ` +
      `${wall.toFixed(2)} ms wall, ${((cpu.user + cpu.system) / 1000 / n).toFixed(2)} ms CPU per render ` +
      `(request JSON + C++ + answer JSON; prompt ${answer.prompt.length} chars)`,
  );
}
