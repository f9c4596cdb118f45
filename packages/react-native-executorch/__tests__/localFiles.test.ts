/**
 * `localFiles` skips the download but not the filesystem: the chat template is read and
 * published checksums are verified through the filesystem adapter. Without
 * `react-native-blob-util` and without `resources`, loading says what to install or pass; with
 * a filesystem adapter and an HTTP adapter that must not be used, it loads.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LLMModule, models, type HttpAdapter, type ModelFiles } from '../src';
import smolConfig from './fixtures/smollm2_tokenizer_config.json';
import { FakeNative } from '../src/testing/fakeNative';
import { nodeAdapters } from './support/nodeAdapters';

// An app without react-native-blob-util: its require fails, as Metro's would.
jest.mock('react-native-blob-util', () => {
  throw new Error("Cannot find module 'react-native-blob-util'");
});

const smol = models.llm.smollm2_135m;
let dir: string;
let files: ModelFiles;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rne-local-'));
  files = {
    modelPath: join(dir, 'model.pte'),
    tokenizerPath: join(dir, 'tokenizer.json'),
    chatTemplatePath: join(dir, 'tokenizer_config.json'),
  };
  writeFileSync(files.modelPath, 'pte');
  writeFileSync(files.tokenizerPath, '{}');
  writeFileSync(files.chatTemplatePath, JSON.stringify(smolConfig));
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('without react-native-blob-util or resources, loading fails with no_resource_adapter before native code', async () => {
  const native = new FakeNative();
  const llm = new LLMModule({ model: smol, localFiles: files, native });
  await expect(llm.load()).rejects.toMatchObject({
    code: 'no_resource_adapter',
    message: expect.stringContaining('Install `react-native-blob-util`'),
  });
  expect(native.loads).toHaveLength(0);
});

test('with a filesystem adapter, localFiles load without any HTTP request', async () => {
  const requests: string[] = [];
  const noHttp: HttpAdapter = {
    download: async (request) => {
      requests.push(request.url);
      throw new Error('localFiles must not download');
    },
  };
  const native = new FakeNative();
  const progress: number[] = [];
  const resources = { ...nodeAdapters(dir), http: noHttp };
  const llm = new LLMModule({ model: smol, localFiles: files, native, resources });
  await llm.load({ onDownloadProgress: (p) => progress.push(p) });
  expect(llm.isReady).toBe(true);
  expect(native.loads).toEqual([
    { modelPath: files.modelPath, tokenizerPath: files.tokenizerPath, backend: 'xnnpack', peakMemoryBytes: smol.variants.xnnpack.peakMemoryBytes },
  ]);
  expect(requests).toEqual([]);
  expect(progress).toEqual([1]);
  llm.release();
});
