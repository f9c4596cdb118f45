/**
 * The chat screen against `react-native-executorch/jest`, the way an app tests its own UI:
 * `useLLM` is mocked and the test drives it (download progress, ready, streamed tokens,
 * errors); no model files, no network. The mock is the real hook on the package's fake native
 * module, so these tests also hold it to the real hook's rules.
 */
import { act, render, renderHook, screen, userEvent, within } from '@testing-library/react-native';
import ReactNativeBlobUtil from 'react-native-blob-util';
import {
  AssistantUnavailableError,
  ExecutorchError,
  ResourceFetcher,
  blobUtilAdapters,
  models,
  useLLM,
  type Message,
} from 'react-native-executorch';
import { llmMock } from 'react-native-executorch/jest';

import { ChatScreen } from '../src/ChatScreen';

jest.mock('react-native-executorch', () => require('react-native-executorch/jest').mockExecutorch());

const model = models.llm.smollm2_135m;

beforeEach(() => llmMock.reset());

function renderChat(backend?: 'xnnpack') {
  const resources = new ResourceFetcher(blobUtilAdapters(ReactNativeBlobUtil));
  render(
    <ChatScreen
      selection={{ model, ...(backend ? { backend } : {}) }}
      resources={resources}
      onBack={() => {}}
      onRetry={() => {}}
    />,
  );
  return userEvent.setup();
}

async function send(user: ReturnType<typeof userEvent.setup>, text: string) {
  await user.type(screen.getByLabelText('Message'), text);
  await user.press(screen.getByRole('button', { name: 'Send' }));
}

function bubbles(label: 'Your message' | 'Answer'): string[] {
  return screen.queryAllByLabelText(label).map((bubble) => within(bubble).getByText(/.*/).props.children);
}

