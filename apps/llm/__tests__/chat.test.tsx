import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { screen, waitFor } from '@testing-library/react-native';
import { FakeNative } from 'react-native-executorch/jest';

import { documentDir, renderApp, words } from './support/app';
import { MODEL_BYTES, startMirror, type Mirror } from './support/mirror';

let mirror: Mirror | null = null;

afterEach(async () => {
  await mirror?.stop();
  mirror = null;
});

/** Opens the mirror's model on a phone answering with `answer`, and waits until it is ready. */
async function openChat(answer: string[] | ((prompt: string) => string[]), tokenIntervalMs = 5, template?: 'gemma4') {
  mirror = await startMirror(template ? { template } : {});
  const native = new FakeNative({ os: 'android', answer: typeof answer === 'function' ? answer : () => answer, tokenIntervalMs });
  const app = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
  await app.user.press(screen.getByRole('button', { name: `Open ${mirror.model.name}` }));
  await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 3000 });
  return { ...app, native, model: mirror.model };
}

async function send(user: ReturnType<typeof renderApp>['user'], text: string) {
  await user.type(screen.getByLabelText('Message'), text);
  await user.press(screen.getByRole('button', { name: 'Send' }));
}

function answerText(): string[] {
  return screen.queryAllByLabelText('Answer').map((bubble) => {
    const texts: string[] = [];
    const walk = (node: unknown) => {
      if (typeof node === 'string') texts.push(node);
      else if (node && typeof node === 'object' && 'children' in node) {
        (node as { children: unknown[] }).children.forEach(walk);
      }
    };
    walk(bubble);
    return texts.join('');
  });
}

describe('downloading', () => {
  test('shows progress while the model downloads, then the chat', async () => {
    mirror = await startMirror({ chunkDelayMs: 15 });
    const native = new FakeNative({ os: 'android' });
    const { user } = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    await user.press(screen.getByRole('button', { name: `Open ${mirror.model.name}` }));

    const seen = new Set<number>();
    await waitFor(
      () => {
        const bar = screen.queryByRole('progressbar', { name: 'Download progress' });
        if (bar) seen.add(bar.props.accessibilityValue.now as number);
        expect(screen.getByText(`Ask ${mirror!.model.name} something.`)).toBeOnTheScreen();
      },
      { timeout: 5000, interval: 10 },
    );
    // Several distinct values strictly between 0 and 100 were on screen along the way.
    expect([...seen].filter((p) => p > 0 && p < 100).length).toBeGreaterThanOrEqual(3);
    expect(screen.getByText('Backend in use: XNNPACK (CPU)')).toBeOnTheScreen();
    // The verified file, under the package's cache layout, is what the native side loaded.
    const { repo, revision } = mirror.model.hf;
    const pte = join(documentDir(), 'react-native-executorch', 'models', repo, revision, 'xnnpack', 'mirror.pte');
    expect(native.loads.map((l) => l.modelPath)).toEqual([pte]);
    expect(statSync(pte).size).toBe(MODEL_BYTES.length);
  });

  test('cancel stops the download, keeps the part, and opening again resumes it', async () => {
    mirror = await startMirror({ chunkDelayMs: 25 });
    const native = new FakeNative({ os: 'android' });
    const { user } = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    const open = () => user.press(screen.getByRole('button', { name: `Open ${mirror!.model.name}` }));
    await open();
    await screen.findByText(/^Downloading [1-9]\d?%$/, {}, { timeout: 3000 });
    await user.press(screen.getByRole('button', { name: 'Cancel download' }));
    expect(screen.getByText('Choose a model')).toBeOnTheScreen();
    // What was downloaded so far stays, and the picker says so.
    await screen.findByText(/^Downloaded: \d+(\.\d)? KB$/);

    const { repo, revision } = mirror.model.hf;
    const part = join(documentDir(), 'react-native-executorch', 'models', repo, revision, 'xnnpack', 'mirror.pte.part');
    await waitFor(() => expect(existsSync(part)).toBe(true));
    const kept = statSync(part).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(MODEL_BYTES.length);
    // Nothing keeps writing once cancelled.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(statSync(part).size).toBe(kept);
    expect(native.loads).toEqual([]);

    await open();
    await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 5000 });
    const pteRequests = mirror.server.requests.filter((r) => r.path.endsWith('.pte'));
    expect(pteRequests.map((r) => r.status)).toEqual([200, 206]);
    expect(pteRequests[1]?.range).toMatch(/^bytes=\d+-$/);
  });
});

