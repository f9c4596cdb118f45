/**
 * @jest-environment node
 *
 * Fault injection for downloads, for real: a loopback HTTP server that drops, stalls, stays
 * silent, corrupts bytes, answers 5xx/429 with Retry-After and lies about ranges, real files on
 * disk, hostile paths. Run over both adapter sets (Node, and react-native-blob-util over its
 * Node stand-in). Every scenario ends recovered (the right bytes at the final path) or in a clean
 * typed error (nothing at the final path); a wrong file in place fails the suite. The summary
 * line is printed at the end.
 */
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ExecutorchError,
  ResourceFetcher,
  blobUtilAdapters,
  models,
  type ExecutorchErrorCode,
  type RemoteFile,
  type ResourceAdapters,
  type ResourceFetcherOptions,
} from '../src';
import { retryAfterMs } from '../src/resources/retry';
import { fakeBlobUtil } from './support/fakeBlobUtil';
import { HfServer, bytes, sha256, type Fault, type ServedFile } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

const REPO = 'acme/faulty';
const REV = 'r1';
const SIZE = 120_000;

/** Short timings so that stalls and backoff cost milliseconds (the defaults are 30 s / 1 s). */
const FAST: Partial<ResourceFetcherOptions> = {
  idleTimeoutMs: 300,
  retryDelayMs: 10,
  maxRetryDelayMs: 200,
  maxAttempts: 4,
};

const tally = { injected: 0, recovered: 0, cleanErrors: 0, wrongFiles: 0 };

const adapterSets: [string, (docs: string) => ResourceAdapters][] = [
  ['node', (docs) => nodeAdapters(docs)],
  ['react-native-blob-util', (docs) => blobUtilAdapters(fakeBlobUtil(docs))],
];

afterAll(() => {
  const line =
    `download faults: injected ${tally.injected}, recovered ${tally.recovered}, ` +
    `clean errors ${tally.cleanErrors}, wrong files in place ${tally.wrongFiles}`;
  console.log(line);
  expect(tally.wrongFiles).toBe(0);
  // Each counted outcome came from at least one injected fault.
  expect(tally.recovered + tally.cleanErrors).toBeGreaterThan(0);
  expect(tally.injected).toBeGreaterThanOrEqual(tally.recovered + tally.cleanErrors);
});

