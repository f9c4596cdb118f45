/**
 * @jest-environment node
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, ResourceFetcher } from '../src';
import { codeOf } from './support/errorCode';
import { FakeNative } from './support/fakeNative';
import { HfServer } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-module-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

function fetcher() {
  return new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
}

describe('LLMModule', () => {
  it('downloads a published model over HTTP, loads it and chats', async () => {
    const model = publishOn(server);
    const native = new FakeNative({ os: 'android', answer: () => ['Paris', '.'] });
    const llm = new LLMModule({ model, resources: fetcher(), native });
    const progress: number[] = [];
    await llm.load({ onDownloadProgress: (p) => progress.push(p) });

    expect(llm.isReady).toBe(true);
    expect(llm.backend).toBe('xnnpack');
    expect(progress[progress.length - 1]).toBe(1);
    expect(progress.length).toBeGreaterThan(3);
    const root = join(docs, 'react-native-executorch/models/acme/smol-published/r1');
    expect(native.loads).toEqual([
      { modelPath: join(root, 'xnnpack/smol.pte'), tokenizerPath: join(root, 'tokenizer.json'), backend: 'xnnpack' },
    ]);

    const pieces: string[] = [];
    expect(await llm.sendMessage('Capital of France?', { onToken: (t) => pieces.push(t) })).toBe('Paris.');
    expect(pieces).toEqual(['Paris', '.']);
    expect(llm.messageHistory).toHaveLength(2);
    expect(llm.stats?.generatedTokens).toBe(2);

    expect(await llm.generate([{ role: 'user', content: 'Again?' }])).toBe('Paris.');
    expect(llm.messageHistory).toHaveLength(2);

    llm.clearHistory();
    expect(llm.messageHistory).toHaveLength(0);
    expect(native.calls).toContain('reset');

    llm.release();
    expect(native.liveHandles()).toBe(0);
    expect(await codeOf(llm.sendMessage('x'))).toBe('released');
    expect(await codeOf(llm.load())).toBe('released');
  });

  it('a second module finds the files in the cache without downloading', async () => {
    const model = publishOn(server);
    await new LLMModule({ model, resources: fetcher(), native: new FakeNative() }).load();
    const requests = server.requests.length;
    const again = new LLMModule({ model, resources: fetcher(), native: new FakeNative() });
    await again.load();
    expect(again.isReady).toBe(true);
    expect(server.requests.length).toBe(requests);
  });

  it('cancels loading through the signal with download_cancelled', async () => {
    const model = publishOn(server);
    server.add('acme/smol-published', 'r1', 'xnnpack/smol.pte', {
      body: Buffer.alloc(120_000),
      chunkSize: 4096,
      chunkDelayMs: 10,
    });
    const llm = new LLMModule({ model, resources: fetcher(), native: new FakeNative() });
    const controller = new AbortController();
    const loading = llm.load({ signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    expect(await codeOf(loading)).toBe('download_cancelled');
    expect(llm.isReady).toBe(false);
  });

  it('release() during the download cancels it and the load rejects with released', async () => {
    const model = publishOn(server);
    server.add('acme/smol-published', 'r1', 'xnnpack/smol.pte', {
      body: Buffer.alloc(120_000),
      chunkSize: 4096,
      chunkDelayMs: 10,
    });
    const native = new FakeNative();
    const llm = new LLMModule({ model, resources: fetcher(), native });
    // Released once the first bytes are on disk.
    const loading = llm.load({ onDownloadProgress: (p) => p > 0 && llm.release() });
    expect(await codeOf(loading)).toBe('released');
    expect(native.loads).toHaveLength(0);
    // The download stopped: well after the time the whole file needs (~300 ms at this pace),
    // the model has not reached its final (verified) name.
    await new Promise((r) => setTimeout(r, 500));
    const finalPath = join(docs, 'react-native-executorch/models/acme/smol-published/r1/xnnpack/smol.pte');
    expect(existsSync(finalPath)).toBe(false);
  });

  it('refuses to generate before load', async () => {
    const llm = new LLMModule({ model: publishOn(server), resources: fetcher(), native: new FakeNative() });
    expect(await codeOf(llm.sendMessage('x'))).toBe('model_not_loaded');
  });

  it('needs resource adapters to download when react-native-blob-util is absent', async () => {
    const llm = new LLMModule({ model: publishOn(server), native: new FakeNative() });
    expect(await codeOf(llm.load())).toBe('no_resource_adapter');
  });
});
