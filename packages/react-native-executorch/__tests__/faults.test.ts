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
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import {
  copyFile,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readlink,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
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
import { rng } from './support/rng';

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
        { path: 'a\n.pte' },
        { path: 'model.pte\r\nX-Injected: 1' },
        { revision: 'main\n' },
        { revision: 'r\t1' },
        { repo: 'acme/fa\u0085ulty' },
        { repo: 'acme\u2028/faulty' },
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
      expect(() => f.localPath({ ...cached, revision: 'main\n' })).toThrow(/revision "main\\n": it contains the control character U\+000A \(a newline\)/);
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

/**
 * The second round: generated cases per class, from a seeded generator (`RNE_FAULT_SEED` picks
 * another seed): hostile server behaviours (trickles, oversized, endless and compressed-bomb
 * bodies, abrupt closes, wrong lengths), planted links, loops and special files in the cache,
 * full disks, in-place changes of verified files and forged marks, and concurrent fetchers in
 * one process and in two. Every case must end recovered (the right bytes) or in a typed error,
 * within a time bound, with nothing outside the cache written or deleted and never a wrong file
 * returned or left under a final name.
 */
const SEED = Number(process.env.RNE_FAULT_SEED ?? 39);
const GEN_SIZE = 40_000;
/** A case that takes longer than this is a hang. */
const HANG_MS = 8000;
const GEN: Partial<ResourceFetcherOptions> = {
  idleTimeoutMs: 300,
  retryDelayMs: 5,
  maxRetryDelayMs: 50,
  maxAttempts: 3,
  minBytesPerSecond: 20_000,
  rateWindowMs: 250,
  deadlineGraceMs: 4000,
  lockStaleMs: 600,
  lockPollMs: 20,
};
const round2 = { cases: 0, recovered: 0, typed: 0, crashes: 0, hangs: 0, outside: 0, wrongFiles: 0, oversized: 0 };
const crashes: string[] = [];

afterAll(() => {
  console.log(
    `download faults, round 2 (seed ${SEED}): cases ${round2.cases}, recovered ${round2.recovered}, ` +
      `typed errors ${round2.typed}, crashes ${round2.crashes}, hangs ${round2.hangs}, ` +
      `writes/deletes outside the cache ${round2.outside}, wrong files ${round2.wrongFiles}, ` +
      `parts past the registry size ${round2.oversized}`,
  );
  expect(crashes).toEqual([]);
  expect(round2).toMatchObject({ crashes: 0, hangs: 0, outside: 0, wrongFiles: 0, oversized: 0 });
  // Both outcomes occur (unless `-t` selected a few cases).
  if (round2.cases > 100) {
    expect(round2.recovered).toBeGreaterThan(0);
    expect(round2.typed).toBeGreaterThan(0);
  }
});

/** Every path below `dir` (links not followed) with its type and content hash. */
async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  const visit = async (path: string) => {
    const s = await lstat(path);
    if (s.isDirectory()) {
      out.push(`${path}/`);
      for (const name of (await readdir(path)).sort()) await visit(join(path, name));
    } else if (s.isSymbolicLink()) out.push(`${path} -> ${await readlink(path)}`);
    else if (s.isFile()) out.push(`${path} ${sha256(readFileSync(path))}`);
    else out.push(`${path} special`);
  };
  await visit(dir);
  return out;
}

type Planted = 'linkToFile' | 'linkToDir' | 'loop' | 'dangling' | 'dir' | 'fifo';
const PLACES = ['owner', 'repo', 'revision', 'sub', 'final', 'part', 'verified', 'lock'] as const;