describe('chatting', () => {
  test('streams the answer into the chat, then shows the stats', async () => {
    const { user, native } = await openChat(words(40), 15);
    await send(user, 'What is the capital of France?');

    expect(screen.getByText('What is the capital of France?')).toBeOnTheScreen();
    // Part of the answer is on screen while the model still generates.
    await waitFor(() => expect(answerText()[0]).toMatch(/^ w0 w1/));
    expect(answerText()[0]).not.toContain(' w39');
    expect(screen.getByRole('button', { name: 'Stop' })).toBeOnTheScreen();
    expect(screen.getByLabelText('Stats')).toHaveTextContent('Generating…');

    await screen.findByRole('button', { name: 'Send' }, { timeout: 3000 });
    expect(answerText()).toEqual([words(40).join('')]);
    expect(screen.getByLabelText('Stats')).toHaveTextContent(
      /^first token \d+ ms · prefill \d+\.\d tok\/s · decode \d+\.\d tok\/s · 40 tokens, finished$/,
    );
    // The message reached the model inside SmolLM2's chat template.
    expect(native.prompts[0]).toContain('<|im_start|>user\nWhat is the capital of France?<|im_end|>');
  });

  test('a second message continues the conversation', async () => {
    const { user, native } = await openChat(['Paris', '.']);
    await send(user, 'Capital of France?');
    await screen.findByText('Paris.');
    await send(user, 'And of Italy?');
    await waitFor(() => expect(answerText()).toEqual(['Paris.', 'Paris.']));
    expect(native.prompts[1]).toContain('Capital of France?<|im_end|>\n<|im_start|>assistant\nParis.<|im_end|>');
    expect(native.prompts[1]).toContain('And of Italy?');
  });

  test('stop interrupts the answer and keeps what was generated', async () => {
    const { user, native } = await openChat(words(200), 20);
    await send(user, 'Count');
    await waitFor(() => expect(answerText()[0]).toContain(' w2'));
    await user.press(screen.getByRole('button', { name: 'Stop' }));

    await screen.findByRole('button', { name: 'Send' });
    expect(native.calls).toContain('interrupt');
    const kept = answerText()[0] ?? '';
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(words(200).join('').length);
    expect(screen.getByLabelText('Stats')).toHaveTextContent(/tokens, stopped$/);
  });

  test('clear conversation empties the chat and the model’s memory', async () => {
    const { user, native } = await openChat(['Hi', '!']);
    const clear = () => screen.getByRole('button', { name: 'Clear conversation' });
    expect(clear()).toBeDisabled();
    await send(user, 'Hello');
    await screen.findByText('Hi!');
    await user.press(clear());
    expect(screen.queryByText('Hi!')).not.toBeOnTheScreen();
    expect(screen.queryByText('Hello')).not.toBeOnTheScreen();
    expect(screen.getByText(`Ask ${mirror!.model.name} something.`)).toBeOnTheScreen();
    expect(native.calls).toContain('reset');
  });

  test('downloaded files are listed in the picker and can be deleted', async () => {
    const { user, model } = await openChat(['Hi']);
    const { repo, revision } = model.hf;
    const cacheDir = join(documentDir(), 'react-native-executorch', 'models', repo, revision);
    await user.press(screen.getByRole('button', { name: 'Back to models' }));
    expect(await screen.findByText(/^Downloaded: 200\.\d KB$/)).toBeOnTheScreen();

    await user.press(screen.getByRole('button', { name: `Delete the downloaded files of ${model.name}` }));
    await waitFor(() => expect(screen.queryByText(/^Downloaded:/)).not.toBeOnTheScreen());
    expect(existsSync(cacheDir)).toBe(false);
    // Opening it again downloads it again.
    await user.press(screen.getByRole('button', { name: `Open ${model.name}` }));
    await screen.findByText(`Ask ${model.name} something.`, {}, { timeout: 3000 });
    expect(mirror!.server.requests.filter((r) => r.path.endsWith('.pte')).map((r) => r.status)).toEqual([200, 200]);
  });

  test('back to the models releases the loaded model', async () => {
    const { user, native } = await openChat(['Hi']);
    expect(native.liveHandles()).toBe(1);
    await user.press(screen.getByRole('button', { name: 'Back to models' }));
    expect(screen.getByText('Choose a model')).toBeOnTheScreen();
    expect(native.liveHandles()).toBe(0);
    await screen.findByText(/^Downloaded: 200\.\d KB$/);
  });
});

