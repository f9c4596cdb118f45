import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { screen, waitFor, within } from '@testing-library/react-native';
import { models } from 'react-native-executorch';
import { FakeNative, type FakeNativeOptions } from 'react-native-executorch/jest';
import smolConfig from 'react-native-executorch/__tests__/fixtures/smollm2_tokenizer_config.json';

import { documentDir, renderApp } from './support/app';
import { startMirror } from './support/mirror';

const gemma = models.llm.gemma4_e2b;
const smol = models.llm.smollm2_135m;

function card(name: string) {
  return within(screen.getByLabelText(name));
}

describe('model picker', () => {
  test('lists the registry with the backend each model will use on an iPhone', () => {
    renderApp({ os: 'ios' });
    expect(screen.getByText('Choose a model')).toBeOnTheScreen();
    expect(card(gemma.name).getByText('Backend on this device: MLX (GPU)')).toBeOnTheScreen();
    expect(card(smol.name).getByText('Backend on this device: XNNPACK (CPU)')).toBeOnTheScreen();
    // Nothing in the registry has checksums yet: no size to show, and it says so.
    expect(card(gemma.name).getByText('Download: not published yet')).toBeOnTheScreen();
    expect(card(smol.name).getByText(`Context: ${smol.contextLength} tokens`)).toBeOnTheScreen();
  });

  test.each<[string, string, FakeNativeOptions]>([
    ['iOS simulator', 'XNNPACK (CPU)', { os: 'ios', isSimulator: true }],
    ['Android phone', 'Vulkan (GPU)', { os: 'android' }],
    ['Android build without Vulkan', 'XNNPACK (CPU)', { os: 'android', backends: ['xnnpack'] }],
  ])('on an %s Gemma 4 uses %s', (_, label, device) => {
    renderApp(device);
    expect(card(gemma.name).getByText(`Backend on this device: ${label}`)).toBeOnTheScreen();
  });

  test('offers a backend override only where the model ships several, and only runnable ones', async () => {
    const { user } = renderApp({ os: 'ios', isSimulator: true });
    const gemmaCard = card(gemma.name);
    expect(gemmaCard.getByRole('button', { name: `${gemma.name}: automatic backend` })).toBeSelected();
    // The simulator cannot run MLX, and an iOS binary has no Vulkan.
    expect(gemmaCard.getByRole('button', { name: `${gemma.name}: mlx` })).toBeDisabled();
    expect(gemmaCard.getByRole('button', { name: `${gemma.name}: vulkan` })).toBeDisabled();
    expect(gemmaCard.getByText('mlx (not here)')).toBeOnTheScreen();
    expect(card(smol.name).queryByRole('button', { name: `${smol.name}: automatic backend` })).not.toBeOnTheScreen();

    await user.press(gemmaCard.getByRole('button', { name: `${gemma.name}: xnnpack` }));
    expect(gemmaCard.getByText('Backend on this device: XNNPACK (CPU) (chosen)')).toBeOnTheScreen();
    expect(gemmaCard.getByRole('button', { name: `${gemma.name}: xnnpack` })).toBeSelected();
  });

  test('the chosen backend is the one downloaded and loaded', async () => {
    const mirror = await startMirror({ backends: ['vulkan', 'xnnpack'] });
    try {
      const { model } = mirror;
      const native = new FakeNative({ os: 'android' });
      const { user } = renderApp(native, { catalog: [model], baseUrl: mirror.server.baseUrl });
      const modelCard = card(model.name);
      expect(modelCard.getByText('Backend on this device: Vulkan (GPU)')).toBeOnTheScreen();
      expect(modelCard.getByText(/^Download: 200\.\d KB$/)).toBeOnTheScreen();
      await user.press(modelCard.getByRole('button', { name: `${model.name}: xnnpack` }));
      await user.press(modelCard.getByRole('button', { name: `Open ${model.name}` }));
      await screen.findByText(`Ask ${model.name} something.`, {}, { timeout: 3000 });
      expect(screen.getByText('Backend in use: XNNPACK (CPU)')).toBeOnTheScreen();
      expect(native.loads.map((l) => [l.backend, l.modelPath.endsWith('/xnnpack/mirror.pte')])).toEqual([
        ['xnnpack', true],
      ]);
      expect(mirror.server.requests.map((r) => r.path).filter((p) => p.endsWith('.pte'))).toEqual([
        `/${model.hf.repo}/resolve/${model.hf.revision}/xnnpack/mirror.pte`,
      ]);
    } finally {
      await mirror.stop();
    }
  });

  test('the assistant drafter is offered only where the variant declares one, and loads with it', async () => {
    // Gemma 4's program with the assistant, sideloaded for XNNPACK (placeholder bytes: the fake
    // runner reads none; its real chat template). The plain program is not there.
    const dir = join(documentDir(), 'sideload', gemma.id);
    mkdirSync(dir, { recursive: true });
    for (const file of ['xnnpack_assistant.pte', 'tokenizer.json']) writeFileSync(join(dir, file), 'bytes');
    const fixtures = join(dirname(require.resolve('react-native-executorch/package.json')), '__tests__', 'fixtures', 'gemma4');
    copyFileSync(join(fixtures, 'gemma4.jinja'), join(dir, 'chat_template.jinja'));
    const { user, native } = renderApp({ os: 'android' });
    const gemmaCard = card(gemma.name);
    const choice = () => gemmaCard.queryByRole('button', { name: `${gemma.name}: speculative drafter assistant` });
    // Android picks Vulkan, whose variant has no assistant; SmolLM2 has none anywhere.
    expect(choice()).not.toBeOnTheScreen();
    expect(card(smol.name).queryByText('Speculative drafter: assistant')).not.toBeOnTheScreen();

    await user.press(gemmaCard.getByRole('button', { name: `${gemma.name}: xnnpack` }));
    expect(choice()).toHaveTextContent('Speculative drafter: assistant');
    expect(choice()).not.toBeSelected();
    expect(
      gemmaCard.getByText(`Loads ${gemma.variants.xnnpack.assistant.path} instead: a larger download (not published yet)`),
    ).toBeOnTheScreen();
    expect(gemmaCard.getByText('Download: not published yet')).toBeOnTheScreen();
    await user.press(choice()!);
    expect(choice()).toBeSelected();
    await waitFor(() => expect(gemmaCard.getByText('Files: sideloaded on this device')).toBeOnTheScreen());

    await user.press(gemmaCard.getByRole('button', { name: `Open ${gemma.name}` }));
    await screen.findByText(`Ask ${gemma.name} something.`);
    expect(native?.loads.map((l) => [l.backend, l.modelPath])).toEqual([['xnnpack', join(dir, 'xnnpack_assistant.pte')]]);
    // The chat's drafter is the assistant, which the SDK refuses unless loaded with assistant: true.
    const setting = () => screen.getByRole('button', { name: 'Draft tokens by the assistant' });
    expect(setting()).toHaveTextContent('Assistant drafter: off');
    await user.press(setting());
    expect(setting()).toHaveTextContent('Assistant drafter: on');
    await user.type(screen.getByLabelText('Message'), 'Hi');
    await user.press(screen.getByRole('button', { name: 'Send' }));
    await screen.findByText(/tokens, finished$/);
    expect(screen.queryByRole('alert')).not.toBeOnTheScreen();
    expect(native?.configs.map((c) => c.drafter)).toEqual(['assistant']);
  });

  test('with the assistant drafter chosen, its program is downloaded instead of the plain one', async () => {
    const mirror = await startMirror({ assistant: true });
    try {
      const { model } = mirror;
      const native = new FakeNative({ os: 'android' });
      const { user } = renderApp(native, { catalog: [model], baseUrl: mirror.server.baseUrl });
      const modelCard = card(model.name);
      expect(modelCard.getByText(/^Loads xnnpack\/mirror_assistant\.pte instead: a larger download \(260\.\d KB\)$/)).toBeOnTheScreen();
      expect(modelCard.getByText(/^Download: 200\.\d KB$/)).toBeOnTheScreen();
      await user.press(modelCard.getByRole('button', { name: `${model.name}: speculative drafter assistant` }));
      expect(modelCard.getByText(/^Download: 260\.\d KB$/)).toBeOnTheScreen();
      await user.press(modelCard.getByRole('button', { name: `Open ${model.name}` }));
      await screen.findByText(`Ask ${model.name} something.`, {}, { timeout: 3000 });
      expect(native.loads.map((l) => l.modelPath.endsWith('/xnnpack/mirror_assistant.pte'))).toEqual([true]);
      expect(mirror.server.requests.map((r) => r.path).filter((p) => p.endsWith('.pte'))).toEqual([
        `/${model.hf.repo}/resolve/${model.hf.revision}/xnnpack/mirror_assistant.pte`,
      ]);
    } finally {
      await mirror.stop();
    }
  });

  test('a model that cannot run on the device cannot be opened, and says why', () => {
    renderApp({ os: 'ios', backends: ['mlx'] });
    expect(card(smol.name).getByText('Cannot run on this ios: it ships xnnpack')).toBeOnTheScreen();
    expect(card(smol.name).getByRole('button', { name: `Open ${smol.name}` })).toBeDisabled();
  });

  test('sideloaded files are found and run instead of a download', async () => {
    const dir = join(documentDir(), 'sideload', smol.id);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'xnnpack.pte'), 'pte');
    writeFileSync(join(dir, 'tokenizer.json'), '{}');
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(smolConfig));
    const { user, native } = renderApp({ os: 'android' });
    await waitFor(() => expect(card(smol.name).getByText('Files: sideloaded on this device')).toBeOnTheScreen());
    // Gemma has no sideloaded files and stays a (not yet possible) download.
    expect(card(gemma.name).getByText('Download: not published yet')).toBeOnTheScreen();

    await user.press(screen.getByRole('button', { name: `Open ${smol.name}` }));
    await screen.findByText(`Ask ${smol.name} something.`);
    expect(native?.loads).toEqual([
      {
        modelPath: join(dir, 'xnnpack.pte'),
        tokenizerPath: join(dir, 'tokenizer.json'),
        backend: 'xnnpack',
        // The registry's measured peak, for the native memory guard.
        peakMemoryBytes: expect.any(Number),
      },
    ]);
  });

  test('an app built without the native module says so, and opening a model explains it', async () => {
    const { user } = renderApp(null);
    expect(screen.getByText(/native part of react-native-executorch is not in this build/)).toBeOnTheScreen();
    expect(card(gemma.name).getByText('Backend: unknown (native module missing)')).toBeOnTheScreen();
    await user.press(screen.getByRole('button', { name: `Open ${gemma.name}` }));
    expect(await screen.findByText('The native part of the SDK is missing')).toBeOnTheScreen();
    expect(screen.getByText(/not linked/)).toBeOnTheScreen();
  });
});