describe.each(adapterSets)('round 2: generated cases, %s adapters', (adapterName, makeAdapters) => {
  const node = adapterName === 'node';
  const random = rng(SEED + (node ? 0 : 1000));
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  let server: HfServer;
  let docs: string;
  let outside: string;
  let served = 0;

  beforeEach(async () => {
    server = new HfServer();
    await server.start();
    docs = await mkdtemp(join(tmpdir(), 'rne-round2-'));
    outside = join(docs, 'outside');
    await mkdir(join(outside, 'victimDir'), { recursive: true });
    await writeFile(join(outside, 'victim.bin'), bytes(GEN_SIZE, 5));
    await writeFile(join(outside, 'victimDir', 'inner.txt'), 'keep');
  });

  afterEach(async () => {
    await server.stop();
    await rm(docs, { recursive: true, force: true });
  });

  const root = () => join(docs, 'react-native-executorch/models');
  const fetcher = (options: Partial<ResourceFetcherOptions> = {}, adapters = makeAdapters(docs)) =>
    new ResourceFetcher({ ...adapters, baseUrl: server.baseUrl, ...GEN, ...options });

  function serveGen(faults: readonly (Fault | undefined)[] = [], extra: Partial<ServedFile> = {}) {
    served += 1;
    const body = bytes(GEN_SIZE, 5000 + served);
    const path = `sub/g${served}.pte`;
    server.add(REPO, REV, path, { body, chunkSize: 8192, faults, ...extra });
    const file: RemoteFile = { repo: REPO, revision: REV, path, sha256: sha256(body), size: body.length };
    return { file, body, final: join(root(), REPO, REV, path) };
  }

  /**
   * Runs one case: `op` must settle within HANG_MS, resolve or reject with an ExecutorchError,
   * touch nothing outside the cache, and leave no wrong file at `final` nor a part past its size.
   */
  async function runCase(
    label: string,
    op: () => Promise<unknown>,
    check: { final?: string; body?: Buffer; returned?: (value: unknown) => string[] } = {},
  ): Promise<'ok' | string> {
    round2.cases += 1;
    const before = await snapshot(outside);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hang = new Promise<'hang'>((resolve) => {
      timer = setTimeout(() => resolve('hang'), HANG_MS);
    });
    let outcome: 'ok' | string;
    try {
      const value = await Promise.race([op(), hang]);
      if (value === 'hang') {
        round2.hangs += 1;
        crashes.push(`${label}: hang`);
        return 'hang';
      }
      for (const path of check.returned?.(value) ?? []) {
        if (!check.body || !readFileSync(path).equals(check.body)) {
          round2.wrongFiles += 1;
          crashes.push(`${label}: returned a wrong file ${path}`);
        }
      }
      round2.recovered += 1;
      outcome = 'ok';
    } catch (error) {
      if (error instanceof ExecutorchError) {
        round2.typed += 1;
        outcome = error.code;
      } else {
        round2.crashes += 1;
        crashes.push(`${label}: ${String(error)}`);
        outcome = 'crash';
      }
    } finally {
      clearTimeout(timer);
    }
    if (JSON.stringify(await snapshot(outside)) !== JSON.stringify(before)) {
      round2.outside += 1;
      crashes.push(`${label}: changed ${outside}`);
    }
    if (check.final && check.body) {
      const info = await lstat(check.final).catch(() => null);
      if (info && !(info.isFile() && readFileSync(check.final).equals(check.body))) {
        round2.wrongFiles += 1;
        crashes.push(`${label}: a wrong file at ${check.final}`);
      }
      const part = await lstat(`${check.final}.part`).catch(() => null);
      if (part && part.size > check.body.length) {
        round2.oversized += 1;
        crashes.push(`${label}: ${part.size} bytes in the part`);
      }
    }
    return outcome;
  }

  const fetchCase = (label: string, f: ResourceFetcher, s: ReturnType<typeof serveGen>) =>
    runCase(label, () => f.fetchFiles([s.file]), {
      final: s.final,
      body: s.body,
      returned: (paths) => paths as string[],
    });

  /** One generated server misbehaviour. */
  function genFault(): Fault | undefined {
    switch (int(0, 9)) {
      case 0:
        return { kind: 'trickle', after: int(0, GEN_SIZE - 1000), everyMs: int(20, 120) };
      case 1:
        return { kind: 'oversize', extra: int(1, 50_000), declared: random() < 0.5 };
      case 2:
        return { kind: 'endless' };
      case 3:
        return { kind: 'gzipBomb' };
      case 4:
        return { kind: 'drop', after: int(0, GEN_SIZE - 1) };
      case 5:
        return { kind: 'closeEarly', after: int(0, GEN_SIZE - 1) };
      case 6:
        return { kind: 'shortLength', length: int(1, GEN_SIZE - 1) };
      case 7:
        return { kind: 'status', status: pick([500, 503, 429, 408]) };
      case 8:
        return { kind: 'stall', after: int(0, GEN_SIZE - 1) };
      default:
        return undefined;
    }
  }

  it('hostile server behaviours: recovered or typed, never past the size', async () => {
    for (let i = 0; i < 12; i += 1) {
      const faults = Array.from({ length: int(1, 3) }, genFault);
      const s = serveGen(faults);
      const outcome = await fetchCase(`server ${JSON.stringify(faults)}`, fetcher(), s);
      const tooMuch = faults.some((f) => f && ['oversize', 'endless', 'gzipBomb'].includes(f.kind));
      // A body past the size is never retried into success.
      if (tooMuch && outcome !== 'ok') expect(['checksum_mismatch', 'download_too_slow', 'download_failed']).toContain(outcome);
    }
  });

  it('a trickle fails typed as too slow, within the window times the attempts', async () => {
    const trickle: Fault = { kind: 'trickle', after: 1000, everyMs: 50 };
    const s = serveGen([trickle, trickle, trickle]);
    const started = Date.now();
    expect(await fetchCase('trickle', fetcher(), s)).toBe('download_too_slow');
    expect(Date.now() - started).toBeLessThan(3 * (250 + 300) + 1500);
    // The part is kept for a resume.
    expect(existsSync(`${s.final}.part`)).toBe(true);
  });

  it('a trickle ends after maxSlowAttempts requests in a row, however many attempts are left', async () => {
    const trickle: Fault = { kind: 'trickle', after: 1000, everyMs: 50 };
    const s = serveGen(Array(10).fill(trickle));
    expect(await fetchCase('trickle, many attempts', fetcher({ maxAttempts: 10 }), s)).toBe('download_too_slow');
    expect(server.requests.filter((r) => r.path.endsWith(s.file.path))).toHaveLength(2);
    // One slow request between good ones is a dip, not a trickle: the next request resumes.
    const dip = serveGen([trickle, { kind: 'drop', after: 20_000 }, trickle]);
    expect(await fetchCase('a dip', fetcher({ maxAttempts: 10 }), dip)).toBe('ok');
  });

  it('a trickle fast enough for the window still meets the overall deadline', async () => {
    const s = serveGen([{ kind: 'trickle', after: 0, everyMs: 20, bytes: 600 }]);
    const f = fetcher({ deadlineGraceMs: 300, deadlineBytesPerSecond: 100_000, minBytesPerSecond: 1000 });
    expect(await fetchCase('deadline', f, s)).toBe('download_too_slow');
  });

  it('bodies past the registry size: typed at the first byte over, the part deleted', async () => {
    for (const fault of [
      { kind: 'oversize', extra: 1, declared: true },
      { kind: 'oversize', extra: 30_000, declared: false },
      { kind: 'endless' },
      { kind: 'gzipBomb' },
    ] as Fault[]) {
      const s = serveGen([fault]);
      expect([fault, await fetchCase(`too much ${fault.kind}`, fetcher(), s)]).toEqual([fault, 'checksum_mismatch']);
      expect(existsSync(`${s.final}.part`)).toBe(false);
    }
  });

  it('disk full: typed disk_full, the partial deleted; resumes from zero once there is space', async () => {
    for (let i = 0; i < 3; i += 1) {
      const quota = int(0, GEN_SIZE - 1);
      const s = serveGen([]);
      const adapters = node ? nodeAdapters(docs, { diskQuotaBytes: quota }) : blobUtilAdapters(fakeBlobUtil(docs, { diskQuotaBytes: quota }));
      expect(await fetchCase(`disk full at ${quota}`, fetcher({}, adapters), s)).toBe('disk_full');
      expect(existsSync(`${s.final}.part`)).toBe(false);
      expect(await fetchCase('space again', fetcher(), s)).toBe('ok');
    }
  });

  it('too little free space is refused before the first request, the part kept', async () => {
    if (!node) return; // blob-util has no trustworthy free-space figure (see blobUtil.ts).
    const s = serveGen([]);
    const adapters = nodeAdapters(docs);
    const error = await fetcher({}, { ...adapters, fs: { ...adapters.fs, freeBytes: async () => 10 } })
      .fetchFiles([s.file])
      .catch((e: unknown) => e);
    expect((error as ExecutorchError).code).toBe('disk_full');
    expect(server.requests).toHaveLength(0);
  });

  it('planted entries in the cache: no write or delete outside, loops bounded, parts heal', async () => {
    // react-native-blob-util's API follows links (see blobUtil.ts): a link to an existing entry
    // looks like that entry there, so only what it can tell apart is planted: a dangling link
    // (listed by its folder, yet not there), a folder, a FIFO.
    const kinds: Planted[] = node ? ['linkToFile', 'linkToDir', 'loop', 'dangling', 'dir', 'fifo'] : ['dangling', 'dir', 'fifo'];
    const places = node ? PLACES : (['final', 'part', 'verified', 'lock'] as const);
    for (let i = 0; i < 16; i += 1) {
      const s = serveGen([]);
      const place = pick(places);
      const kind = pick(kinds);
      const dirs: Record<(typeof PLACES)[number], string> = {
        owner: join(root(), 'acme'),
        repo: join(root(), REPO),
        revision: join(root(), REPO, REV),
        sub: join(root(), REPO, REV, 'sub'),
        final: s.final,
        part: `${s.final}.part`,
        verified: `${s.final}.verified`,
        lock: `${s.final}.lock`,
      };
      const at = dirs[place];
      // Earlier cases' folders stay: a planted entry replaces what was there.
      await rm(at, { recursive: true, force: true });
      await mkdir(join(at, '..'), { recursive: true });
      if (kind === 'linkToFile') await symlink(join(outside, 'victim.bin'), at);
      if (kind === 'linkToDir') await symlink(join(outside, 'victimDir'), at);
      if (kind === 'loop') await symlink(at, at);
      if (kind === 'dangling') await symlink(join(outside, 'nothing-here'), at);
      if (kind === 'dir') await mkdir(join(at, 'inner'), { recursive: true });
      if (kind === 'fifo') execFileSync('mkfifo', [at]);
      // A loop inside the revision folder as well, for the listing.
      if (node && random() < 0.5) {
        await mkdir(dirs.revision, { recursive: true }).catch(() => {});
        await symlink('.', join(dirs.revision, `loop${i}`)).catch(() => {});
      }
      const f = fetcher();
      const label = `planted ${kind} at ${place}`;
      await fetchCase(label, f, s);
      await runCase(`${label}: list`, () => f.listCachedModels());
      // Deleting through planted links must not reach outside.
      await runCase(`${label}: delete`, () => f.deleteCachedModel({ repo: REPO, revision: REV }));
    }
  });

  it('dangling links named .part, .verified, .lock (or the side file of a range): nothing created at their targets', async () => {
    for (const place of ['part', 'verified', 'lock', 'range', 'final'] as const) {
      const s = serveGen([]);
      const link = { part: '.part', verified: '.verified', lock: '.lock', range: '.part.range.part', final: '' }[place];
      const target = join(outside, `target-of-${place}`);
      await mkdir(join(s.final, '..'), { recursive: true });
      await symlink(target, `${s.final}${link}`);
      // A resume (a part already there) is what writes the side file of a range.
      if (place === 'range') await writeFile(`${s.final}.part`, s.body.subarray(0, 1000));
      expect([place, await fetchCase(`dangling ${place}`, fetcher(), s)]).toEqual([place, 'ok']);
      expect([place, existsSync(target)]).toEqual([place, false]);
      // A second fetch (the .verified mark read back) and a delete leave the outside alone too.
      expect(await fetchCase(`dangling ${place}, again`, fetcher(), s)).toBe('ok');
      expect(await runCase(`dangling ${place}: delete`, () => fetcher().deleteCachedModel({ repo: REPO, revision: REV }))).toBe('ok');
    }
  });

  it('verified files changed in place (size and mtime kept) and forged marks: never returned', async () => {
    for (let i = 0; i < 6; i += 1) {
      const s = serveGen([]);
      expect(await fetchCase('first download', fetcher(), s)).toBe('ok');
      const { mtime } = await stat(s.final);
      const damaged = readFileSync(s.final);
      const at = int(0, GEN_SIZE - 1);
      damaged[at] = damaged[at]! ^ (1 + int(0, 254));
      const mode = pick(['inPlace', 'forgedOld', 'copiedMark'] as const);
      await writeFile(s.final, damaged);
      await utimes(s.final, mtime, mtime);
      const mark = `${s.final}.verified`;
      if (mode === 'forgedOld') {
        await writeFile(mark, JSON.stringify({ size: GEN_SIZE, mtimeMs: mtime.getTime(), sha256: s.file.sha256 }));
      }
      if (mode === 'copiedMark') {
        // The mark of another file with the same size and mtime, sha256 rewritten.
        const other = serveGen([]);
        await fetcher().fetchFiles([other.file]);
        await utimes(other.final, mtime, mtime);
        const saved = JSON.parse(readFileSync(`${other.final}.verified`, 'utf8')) as Record<string, unknown>;
        await writeFile(mark, JSON.stringify({ ...saved, mtimeMs: mtime.getTime(), sha256: s.file.sha256 }));
      }
      // Not a racy mark: it is later than the file.
      await utimes(mark, new Date(mtime.getTime() + 2000), new Date(mtime.getTime() + 2000));
      expect(await fetchCase(`changed ${mode} at ${at}`, fetcher(), s)).toBe('ok');
    }
  });

  it('two fetchers in one process on one cache: one download, both succeed', async () => {
    for (let i = 0; i < 3; i += 1) {
      const s = serveGen([], { chunkSize: 4096, chunkDelayMs: int(2, 8) });
      const [a, b] = [fetcher(), fetcher()];
      const both = Promise.all([a.fetchFiles([s.file]), b.fetchFiles([s.file])]);
      expect(await runCase('two fetchers', () => both, { final: s.final, body: s.body, returned: (v) => (v as string[][]).flat() })).toBe('ok');
      expect(server.requests.filter((r) => r.path.endsWith(s.file.path) && r.range === undefined)).toHaveLength(1);
    }
  });

  it('two processes on one cache: one download, both succeed; a killed owner is taken over', async () => {
    if (!node) return; // The child processes run the Node adapters.
    const s = serveGen([], { chunkSize: 2048, chunkDelayMs: 5 });
    const outputs = await Promise.all([0, 1].map(() => runChild(docs, server.baseUrl, s.file)));
    for (const out of outputs) {
      expect(out).toEqual({ path: s.final });
      expect(readFileSync(s.final).equals(s.body)).toBe(true);
    }
    round2.cases += 2;
    round2.recovered += 2;
    expect(server.requests.filter((r) => r.path.endsWith(s.file.path))).toHaveLength(1);

    // The owner dies holding the lock: the next fetcher takes over once it is stale.
    const t = serveGen([], { chunkSize: 1024, chunkDelayMs: 10 });
    const child = spawnChild(docs, server.baseUrl, t.file);
    for (let i = 0; i < 200 && !existsSync(`${t.final}.part`); i += 1) await new Promise((r) => setTimeout(r, 10));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(await fetchCase('after a killed owner', fetcher(), t)).toBe('ok');
  });

  it('a lock stamped in the future is taken over after lockStaleMs, not waited on until the deadline', async () => {
    for (const ahead of [3_600_000, 400, 60]) {
      const s = serveGen([]);
      const lock = `${s.final}.lock`;
      await mkdir(join(lock, '..'), { recursive: true });
      await writeFile(lock, JSON.stringify({ token: 'dead', pid: 1, at: Date.now() }));
      const future = new Date(Date.now() + ahead);
      await utimes(lock, future, future);
      // The deadline (4 s) would end it as download_too_slow; lockStaleMs is 600 ms.
      expect([ahead, await fetchCase(`lock ${ahead} ms ahead`, fetcher(), s)]).toEqual([ahead, 'ok']);
      // A future lock does not make the model look busy for ever either.
      await writeFile(lock, '{}');
      await utimes(lock, future, future);
      if (ahead > 600) expect(await runCase('delete beside a future lock', () => fetcher().deleteCachedModel({ repo: REPO, revision: REV }))).toBe('ok');
    }
  });

  it('filesystem failures are typed, never raw', async () => {
    const s = serveGen([]);
    const blocked = join(docs, 'a-file');
    await writeFile(blocked, 'not a folder');
    expect(await fetchCase('cache root is a file', fetcher({ cacheDirectory: blocked }), s)).toBe('storage_error');
    expect(await runCase('missing text', () => fetcher().readText(join(docs, 'nope.json')))).toBe('storage_error');
    const fifo = join(docs, 'fifo.json');
    execFileSync('mkfifo', [fifo]);
    if (node) expect(await runCase('FIFO as text', () => fetcher().readText(fifo))).toBe('storage_error');
    const model = publishOn(server, 'acme/local', 'r1');
    const local = { modelPath: fifo, tokenizerPath: fifo, chatTemplatePath: fifo };
    // blob-util's stat cannot tell a FIFO from an empty file: its size is then what is wrong.
    expect(await runCase('FIFO as a local model', () => fetcher().verifyLocalFiles(model, 'xnnpack', local))).toBe(
      node ? 'not_found' : 'checksum_mismatch',
    );
  });
});