describe('an app screen on the mocked useLLM', () => {
  test('shows download progress, then the chat with the resolved backend', async () => {
    renderChat();
    expect(screen.getByText('Downloading 0%')).toBeOnTheScreen();
    expect(llmMock.options?.model).toBe(model);

    act(() => llmMock.setDownloadProgress(0.42));
    expect(screen.getByText('Downloading 42%')).toBeOnTheScreen();
    expect(screen.getByRole('progressbar', { name: 'Download progress' }).props.accessibilityValue.now).toBe(42);

    await act(async () => llmMock.finishLoading());
    expect(screen.getByText(`Ask ${model.name} something.`)).toBeOnTheScreen();
    expect(screen.getByText('Backend in use: XNNPACK (CPU)')).toBeOnTheScreen();
  });

  test('shows a load failure with its title and message', async () => {
    renderChat();
    await act(async () => llmMock.failLoading(new ExecutorchError('download_failed', 'HTTP 503 from the mirror.')));
    expect(screen.getByRole('alert')).toHaveTextContent('The download failed');
    expect(screen.getByText('HTTP 503 from the mirror.')).toBeOnTheScreen();
    expect(screen.getByRole('button', { name: 'Retry' })).toBeOnTheScreen();
  });

  test('streams tokens the test sends into the answer bubble, then shows the stats', async () => {
    const user = renderChat();
    await act(async () => llmMock.finishLoading());
    await send(user, 'Capital of France?');

    expect(bubbles('Your message')).toEqual(['Capital of France?']);
    expect(screen.getByText('Generating…')).toBeOnTheScreen();
    expect(screen.getByRole('button', { name: 'Stop' })).toBeOnTheScreen();
    act(() => llmMock.streamToken('Par'));
    expect(bubbles('Answer')).toEqual(['Par']);
    act(() => llmMock.streamToken('is.'));
    expect(bubbles('Answer')).toEqual(['Paris.']);

    await act(async () => llmMock.finishGeneration({ timeToFirstTokenMs: 120, tokensPerSecond: 30 }));
    expect(screen.getByLabelText('Stats')).toHaveTextContent(
      'first token 120 ms · prefill 0.0 tok/s · decode 30.0 tok/s · 2 tokens, finished',
    );
    expect(llmMock.state.messageHistory).toEqual([
      { role: 'user', content: 'Capital of France?' },
      { role: 'assistant', content: 'Paris.' },
    ]);
  });

  test('shows the share of drafted tokens accepted when speculative decoding drafted any', async () => {
    const user = renderChat();
    await act(async () => llmMock.finishLoading());
    await send(user, 'Repeat: a b c');
    act(() => llmMock.streamToken('a b c'));
    await act(async () =>
      llmMock.finishGeneration({ tokensPerSecond: 30, draftedTokens: 12, acceptedTokens: 9, acceptanceRate: 0.75 }),
    );
    expect(screen.getByLabelText('Stats')).toHaveTextContent(
      'first token 0 ms · prefill 0.0 tok/s · decode 30.0 tok/s · 75% of drafts accepted · 1 tokens, finished',
    );
  });

  test("loaded with Gemma 4's assistant, the drafter is the assistant and its acceptance is shown", async () => {
    const gemma = models.llm.gemma4_e2b;
    const resources = new ResourceFetcher(blobUtilAdapters(ReactNativeBlobUtil));
    render(
      <ChatScreen
        selection={{ model: gemma, backend: 'xnnpack', assistant: true }}
        resources={resources}
        onBack={() => {}}
        onRetry={() => {}}
      />,
    );
    const user = userEvent.setup();
    await act(async () => llmMock.finishLoading());
    const setting = screen.getByRole('button', { name: 'Draft tokens by the assistant' });
    expect(screen.queryByRole('button', { name: 'Draft tokens by prompt lookup' })).not.toBeOnTheScreen();
    await user.press(setting);
    expect(setting).toHaveTextContent('Assistant drafter: on');
    await send(user, 'Hi');
    act(() => llmMock.streamToken('Hello'));
    await act(async () =>
      llmMock.finishGeneration({ tokensPerSecond: 12, draftedTokens: 10, acceptedTokens: 4, acceptanceRate: 0.4 }),
    );
    // The SDK refuses the assistant drafter unless the hook was given assistant: true.
    expect(llmMock.nativeModule.configs.map((c) => c.drafter)).toEqual(['assistant']);
    expect(screen.getByLabelText('Stats')).toHaveTextContent(/decode 12\.0 tok\/s · 40% of drafts accepted · /);
  });

  test('a variant without an assistant drafter is refused in words', async () => {
    renderChat();
    await act(async () =>
      llmMock.failLoading(new AssistantUnavailableError('SmolLM2 135M Instruct has no assistant drafter.', [])),
    );
    expect(screen.getByRole('alert')).toHaveTextContent('This model has no assistant drafter here');
    expect(screen.getByText(/Open it without the assistant drafter/)).toBeOnTheScreen();
  });

  test('answers by itself with respondWith, and Stop interrupts', async () => {
    const user = renderChat();
    await act(async () => llmMock.finishLoading());
    llmMock.respondWith((messages) => [`You said: `, messages.at(-1)?.content ?? '']);
    await send(user, 'hello');
    expect(await screen.findByText('You said: hello')).toBeOnTheScreen();
    expect(await screen.findByText(/2 tokens, finished/)).toBeOnTheScreen();

    llmMock.respondWith(null);
    await send(user, 'tell me a story');
    act(() => llmMock.streamToken('Once'));
    await user.press(screen.getByRole('button', { name: 'Stop' }));
    expect(screen.getByLabelText('Stats')).toHaveTextContent(/· 1 tokens, stopped$/);
    expect(bubbles('Answer')).toEqual(['You said: hello', 'Once']);
  });

  test('shows a generation failure and sends the message again', async () => {
    const user = renderChat();
    await act(async () => llmMock.finishLoading());
    await send(user, 'a very long question');
    await act(async () => llmMock.failGeneration(new ExecutorchError('context_full', 'The prompt does not fit.')));
    expect(await screen.findByRole('alert')).toHaveTextContent('The conversation is too long for the model');
    expect(llmMock.state.messageHistory).toEqual([]);

    llmMock.respondWith('Short answer.');
    await user.press(screen.getByRole('button', { name: 'Send again' }));
    expect(await screen.findByText('Short answer.')).toBeOnTheScreen();
    expect(screen.queryByRole('alert')).toBeNull();
  });
});

