/**
 * @jest-environment node
 *
 * The blob-util adapters' iOS background transfer (`background: true`) over the Node stand-in
 * of the library, whose `IOSBackgroundTask` reproduces a download task: the body lands at its
 * path only once complete, a failed task leaves nothing, no headers reach JavaScript. Real HTTP
 * on 127.0.0.1.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { DownloadControl, ExecutorchError, ResourceFetcher, blobUtilAdapters, type RemoteFile } from '../src';
import { fakeBlobUtil } from './support/fakeBlobUtil';
import { HfServer, bytes, sha256, type ServedFile } from './support/hfServer';

/** Small segments so a 100 kB file takes several; the overlap is a sixteenth: 1024 bytes. */
const SEGMENT = 16_384;
const OVERLAP = 1024;

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-blob-bg-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

function fetcher(options: { diskQuotaBytes?: number; maxAttempts?: number } = {}): ResourceFetcher {
  const adapters = blobUtilAdapters(fakeBlobUtil(docs, { diskQuotaBytes: options.diskQuotaBytes }), {
    background: true,
    segmentBytes: SEGMENT,
  });
  return new ResourceFetcher({ ...adapters, baseUrl: server.baseUrl, retryDelayMs: 10, maxAttempts: options.maxAttempts });
}

function serve(path: string, file: ServedFile, size = file.body.length): RemoteFile {
  server.add('acme/m', 'r', path, file);
  return { repo: 'acme/m', revision: 'r', path, sha256: sha256(file.body), size };
}

const dir = () => join(docs, 'react-native-executorch/models/acme/m/r');

/** The closed ranges the adapter asks for to fill a `size`-byte file from `offset`. */
function ranges(size: number, offset = 0): string[] {
  const out: string[] = [];
  for (let at = offset; at < size; at += SEGMENT) {
    const from = at - Math.min(at, OVERLAP);
    out.push(`bytes=${from}-${Math.min(at + SEGMENT, size) - 1}`);
  }
  return out;
}

async function expectError(promise: Promise<unknown>, code: string): Promise<ExecutorchError> {
  const error = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ExecutorchError);
  expect((error as ExecutorchError).code).toBe(code);
  return error as ExecutorchError;
}

/** Nothing but these files in the model's folder (marks and locks aside): no side file left. */
async function expectOnly(names: string[]): Promise<void> {
  const left = existsSync(dir()) ? (await readdir(dir())).filter((n) => !/\.(verified|lock)$/.test(n)) : [];
  expect(left.sort()).toEqual(names.sort());
}

