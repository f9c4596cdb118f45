/**
 * @jest-environment node
 *
 * The shared fetcher over react-native-blob-util (the Node stand-in, its requests sent to
 * 127.0.0.1): background transfer on iOS, the foreground one on Android.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Platform } from 'react-native';

import type { BlobUtilModule, RemoteFile } from '../src';
import type * as DefaultFetcher from '../src/resources/defaultFetcher';
import { fakeBlobUtil } from './support/fakeBlobUtil';
import { HfServer, bytes, sha256 } from './support/hfServer';

let mockBlobUtil: BlobUtilModule;
jest.mock('react-native-blob-util', () => ({
  get default() {
    return mockBlobUtil;
  },
}));

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-default-'));
});

afterEach(async () => {
  Platform.OS = 'ios';
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

/** Fetches one file through a fresh shared fetcher on `os`; the blob-util configs it used. */
async function fetchOn(os: 'ios' | 'android', body: Buffer): Promise<{ path: string; configs: object[] }> {
  server.add('acme/m', 'r', 'm.pte', { body });
  const file: RemoteFile = { repo: 'acme/m', revision: 'r', path: 'm.pte', sha256: sha256(body), size: body.length };
  const fake = fakeBlobUtil(docs);
  const configs: object[] = [];
  mockBlobUtil = {
    ...fake,
    config(options) {
      configs.push(options);
      const configured = fake.config(options);
      return { fetch: (method, url, headers) => configured.fetch(method, url.replace('https://huggingface.co', server.baseUrl), headers) };
    },
  };
  // The module reads the platform when the fetcher is made (after isolateModules returned,
  // so from the main registry); isolated, it holds no shared fetcher from another test.
  Platform.OS = os;
  let module!: typeof DefaultFetcher;
  jest.isolateModules(() => {
    module = require('../src/resources/defaultFetcher') as typeof DefaultFetcher;
  });
  const [path] = await module.getResourceFetcher().fetchFiles([file]);
  return { path: path!, configs };
}

it('downloads in background ranges on iOS', async () => {
  const body = bytes(70_000, 61);
  const { path, configs } = await fetchOn('ios', body);
  expect(readFileSync(path).equals(body)).toBe(true);
  expect(configs.length).toBeGreaterThan(0);
  for (const config of configs) expect(config).toMatchObject({ IOSBackgroundTask: true });
  // One 64 MiB range holds the whole file.
  expect(server.requests.map((r) => r.range)).toEqual([`bytes=0-${body.length - 1}`]);
});

it('keeps the foreground transfer on Android', async () => {
  const body = bytes(70_000, 62);
  const { path, configs } = await fetchOn('android', body);
  expect(readFileSync(path).equals(body)).toBe(true);
  for (const config of configs) expect(config).not.toHaveProperty('IOSBackgroundTask');
  expect(server.requests.map((r) => r.range)).toEqual([undefined]);
});