/** A child Node process that fetches `file` with the Node adapters (the TypeScript sources, transpiled on load). */
function spawnChild(docs: string, baseUrl: string, file: RemoteFile): ChildProcess {
  const pkg = join(__dirname, '..');
  const script = `
    const ts = require('typescript');
    const fs = require('node:fs');
    require.extensions['.ts'] = (m, filename) => m._compile(ts.transpileModule(fs.readFileSync(filename, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      fileName: filename,
    }).outputText, filename);
    const { ResourceFetcher } = require(${JSON.stringify(join(pkg, 'src/resources/fetcher.ts'))});
    const { nodeAdapters } = require(${JSON.stringify(join(pkg, '__tests__/support/nodeAdapters.ts'))});
    const [docs, baseUrl, file, options] = JSON.parse(process.argv[1]);
    new ResourceFetcher({ ...nodeAdapters(docs), baseUrl, ...options })
      .fetchFiles([file])
      .then(([path]) => console.log(JSON.stringify({ path })), (e) => console.log(JSON.stringify({ code: e.code, message: e.message })));
  `;
  // A cold child process is slow to make its first request: generous timeouts, so that every
  // request the server sees is a download, not a retry.
  const options = { ...GEN, idleTimeoutMs: 5000, minBytesPerSecond: 0 };
  return spawn(process.execPath, ['-e', script, JSON.stringify([docs, baseUrl, file, options])], {
    cwd: pkg,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

function runChild(docs: string, baseUrl: string, file: RemoteFile): Promise<unknown> {
  const child = spawnChild(docs, baseUrl, file);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.once('exit', () => resolve(JSON.parse(out.trim() || 'null'))));
}
