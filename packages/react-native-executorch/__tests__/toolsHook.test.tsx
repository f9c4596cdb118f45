/** useLLM with toolsConfig: the hook's sendMessage runs the tool loop and shows the history. */
import { act, renderHook, waitFor } from '@testing-library/react-native';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { models, useLLM, type ModelFiles, type ToolCall } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { nodeAdapters } from './support/nodeAdapters';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';

let dir: string;
let files: ModelFiles;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rne-tools-hook-'));
  files = {
    modelPath: join(dir, 'model.pte'),
    tokenizerPath: join(dir, 'tokenizer.json'),
    chatTemplatePath: join(dir, 'tokenizer_config.json'),
  };
  writeFileSync(files.chatTemplatePath, JSON.stringify(smolConfig));
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('useLLM: configure({ toolsConfig }) then sendMessage runs the call and answers with its result', async () => {
  const native = new FakeNative({
    answer: (prompt) =>
      prompt.includes('<tool_response>\n21:00\n</tool_response>')
        ? ['It is ', '21:00.']
        : ['<tool_call>{"name": "get_time", ', '"arguments": {"zone": "CET"}}</tool_call>'],
  });
  const { result } = renderHook(() =>
    useLLM({ model: models.llm.smollm2_135m, localFiles: files, resources: nodeAdapters(dir), native }),
  );
  await waitFor(() => expect(result.current.isReady).toBe(true));
  const calls: ToolCall[] = [];
  act(() =>
    result.current.configure({
      toolsConfig: {
        tools: [{ name: 'get_time', description: 'Time in a zone.', parameters: { type: 'object' } }],
        executeToolCallback: async (call) => (calls.push(call), '21:00'),
        displayToolCalls: true,
      },
    }),
  );
  let answer = '';
  await act(async () => {
    answer = await result.current.sendMessage('What time is it in CET?');
  });
  expect(answer).toBe('It is 21:00.');
  expect(calls).toEqual([{ toolName: 'get_time', arguments: { zone: 'CET' } }]);
  expect(result.current.messageHistory.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
  expect(result.current.messageHistory[1]?.toolCalls).toEqual(calls);
  expect(result.current.messageHistory[3]?.content).toBe('It is 21:00.');
});