describe('prompt lookup', () => {
  test('off by default; the setting turns speculative decoding by prompt lookup on and off', async () => {
    const { user, native } = await openChat(['Yes', '.']);
    const setting = () => screen.getByRole('button', { name: 'Draft tokens by prompt lookup' });
    expect(setting()).toHaveTextContent('Prompt lookup: off');
    await send(user, 'One');
    await screen.findByRole('button', { name: 'Send' });
    await user.press(setting());
    expect(setting()).toHaveTextContent('Prompt lookup: on');
    await send(user, 'Two');
    await screen.findByRole('button', { name: 'Send' });
    await user.press(setting());
    expect(setting()).toHaveTextContent('Prompt lookup: off');
    await send(user, 'Three');
    await screen.findByRole('button', { name: 'Send' });
    expect(native.configs.map((c) => c.drafter)).toEqual([undefined, 'promptLookup', undefined]);
  });
});

describe('thinking', () => {
  // Gemma 4 opens a thought channel only when the prompt does not close it (thinking on).
  const thinker = (prompt: string) =>
    prompt.endsWith('<|turn>model\n')
      ? ['<|channel>thought\n', 'Light ', 'scatters.', '<channel|>', 'Rayleigh', ' scattering.']
      : ['Blue', '.'];

  test('off by default: no thought, the prompt closes the thought channel', async () => {
    const { user, native } = await openChat(thinker, 5, 'gemma4');
    expect(screen.getByRole('button', { name: 'Think before answering' })).toHaveTextContent('Thinking: off');
    await send(user, 'Why is the sky blue?');
    await screen.findByText('Blue.');
    expect(native.prompts[0]).toMatch(/<\|turn>model\n<\|channel>thought\n<channel\|>$/);
    expect(screen.queryByRole('button', { name: 'Show thought' })).not.toBeOnTheScreen();
  });

  test('on: the thought is collapsed under the answer and opens on demand', async () => {
    const { user, native } = await openChat(thinker, 5, 'gemma4');
    await user.press(screen.getByRole('button', { name: 'Think before answering' }));
    expect(screen.getByRole('button', { name: 'Think before answering' })).toHaveTextContent('Thinking: on');
    await send(user, 'Why is the sky blue?');
    await screen.findByText('Rayleigh scattering.', {}, { timeout: 3000 });
    await screen.findByRole('button', { name: 'Send' });
    expect(native.prompts[0]).toContain('<|turn>system\n<|think|>');
    // The bubble shows the answer; the thought is collapsed beneath it.
    expect(answerText()).toEqual(['Rayleigh scattering.Show thought']);
    expect(screen.queryByLabelText('Thought')).not.toBeOnTheScreen();
    await user.press(screen.getByRole('button', { name: 'Show thought' }));
    expect(screen.getByLabelText('Thought')).toHaveTextContent('Light scatters.');
    await user.press(screen.getByRole('button', { name: 'Hide thought' }));
    expect(screen.queryByLabelText('Thought')).not.toBeOnTheScreen();
  });
});