describe.each(adapterSets)('downloads under faults, %s adapters', (_name, makeAdapters) => {
  let server: HfServer;
  let docs: string;
  let hashes: number;
  let files = 0;

  beforeEach(async () => {
    server = new HfServer();
    await server.start();
    docs = await mkdtemp(join(tmpdir(), 'rne-faults-'));
    hashes = 0;
  });

  afterEach(async () => {
    await server.stop();
    await rm(docs, { recursive: true, force: true });
  });

  function fetcher(options: Partial<ResourceFetcherOptions> = {}): ResourceFetcher {
    const adapters = makeAdapters(docs);
    const fs = {
      ...adapters.fs,
      sha256: (path: string) => {
        hashes += 1;
        return adapters.fs.sha256(path);
      },
    };
    return new ResourceFetcher({ ...adapters, fs, baseUrl: server.baseUrl, ...FAST, ...options });
  }

  function finalPath(path: string): string {
    return join(docs, 'react-native-executorch/models', REPO, REV, path);
  }

  /** Serves a fresh file with a scripted list of faults; returns its registry entry. */
  function serve(
    faults: readonly (Fault | undefined)[],
    extra: Partial<ServedFile> = {},
    registry: Partial<RemoteFile> = {},
  ): { file: RemoteFile; body: Buffer } {
    files += 1;
    const body = bytes(SIZE, 1000 + files);
    const path = `m${files}.pte`;
    server.add(REPO, REV, path, { body, chunkSize: 8192, faults, ...extra });
    const file = { repo: REPO, revision: REV, path, sha256: sha256(body), size: body.length, ...registry };
    return { file, body };
  }

  /** Faults the server actually acted on (scripted for a request that came). */
  function countInjected(file: RemoteFile, faults: readonly (Fault | undefined)[]): number {
    const requests = server.requests.filter((r) => r.path.endsWith(`/${file.path}`)).length;
    return faults.slice(0, requests).filter((f) => f !== undefined).length;
  }

  /** The file at the final name is either absent or exactly `body`. */
  function checkInPlace(file: RemoteFile, body: Buffer): boolean {
    const path = finalPath(file.path);
    const ok = !existsSync(path) || readFileSync(path).equals(body);
    if (!ok) tally.wrongFiles += 1;
    return ok;
  }

  async function expectRecovered(
    faults: readonly (Fault | undefined)[],
    extra: Partial<ServedFile> = {},
    options: Partial<ResourceFetcherOptions> = {},
  ): Promise<RemoteFile> {
    const { file, body } = serve(faults, extra);
    const [path] = await fetcher(options).fetchFiles([file]);
    tally.injected += countInjected(file, faults);
    expect(checkInPlace(file, body)).toBe(true);
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(existsSync(`${path}.part`)).toBe(false);
    tally.recovered += 1;
    return file;
  }

  async function expectCleanError(
    code: ExecutorchErrorCode,
    faults: readonly (Fault | undefined)[],
    extra: Partial<ServedFile> = {},
    registry: Partial<RemoteFile> = {},
  ): Promise<{ error: ExecutorchError; file: RemoteFile }> {
    const { file, body } = serve(faults, extra, registry);
    const error = await fetcher()
      .fetchFiles([file])
      .then(
        () => null,
        (e: unknown) => e,
      );
    tally.injected += Math.max(1, countInjected(file, faults));
    expect(error).toBeInstanceOf(ExecutorchError);
    expect((error as ExecutorchError).code).toBe(code);
    expect(checkInPlace(file, body)).toBe(true);
    expect(existsSync(finalPath(file.path))).toBe(false);
    tally.cleanErrors += 1;
    return { error: error as ExecutorchError, file };
  }

  const ranges = (file: RemoteFile) =>
    server.requests
      .filter((r) => r.path.endsWith(`/${file.path}`))
      .map((r) => Number(/^bytes=(\d+)-$/.exec(r.range ?? '')?.[1] ?? 0));

  describe('recovered', () => {
    it('connection dropped mid-body, twice: resumed with Range', async () => {
      const file = await expectRecovered([
        { kind: 'drop', after: 30_000 },
        { kind: 'drop', after: 30_000 },
      ]);
      const [first, second, third] = ranges(file);
      expect(first).toBe(0);
      expect(second).toBeGreaterThan(0);
      expect(third).toBeGreaterThan(second!);
    });

    it('headers and then silence: the idle timeout aborts, the next request succeeds', async () => {
      await expectRecovered([{ kind: 'stall', after: 0 }]);
    });

    it('silence mid-body: the idle timeout aborts and the next request resumes', async () => {
      const file = await expectRecovered([{ kind: 'stall', after: 40_000 }]);
      expect(ranges(file)[1]).toBeGreaterThan(0);
    });

    it('no answer at all: the idle timeout aborts', async () => {
      await expectRecovered([{ kind: 'silent' }, { kind: 'silent' }]);
    });

    it('503 and 429 are retried', async () => {
      await expectRecovered([
        { kind: 'status', status: 503 },
        { kind: 'status', status: 429 },
        { kind: 'status', status: 500 },
      ]);
    });

    it('a 5xx while resuming keeps the part: the next request resumes from it', async () => {
      const file = await expectRecovered([
        { kind: 'drop', after: 50_000 },
        { kind: 'status', status: 502 },
        { kind: 'status', status: 503 },
      ]);
      const [, afterDrop, after502, after503] = ranges(file);
      expect(afterDrop).toBeGreaterThan(0);
      expect(after502).toBe(afterDrop);
      expect(after503).toBe(afterDrop);
    });

    it('honours Retry-After in seconds and as an HTTP-date', async () => {
      const options = { maxRetryDelayMs: 5000 };
      // Whole seconds: at least 1.5 s of the 2.5 asked for remain.
      const date = new Date(Date.now() + 2500).toUTCString();
      const { file, body } = serve([
        { kind: 'status', status: 503, retryAfter: date },
        { kind: 'status', status: 429, retryAfter: '1' },
      ]);
      await fetcher(options).fetchFiles([file]);
      tally.injected += 2;
      expect(checkInPlace(file, body)).toBe(true);
      tally.recovered += 1;
      const at = server.requests.map((r) => r.at);
      expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(1400);
      expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(950);
    });

    it('caps a huge Retry-After', async () => {
      const file = await expectRecovered([{ kind: 'status', status: 503, retryAfter: '86400' }]);
      expect(server.requests.filter((r) => r.path.endsWith(file.path))).toHaveLength(2);
    });

    it('a corrupted byte in a resumed response: restarted from zero once, automatically', async () => {
      const file = await expectRecovered([{ kind: 'drop', after: 30_000 }, { kind: 'corrupt', at: 90_000 }]);
      const r = ranges(file);
      expect(r).toHaveLength(3);
      expect(r[1]).toBeGreaterThan(0);
      expect(r[2]).toBe(0);
    });

    it('a 206 with the wrong Content-Range adds nothing; the next request resumes', async () => {
      await expectRecovered([{ kind: 'drop', after: 30_000 }, { kind: 'wrongRange' }]);
    });

    it('Content-Length and body cut short (a clean but short answer): resumed', async () => {
      const file = await expectRecovered([{ kind: 'shortLength', length: 25_000 }, { kind: 'shortLength', length: 25_000 }]);
      expect(ranges(file)).toEqual([0, 25_000, 50_000]);
    });

    it('Content-Length promises more than the server sends before closing: resumed', async () => {
      const file = await expectRecovered([{ kind: 'closeEarly', after: 45_000 }]);
      expect(ranges(file)[1]).toBeGreaterThan(0);
    });

    it('a 416 for a valid range: the part is dropped and downloaded again', async () => {
      await expectRecovered([{ kind: 'drop', after: 30_000 }, { kind: 'bogus416' }]);
    });

    it('a server that ignores Range after a drop', async () => {
      await expectRecovered([{ kind: 'drop', after: 30_000 }], { ignoreRange: true });
    });

    it('three files at once, each dropped, one answering 503 while resuming', async () => {
      const scripts: (Fault | undefined)[][] = [
        [{ kind: 'drop', after: 20_000 }, { kind: 'status', status: 503 }],
        [{ kind: 'drop', after: 40_000 }, { kind: 'drop', after: 10_000 }],
        [],
      ];
      const served = scripts.map((faults) => serve(faults, { chunkDelayMs: 2 }));
      // The third file has no fault: a control running alongside.
      const paths = await fetcher().fetchFiles(served.map((s) => s.file));
      served.forEach(({ file, body }, i) => {
        tally.injected += countInjected(file, scripts[i]!);
        expect(checkInPlace(file, body)).toBe(true);
        expect(readFileSync(paths[i]!).equals(body)).toBe(true);
      });
      tally.recovered += 1;
    });

    it('a damaged file of the right size at the final name is detected and replaced', async () => {
      const { file, body } = serve([]);
      const path = finalPath(file.path);
      await mkdir(join(path, '..'), { recursive: true });
      await writeFile(path, bytes(SIZE, 999));
      tally.injected += 1;
      await fetcher().fetchFiles([file]);
      expect(checkInPlace(file, body)).toBe(true);
      expect(readFileSync(path).equals(body)).toBe(true);
      expect(server.requests).toHaveLength(1);
      tally.recovered += 1;
    });
  });

  describe('clean errors', () => {
    it('404: no retry', async () => {
      const { error, file } = await expectCleanError('download_failed', [{ kind: 'status', status: 404 }]);
      expect(error.details.status).toBe(404);
      expect(ranges(file)).toHaveLength(1);
    });

    it('503 on every request: reported after maxAttempts with the status', async () => {
      const faults = Array.from({ length: 4 }, (): Fault => ({ kind: 'status', status: 503 }));
      const { error } = await expectCleanError('download_failed', faults);
      expect(error.details.status).toBe(503);
      expect(error.message).toContain('failed 4 times');
    });

    it('stalls on every request: reported as no data, the part kept for later', async () => {
      const faults = Array.from({ length: 4 }, (): Fault => ({ kind: 'stall', after: 10_000 }));
      const { error, file } = await expectCleanError('download_failed', faults);
      expect(error.message).toContain('no data for 300 ms');
      expect(existsSync(`${finalPath(file.path)}.part`)).toBe(true);
    });

    it('a corrupted byte in a single clean download: a corrupt file, not retried', async () => {
      const { error, file } = await expectCleanError('checksum_mismatch', [{ kind: 'corrupt', at: 5 }]);
      expect(error.message).toContain('corrupt file');
      expect(ranges(file)).toEqual([0]);
      expect(existsSync(`${finalPath(file.path)}.part`)).toBe(false);
    });

    it('corrupted again after the restart from zero: a corrupt file', async () => {
      const { error, file } = await expectCleanError('checksum_mismatch', [
        { kind: 'drop', after: 30_000 },
        { kind: 'corrupt', at: 100_000 },
        { kind: 'corrupt', at: 7 },
      ]);
      expect(error.message).toContain('also when downloaded again from zero');
      expect(ranges(file)).toHaveLength(3);
    });

    it('a body longer than the registry says (Content-Length agrees with the server)', async () => {
      const { error } = await expectCleanError('checksum_mismatch', [undefined], {}, { size: SIZE - 100 });
      expect(error.message).toContain('size');
    });

    it('a 401 is not retried', async () => {
      await expectCleanError('download_failed', [{ kind: 'status', status: 401 }]);
    });

    it('hostile repo, revision and file paths: invalid_path, nothing requested, deleted or written outside', async () => {
      const outside = join(docs, 'outside');
      await mkdir(outside, { recursive: true });
      await writeFile(join(outside, 'keep.txt'), 'keep');
      const { file: cached } = serve([]);
      await fetcher().fetchFiles([cached]);
      // Hostile repo or revision: refused by fetch and delete; hostile file path: by fetch.
      const hostile: Partial<RemoteFile>[] = [
        { repo: '..', revision: '..' },
        { repo: 'acme/..', revision: 'r1' },
        { repo: 'acme/faulty', revision: '..' },
        { repo: 'acme/faulty', revision: '.' },
        { repo: '/etc/passwd' },
        { revision: 'a/b' },
        { revision: '' },
        { path: '../../../../outside/keep.txt' },
        { path: '/abs.pte' },
        { path: 'a\\..\\b.pte' },
        { path: 'a\0.pte' },
        { path: 'a//b.pte' },
        { repo: 'solo' },
      ];
      const f = fetcher();
      const before = server.requests.length;
      for (const h of hostile) {
        const target = { ...cached, ...h };
        const ops: (() => Promise<unknown>)[] = [() => f.fetchFiles([target])];
        if (h.path === undefined) ops.push(() => f.deleteCachedModel(target));
        tally.injected += ops.length;
        for (const op of ops) {
          const error = await Promise.resolve()
            .then(op)
            .then(
              () => null,
              (e: unknown) => e,
            );
          expect([h, error]).toEqual([h, expect.any(ExecutorchError)]);
          expect((error as ExecutorchError).code).toBe('invalid_path');
          tally.cleanErrors += 1;
        }
      }
      expect(() => f.localPath({ ...cached, path: '..' })).toThrow(/`\.\.` segment/);
      expect(() => f.url({ ...cached, repo: 'acme/..' })).toThrow(/`\.\.` segment/);
      expect(server.requests.length).toBe(before);
      expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('keep');
      expect(existsSync(finalPath(cached.path))).toBe(true);
      expect(await f.listCachedModels()).toHaveLength(1);
    });
  });

  describe('verification of cached files', () => {
    it('hashes a cached file once, and again when it changed on disk', async () => {
      const { file, body } = serve([]);
      await fetcher().fetchFiles([file]);
      expect(hashes).toBe(1);
      await fetcher().fetchFiles([file]);
      await fetcher().fetchFiles([file]);
      expect(hashes).toBe(1);
      // Same bytes, new mtime: hashed again (and found good, so not downloaded again).
      await utimes(finalPath(file.path), new Date(), new Date(Date.now() + 5000));
      await fetcher().fetchFiles([file]);
      expect(hashes).toBe(2);
      expect(server.requests).toHaveLength(1);
      expect(checkInPlace(file, body)).toBe(true);
      // The mark is bookkeeping, not a model file.
      expect((await fetcher().listCachedModels())[0]!.files).toEqual([{ path: file.path, size: SIZE }]);
    });

    it('does not trust a mark written in the tick the file last changed in (racy mark)', async () => {
      const { file, body } = serve([]);
      await fetcher().fetchFiles([file]);
      const path = finalPath(file.path);
      const { mtime } = await stat(path);
      // A coarse filesystem clock: the file is rewritten (same size) in the tick its mark was
      // written in, so file and mark share one mtime and size alone cannot tell.
      const damaged = Buffer.from(body);
      damaged[0] = damaged[0]! ^ 1;
      await writeFile(path, damaged);
      await utimes(path, mtime, mtime);
      await utimes(path + '.verified', mtime, mtime);
      tally.injected += 1;
      hashes = 0;
      await fetcher().fetchFiles([file]);
      expect(hashes).toBeGreaterThan(0);
      expect(checkInPlace(file, body)).toBe(true);
      expect(readFileSync(path).equals(body)).toBe(true);
      expect(server.requests).toHaveLength(2);
      tally.recovered += 1;
    });

    it('checks local files against the registry before their first load, once', async () => {
      const model = publishOn(server);
      const f = fetcher();
      const cached = await f.fetchModel(model, 'xnnpack');
      const dir = join(docs, 'sideload');
      await mkdir(dir);
      const local = {
        modelPath: join(dir, 'm.pte'),
        tokenizerPath: join(dir, 'tokenizer.json'),
        chatTemplatePath: join(dir, 'tokenizer_config.json'),
      };
      for (const role of ['modelPath', 'tokenizerPath', 'chatTemplatePath'] as const) {
        await copyFile(cached[role], local[role]);
      }
      hashes = 0;
      await f.verifyLocalFiles(model, 'xnnpack', local);
      await f.verifyLocalFiles(model, 'xnnpack', local);
      expect(hashes).toBe(3);

      const damaged = readFileSync(local.modelPath);
      damaged[damaged.length >> 1] = damaged[damaged.length >> 1]! ^ 1;
      await writeFile(local.modelPath, damaged);
      tally.injected += 1;
      const error = await f.verifyLocalFiles(model, 'xnnpack', local).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ExecutorchError);
      expect((error as ExecutorchError).code).toBe('checksum_mismatch');
      expect((error as ExecutorchError).message).toContain('corrupt file');
      // The caller's file is reported, not deleted.
      expect(existsSync(local.modelPath)).toBe(true);
      tally.cleanErrors += 1;

      // Nothing published to check against: accepted as is.
      await f.verifyLocalFiles(models.llm.smollm2_135m, 'xnnpack', local);
    });
  });
});

describe('Retry-After parsing', () => {
  const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
  it.each([
    ['120', 120_000],
    [' 0 ', 0],
    ['Wed, 21 Oct 2015 07:28:30 GMT', 30_000],
    ['Wed, 21 Oct 2015 07:00:00 GMT', 0],
    ['soon', undefined],
    ['-5', undefined],
    [undefined, undefined],
  ])('%j -> %j ms', (header, expected) => {
    expect(retryAfterMs(header, now)).toBe(expected);
  });
});
