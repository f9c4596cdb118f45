import { screen, waitFor } from '@testing-library/react-native';
import { models } from 'react-native-executorch';
import { FakeNative, nativeError } from 'react-native-executorch/jest';

import { renderApp } from './support/app';
import { startMirror, type Mirror } from './support/mirror';

let mirror: Mirror | null = null;

afterEach(async () => {
  await mirror?.stop();
  mirror = null;
});

async function open(user: ReturnType<typeof renderApp>['user'], name: string) {
  await user.press(screen.getByRole('button', { name: `Open ${name}` }));
}

async function send(user: ReturnType<typeof renderApp>['user'], text: string) {
  await user.type(screen.getByLabelText('Message'), text);
  await user.press(screen.getByRole('button', { name: 'Send' }));
}

describe('errors', () => {
  test('a registry model without published files explains itself', async () => {
    const gemma = models.llm.gemma4_e2b;
    const { user } = renderApp({ os: 'ios' });
    await open(user, gemma.name);
    expect(await screen.findByRole('alert', { name: 'This model is not published yet' })).toBeOnTheScreen();
    expect(screen.getByText(/Gemma 4 E2B: its mlx variant is not published yet/)).toBeOnTheScreen();
    expect(screen.getByText(/Sideload them/)).toBeOnTheScreen();
    await user.press(screen.getByRole('button', { name: 'Choose another model' }));
    expect(screen.getByText('Choose a model')).toBeOnTheScreen();
  });

  test('a failed download is reported, and retry downloads it', async () => {
    mirror = await startMirror({ serveModelFiles: false });
    const { user, native } = renderApp({ os: 'android' }, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    await open(user, mirror.model.name);
    expect(await screen.findByText('The download failed', {}, { timeout: 3000 })).toBeOnTheScreen();
    expect(screen.getByText(/404/)).toBeOnTheScreen();

    mirror.serveModel();
    await user.press(screen.getByRole('button', { name: 'Retry' }));
    await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 3000 });
    expect(screen.queryByRole('alert')).not.toBeOnTheScreen();
    expect(native?.loads).toHaveLength(1);
  });

  test('a model the runtime rejects is reported, and retry loads again', async () => {
    mirror = await startMirror();
    const native = new FakeNative({ os: 'android' });
    native.failNextLoad = nativeError('invalid_model', 'mirror.pte: the program has no forward method');
    const { user } = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    await open(user, mirror.model.name);
    expect(await screen.findByText('The model files could not be loaded', {}, { timeout: 3000 })).toBeOnTheScreen();
    expect(screen.getByText('mirror.pte: the program has no forward method')).toBeOnTheScreen();

    await user.press(screen.getByRole('button', { name: 'Retry' }));
    await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 3000 });
    expect(native.calls.filter((c) => c === 'loadLLM')).toHaveLength(2);
  });

  test('a failed generation is reported in the chat, and the message can be sent again', async () => {
    mirror = await startMirror();
    const native = new FakeNative({ os: 'android', answer: () => ['Paris', '.'] });
    const { user } = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    await open(user, mirror.model.name);
    await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 3000 });

    native.failNextGenerate = nativeError('execution_failed', 'Vulkan: device lost');
    await send(user, 'Capital of France?');
    expect(await screen.findByText('Something went wrong')).toBeOnTheScreen();
    expect(screen.getByText('Vulkan: device lost')).toBeOnTheScreen();

    await user.press(await screen.findByRole('button', { name: 'Send again' }));
    expect(await screen.findByText('Paris.')).toBeOnTheScreen();
    expect(screen.getByText('Capital of France?')).toBeOnTheScreen();
    expect(screen.queryByRole('alert')).not.toBeOnTheScreen();
  });

  test('a conversation that outgrows the context says to clear it, and clearing recovers', async () => {
    mirror = await startMirror();
    const native = new FakeNative({ os: 'android', answer: () => ['Hi'] });
    const { user } = renderApp(native, { catalog: [mirror.model], baseUrl: mirror.server.baseUrl });
    await open(user, mirror.model.name);
    await screen.findByText(`Ask ${mirror.model.name} something.`, {}, { timeout: 3000 });
    await send(user, 'One');
    await screen.findByText('Hi');

    native.failNextGenerate = nativeError('context_full', 'The prompt needs 2100 tokens; the context holds 2048.');
    await send(user, 'Two');
    expect(await screen.findByText('The conversation is too long for the model')).toBeOnTheScreen();
    expect(await screen.findByRole('button', { name: 'Send again' })).toBeOnTheScreen();
    expect(screen.getByText('Clear the conversation and ask again.')).toBeOnTheScreen();

    await user.press(screen.getByRole('button', { name: 'Clear conversation' }));
    expect(screen.queryByRole('alert')).not.toBeOnTheScreen();
    await send(user, 'Three');
    await waitFor(() => expect(screen.getByText('Three')).toBeOnTheScreen());
    await screen.findByText('Hi');
    expect(screen.queryByRole('alert')).not.toBeOnTheScreen();
  });
});
