/**
 * @jest-environment node
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ExecutorchError, ResourceFetcher, blobUtilAdapters, type RemoteFile } from '../src';
import { fakeBlobUtil } from './support/fakeBlobUtil';
import { HfServer, bytes, sha256 } from './support/hfServer';

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-blob-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

function fetcher() {
  return new ResourceFetcher({ ...blobUtilAdapters(fakeBlobUtil(docs)), baseUrl: server.baseUrl });
}

function remote(path: string, body: Buffer): RemoteFile {
  return { repo: 'acme/m', revision: 'r', path, sha256: sha256(body), size: body.length };
}

describe('react-native-blob-util adapters (over a Node stand-in of the library)', () => {
  it('download, resume after a drop (appending), verify and cache', async () => {
    const body = bytes(100_000, 31);
    server.add('acme/m', 'r', 'm.pte', { body, dropAfter: 30_000, chunkSize: 5000 });
    const progress: number[] = [];
    const [path] = await fetcher().fetchFiles([remote('m.pte', body)], { onProgress: (p) => progress.push(p) });
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests[1]!.range).toMatch(/^bytes=\d+-$/);
    expect(progress[progress.length - 1]).toBe(1);
    expect(progress.every((p, i) => i === 0 || p >= progress[i - 1]!)).toBe(true);
    expect((await fetcher().listCachedModels())[0]!.files).toEqual([{ path: 'm.pte', size: 100_000 }]);
  });

  it('keeps the whole body when the server ignores the range instead of appending a second copy', async () => {
    const body = bytes(40_000, 32);
    server.add('acme/m', 'r', 'm.pte', { body, dropAfter: 10_000, ignoreRange: true, chunkSize: 2000 });
    const [path] = await fetcher().fetchFiles([remote('m.pte', body)]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    // Dropped; the ranged request answered 200 with the whole file, which replaces the part.
    expect(server.requests.map((r) => [r.status, r.range !== undefined])).toEqual([
      [200, false],
      [200, true],
    ]);
  });

  it('does not keep an error page as model bytes', async () => {
    const file = remote('missing.pte', Buffer.from('x'));
    const error = await fetcher()
      .fetchFiles([file])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutorchError);
    expect((error as ExecutorchError).details.status).toBe(404);
    expect(existsSync(join(docs, 'react-native-executorch/models/acme/m/r/missing.pte.part'))).toBe(false);
  });

  it("keeps a dropped range by its own status, not another task's (blob-util sends every task's events to every listener)", async () => {
    const body = bytes(60_000, 33);
    server.add('acme/m', 'r', 'm.pte', { body, chunkSize: 5000, chunkDelayMs: 5, faults: [{ kind: 'drop', after: 30_000 }] });
    const dir = join(docs, 'react-native-executorch/models/acme/m/r');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'm.pte.part'), body.subarray(0, 10_000));
    const f = fetcher();
    const pending = f.fetchFiles([remote('m.pte', body)]);
    // A 404 for another file arrives while the ranged response for m.pte is still streaming.
    await new Promise((r) => setTimeout(r, 10));
    await f.fetchFiles([remote('other.pte', Buffer.from('x'))]).catch(() => {});
    const [path] = await pending;
    expect(readFileSync(path!).equals(body)).toBe(true);
    const ranges = server.requests.filter((r) => r.path.endsWith('m.pte')).map((r) => r.range);
    // The 30 000 bytes of the dropped 206 were kept: the next request starts after them.
    expect(ranges).toEqual(['bytes=10000-', 'bytes=40000-']);
  });
});