describe('the mocked hook keeps the real one\'s rules', () => {
  test('not loaded, busy, invalid settings, system prompt, generate without history', async () => {
    const { result } = renderHook(() => useLLM({ model }));
    await expect(result.current.sendMessage('too early')).rejects.toMatchObject({ code: 'model_not_loaded' });

    await act(async () => llmMock.finishLoading());
    expect(result.current.backend).toBe('xnnpack');
    expect(() => result.current.configure({ generation: { topP: 2 } })).toThrow(/topP 2 is not in \(0, 1\]/);
    act(() => result.current.configure({ systemPrompt: 'Be terse.' }));
    const seen: (readonly Message[])[] = [];
    llmMock.respondWith((messages) => {
      seen.push(messages);
      return 'ok';
    });

    let first!: Promise<string>;
    act(() => {
      first = result.current.generate([{ role: 'user', content: 'one-off' }]);
    });
    expect(result.current.isGenerating).toBe(true);
    await expect(result.current.sendMessage('second')).rejects.toMatchObject({ code: 'busy' });
    await act(async () => {
      await expect(first).resolves.toBe('ok');
    });
    expect(seen).toEqual([[
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'one-off' },
    ]]);
    expect(result.current.messageHistory).toEqual([]);
    expect(result.current.stats?.stopReason).toBe('eos');
  });

  test('preventLoad keeps it unloaded', async () => {
    const { result } = renderHook(() => useLLM({ model, preventLoad: true }));
    expect(() => llmMock.finishLoading()).toThrow(/preventLoad/);
    await expect(result.current.sendMessage('hi')).rejects.toMatchObject({ code: 'model_not_loaded' });
    expect(result.current.isReady).toBe(false);
  });

  test('the backend is resolved for the mock device, as on a phone', async () => {
    const gemma = models.llm.gemma4_e2b;
    const cases = [
      [{ os: 'android' }, 'vulkan'],
      [{ os: 'ios' }, 'mlx'],
      [{ os: 'ios', isSimulator: true }, 'xnnpack'], // no MLX on the simulator
    ] as const;
    for (const [device, expected] of cases) {
      llmMock.reset(device);
      const { result, unmount } = renderHook(() => useLLM({ model: gemma }));
      await act(async () => llmMock.finishLoading());
      expect(result.current.backend).toBe(expected);
      expect(result.current.getMaxContextLength()).toBe(gemma.variants[expected].maxContext);
      unmount();
    }
  });

  test('generation settings reach the native module: a stop string ends the answer', async () => {
    const { result } = renderHook(() => useLLM({ model }));
    await act(async () => llmMock.finishLoading());
    act(() => result.current.configure({ generationConfig: { stopStrings: ['END'], maxNewTokens: 8 } }));
    llmMock.respondWith(['Paris', '.END', ' ignored']);
    await act(async () => {
      await expect(result.current.sendMessage('Capital?')).resolves.toBe('Paris.');
    });
    expect(result.current.stats?.stopReason).toBe('stop_string');
    expect(llmMock.nativeModule.configs.at(-1)).toMatchObject({ stopStrings: ['END'], maxNewTokens: 8 });
    expect(llmMock.chatConfig.generation).toEqual({ stopStrings: ['END'], maxNewTokens: 8 });
  });

  test('works on fake timers: loading needs none, replies stream as timers advance', async () => {
    jest.useFakeTimers();
    try {
      const { result, unmount } = renderHook(() => useLLM({ model }));
      await act(async () => llmMock.finishLoading());
      expect(result.current.isReady).toBe(true);
      llmMock.respondWith(['a', 'b']);
      let answer!: Promise<string>;
      act(() => {
        answer = result.current.sendMessage('hi');
      });
      await act(async () => {
        await jest.runAllTimersAsync();
      });
      await expect(answer).resolves.toBe('ab');
      expect(result.current.response).toBe('ab');
      unmount();
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('the mocked hook runs tool calls like the real one', () => {
  const weather = {
    name: 'get_weather',
    description: 'Current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  };
  const call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>';

  /** A model that calls get_weather first and answers with the tool's result once it has it. */
  function weatherModel(seen: (readonly Message[])[]) {
    return (messages: readonly Message[]) => {
      seen.push(messages);
      const last = messages.at(-1);
      return last?.role === 'tool' ? ['It is ', last.content, '.'] : [call];
    };
  }

  test('a reply that calls a tool runs executeToolCallback and answers with its result', async () => {
    const { result } = renderHook(() => useLLM({ model }));
    await act(async () => llmMock.finishLoading());
    const executeToolCallback = jest.fn(async () => 'sunny, 24 C');
    act(() => result.current.configure({ toolsConfig: { tools: [weather], executeToolCallback } }));
    const seen: (readonly Message[])[] = [];
    llmMock.respondWith(weatherModel(seen));

    let answer!: Promise<string>;
    act(() => {
      answer = result.current.sendMessage('Do I need an umbrella in Paris?');
    });
    await act(async () => {
      await expect(answer).resolves.toBe('It is sunny, 24 C.');
    });
    expect(executeToolCallback).toHaveBeenCalledTimes(1);
    expect(executeToolCallback).toHaveBeenCalledWith({ toolName: 'get_weather', arguments: { city: 'Paris' } });
    // The second round saw the call and its result, as the real module renders them.
    expect(seen[1]?.slice(-2)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ toolName: 'get_weather', arguments: { city: 'Paris' } }] },
      { role: 'tool', content: 'sunny, 24 C' },
    ]);
    // Without displayToolCalls the history keeps the question and the final answer only.
    expect(result.current.messageHistory).toEqual([
      { role: 'user', content: 'Do I need an umbrella in Paris?' },
      { role: 'assistant', content: 'It is sunny, 24 C.' },
    ]);
    expect(result.current.response).toBe(`${call}It is sunny, 24 C.`);
    expect(result.current.stats?.generatedTokens).toBe(3);
  });

  test('displayToolCalls keeps the rounds; rounds driven by hand; maxRounds bounds a model that keeps calling', async () => {
    const { result } = renderHook(() => useLLM({ model }));
    await act(async () => llmMock.finishLoading());
    const executeToolCallback = jest.fn(async () => 'rain');
    act(() =>
      result.current.configure({
        toolsConfig: { tools: [weather], executeToolCallback, displayToolCalls: true, maxRounds: 3 },
      }),
    );

    let answer!: Promise<string>;
    act(() => {
      answer = result.current.sendMessage('Weather?');
    });
    act(() => llmMock.streamToken(call));
    await act(async () => llmMock.finishGeneration()); // the callback runs and the next round starts
    expect(executeToolCallback).toHaveBeenCalledTimes(1);
    expect(result.current.isGenerating).toBe(true);
    act(() => llmMock.streamToken(call));
    await act(async () => llmMock.finishGeneration());
    // Third round of maxRounds 3: its text stands, calls or not.
    act(() => llmMock.streamToken(call));
    await act(async () => llmMock.finishGeneration());
    await act(async () => {
      await expect(answer).resolves.toBe('');
    });
    expect(executeToolCallback).toHaveBeenCalledTimes(2);
    expect(result.current.messageHistory.map((m) => m.role)).toEqual([
      'user', 'assistant', 'tool', 'assistant', 'tool', 'assistant',
    ]);
    expect(result.current.isGenerating).toBe(false);
  });

  test('a callback that throws fails the turn and restores the history', async () => {
    const { result } = renderHook(() => useLLM({ model }));
    await act(async () => llmMock.finishLoading());
    const executeToolCallback = jest.fn(async () => {
      throw new Error('weather service down');
    });
    act(() => result.current.configure({ toolsConfig: { tools: [weather], executeToolCallback } }));
    llmMock.respondWith(weatherModel([]));

    let answer!: Promise<string>;
    act(() => {
      answer = result.current.sendMessage('Weather?');
    });
    await act(async () => {
      await expect(answer).rejects.toMatchObject({ code: 'execution_failed', message: /weather service down/ });
    });
    expect(result.current.error?.code).toBe('execution_failed');
    expect(result.current.messageHistory).toEqual([]);
    expect(result.current.isGenerating).toBe(false);
  });
});