describe('react-native-blob-util adapters, iOS background transfer', () => {
  it('downloads in closed-range segments, each checked against the part before it is appended', async () => {
    const body = bytes(100_000, 41);
    const file = serve('m.pte', { body, chunkSize: 4096 });
    const progress: number[] = [];
    const [path] = await fetcher().fetchFiles([file], { onProgress: (p) => progress.push(p) });
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests.map((r) => [r.range, r.status])).toEqual(ranges(100_000).map((r) => [r, 206]));
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    expect(progress[progress.length - 1]).toBe(1);
    await expectOnly(['m.pte']);
  });

  it('a drop inside a segment loses only that segment: resumed from the last whole one', async () => {
    const body = bytes(100_000, 42);
    const file = serve('m.pte', { body, chunkSize: 2048, faults: [undefined, undefined, { kind: 'drop', after: 9000 }] });
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    const all = ranges(100_000);
    // The third range dropped after 9000 bytes: none of them kept, the same range asked again.
    expect(server.requests.map((r) => r.range)).toEqual([...all.slice(0, 3), ...all.slice(2)]);
    await expectOnly(['m.pte']);
  });

  it('resumes a part an earlier launch left, from its last byte', async () => {
    const body = bytes(60_000, 43);
    const file = serve('m.pte', { body });
    await mkdir(dir(), { recursive: true });
    await writeFile(join(dir(), 'm.pte.part'), body.subarray(0, 20_000));
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests.map((r) => r.range)).toEqual(ranges(60_000, 20_000));
  });

  it('pauses (the part holds whole segments only) and resumes from the part', async () => {
    const body = bytes(120_000, 44);
    const file = serve('m.pte', { body, chunkSize: 2048, chunkDelayMs: 5 });
    const control = new DownloadControl();
    const progress: number[] = [];
    let pausedAt = -1;
    const pending = fetcher().fetchFiles([file], {
      control,
      onProgress: (p) => {
        progress.push(p);
        if (p >= 0.4 && pausedAt < 0) {
          pausedAt = p;
          control.pause();
        }
      },
    });
    for (const started = Date.now(); !control.paused || server.requests.length === 0; ) {
      if (Date.now() - started > 10_000) throw new Error('never paused');
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 300));
    const part = join(dir(), 'm.pte.part');
    const kept = (await stat(part)).size;
    // The segment in flight was cancelled and left nothing: the part ends on a segment.
    expect(kept % SEGMENT).toBe(0);
    expect(kept).toBeGreaterThan(0);
    await expectOnly(['m.pte.part']);
    const requests = server.requests.length;
    await new Promise((r) => setTimeout(r, 200));
    expect(server.requests).toHaveLength(requests);
    control.resume();
    const [path] = await pending;
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests.slice(requests).map((r) => r.range)).toEqual(ranges(120_000, kept));
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
  });

  it('keeps no error page: a 404 fails with nothing left, a 503 is retried', async () => {
    const missing: RemoteFile = { repo: 'acme/m', revision: 'r', path: 'missing.pte', sha256: sha256(Buffer.from('x')), size: 1 };
    const error = await expectError(fetcher().fetchFiles([missing]), 'download_failed');
    expect(error.details.status).toBe(404);
    await expectOnly([]);

    const body = bytes(40_000, 45);
    const file = serve('m.pte', { body, faults: [undefined, { kind: 'status', status: 503 }] });
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    const after = server.requests.filter((r) => r.path.endsWith('m.pte'));
    expect(after.map((r) => r.status)).toEqual([206, 503, 206, 206]);
    await expectOnly(['m.pte']);
  });

  it('takes a 200 (ranges ignored) as the whole file, in place of the part', async () => {
    const body = bytes(50_000, 46);
    const file = serve('m.pte', { body, ignoreRange: true, faults: [{ kind: 'drop', after: 20_000 }] });
    await mkdir(dir(), { recursive: true });
    await writeFile(join(dir(), 'm.pte.part'), body.subarray(0, 7000));
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    // The first 200 dropped and kept nothing (the part still 7000 bytes); the second replaced it.
    expect(server.requests.map((r) => [r.range, r.status])).toEqual([
      [`bytes=${7000 - OVERLAP}-${7000 + SEGMENT - 1}`, 200],
      [`bytes=${7000 - OVERLAP}-${7000 + SEGMENT - 1}`, 200],
    ]);
    await expectOnly(['m.pte']);
  });

  it('refuses a 206 from the wrong place (no Content-Range to read): nothing of it is appended', async () => {
    const body = bytes(60_000, 47);
    const file = serve('m.pte', { body, faults: [undefined, { kind: 'wrongRange' }] });
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    const all = ranges(60_000);
    // Refused and asked again; appended, the wrong bytes would have failed the checksum and
    // sent the fetcher back to byte 0.
    expect(server.requests.map((r) => r.range)).toEqual([all[0], all[1], ...all.slice(1)]);
    await expectOnly(['m.pte']);
  });

  it('never lets the part pass the registry size: a declared, an undeclared and an endless body', async () => {
    const body = bytes(30_000, 48);
    for (const fault of [
      { kind: 'oversize', extra: 5000, declared: true },
      { kind: 'oversize', extra: 5000, declared: false },
      { kind: 'endless' },
    ] as const) {
      const file = serve(`${fault.kind}-${'declared' in fault && fault.declared}.pte`, { body, faults: [fault] });
      await expectError(fetcher().fetchFiles([file]), 'checksum_mismatch');
    }
    await expectOnly([]);
  });

  it('a full disk fails with disk_full and leaves no part', async () => {
    const body = bytes(100_000, 49);
    const file = serve('m.pte', { body });
    await expectError(fetcher({ diskQuotaBytes: 40_000 }).fetchFiles([file]), 'disk_full');
    await expectOnly([]);
  });

  it('removes a link planted where a range is written instead of writing through it', async () => {
    const body = bytes(40_000, 50);
    const file = serve('m.pte', { body });
    await mkdir(dir(), { recursive: true });
    await writeFile(join(dir(), 'm.pte.part'), body.subarray(0, 10_000));
    const outside = join(docs, 'outside');
    await symlink(outside, join(dir(), 'm.pte.part.range.part'));
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(existsSync(outside)).toBe(false);
  });

  it('refuses a segment size that is not a positive whole number', () => {
    for (const segmentBytes of [0, -1, 1.5, Number.NaN]) {
      expect(() => blobUtilAdapters(fakeBlobUtil(docs), { background: true, segmentBytes })).toThrow(/segmentBytes/);
    }
  });
});
