/**
 * @jest-environment node
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  DownloadControl,
  ExecutorchError,
  ResourceFetcher,
  blobUtilAdapters,
  models,
  type DownloadStatus,
  type LLMDescriptor,
  type RemoteFile,
} from '../src';
import { LLMModule } from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { fakeBlobUtil } from './support/fakeBlobUtil';
import { HfServer, bytes, sha256, type ServedFile } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { publishOn } from './support/publishedModel';

const REPO = 'acme/tiny-llm';
const REV = 'v1';

let server: HfServer;
let docs: string;

function serve(path: string, file: ServedFile, options: { sha?: string; size?: number } = {}): RemoteFile {
  server.add(REPO, REV, path, file);
  return {
    repo: REPO,
    revision: REV,
    path,
    sha256: options.sha ?? sha256(file.body),
    size: options.size ?? file.body.length,
  };
}

function fetcher(maxAttempts = 4): ResourceFetcher {
  return new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl, maxAttempts });
}

async function expectError(promise: Promise<unknown>, code: string): Promise<ExecutorchError> {
  const error = await promise.then(
    (): unknown => {
      throw new Error(`expected ${code}, but it resolved`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ExecutorchError);
  expect((error as ExecutorchError).code).toBe(code);
  return error as ExecutorchError;
}

/** The size of a file once it stops changing (an aborted request may still be flushing). */
async function settledSize(path: string): Promise<number> {
  let last = -1;
  for (;;) {
    const size = (await stat(path)).size;
    if (size === last) return size;
    last = size;
    await new Promise((r) => setTimeout(r, 30));
  }
}

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-fetcher-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

describe('ResourceFetcher over HTTP on 127.0.0.1', () => {
  it('downloads, verifies and caches files with one combined progress value', async () => {
    const model = bytes(300_000, 1);
    const tokenizer = bytes(100_000, 2);
    const files = [
      serve('xnnpack/model.pte', { body: model, chunkSize: 16_384 }),
      serve('tokenizer.json', { body: tokenizer, chunkSize: 16_384 }),
    ];
    const progress: number[] = [];
    const paths = await fetcher().fetchFiles(files, { onProgress: (p) => progress.push(p) });

    expect(paths).toEqual([
      join(docs, 'react-native-executorch/models', REPO, REV, 'xnnpack/model.pte'),
      join(docs, 'react-native-executorch/models', REPO, REV, 'tokenizer.json'),
    ]);
    expect(readFileSync(paths[0]!).equals(model)).toBe(true);
    expect(readFileSync(paths[1]!).equals(tokenizer)).toBe(true);
    expect(existsSync(`${paths[0]}.part`)).toBe(false);
    // Monotonic, 0..1, with intermediate values, ending at exactly 1.
    expect(progress[0]).toBe(0);
    expect(progress[progress.length - 1]).toBe(1);
    expect(progress.length).toBeGreaterThan(5);
    expect(progress.every((p, i) => i === 0 || p >= progress[i - 1]!)).toBe(true);
    expect(server.requests.map((r) => r.status)).toEqual([200, 200]);

    // Cached: no request at all; progress counts cached files as done, file by file.
    const again: number[] = [];
    expect(await fetcher().fetchFiles(files, { onProgress: (p) => again.push(p) })).toEqual(paths);
    expect(server.requests).toHaveLength(2);
    // Files are checked in parallel: the 300 kB one (0.75) or the 100 kB one (0.25) first.
    expect(again).toHaveLength(2);
    expect([0.25, 0.75]).toContain(again[0]);
    expect(again[1]).toBe(1);
  });

  it('resumes with an HTTP Range request when the connection drops mid-file', async () => {
    const body = bytes(200_000, 3);
    const file = serve('model.pte', { body, dropAfter: 80_000, dropTimes: 2, chunkSize: 8192 });
    const [path] = await fetcher().fetchFiles([file]);

    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests).toHaveLength(3);
    expect(server.requests[0]).toMatchObject({ range: undefined, status: 200 });
    // Each retry asks for exactly what is missing.
    const first = Number(/bytes=(\d+)-/.exec(server.requests[1]!.range ?? '')?.[1]);
    const second = Number(/bytes=(\d+)-/.exec(server.requests[2]!.range ?? '')?.[1]);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(80_000);
    expect(second).toBeGreaterThan(first);
    expect(server.requests.slice(1).map((r) => r.status)).toEqual([206, 206]);
  });

  it('reports download_failed when the connection keeps dropping, keeping the part', async () => {
    const body = bytes(100_000, 4);
    const file = serve('model.pte', { body, dropAfter: 10_000, dropTimes: 99, chunkSize: 5000 });
    const error = await expectError(fetcher(2).fetchFiles([file]), 'download_failed');
    expect(error.message).toContain('failed 2 times');
    const path = join(docs, 'react-native-executorch/models', REPO, REV, 'model.pte');
    expect(existsSync(path)).toBe(false);
    expect((await stat(`${path}.part`)).size).toBeGreaterThan(0);
  });

  it('restarts from zero when the server ignores Range', async () => {
    const body = bytes(50_000, 5);
    const file = serve('model.pte', { body, dropAfter: 20_000, ignoreRange: true, chunkSize: 5000 });
    const [path] = await fetcher().fetchFiles([file]);
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests[1]!.range).toMatch(/^bytes=\d+-$/);
    expect(server.requests[1]!.status).toBe(200);
  });

  it('rejects a file whose sha256 differs from the registry and removes it', async () => {
    const body = bytes(30_000, 6);
    const file = serve('model.pte', { body }, { sha: sha256(bytes(30_000, 7)) });
    const error = await expectError(fetcher().fetchFiles([file]), 'checksum_mismatch');
    expect(error.message).toContain(`its sha256 is ${sha256(body)}`);
    const path = join(docs, 'react-native-executorch/models', REPO, REV, 'model.pte');
    expect(existsSync(path)).toBe(false);
    expect(existsSync(`${path}.part`)).toBe(false);
  });

  it('rejects a file whose size differs from the registry and removes it', async () => {
    const body = bytes(30_000, 8);
    const file = serve('model.pte', { body }, { size: 29_000 });
    const error = await expectError(fetcher().fetchFiles([file]), 'checksum_mismatch');
    expect(error.message).toContain('size');
    expect(existsSync(join(docs, 'react-native-executorch/models', REPO, REV, 'model.pte.part'))).toBe(false);
  });

  it('reports a 404 as download_failed with the status and writes nothing', async () => {
    const missing: RemoteFile = { repo: REPO, revision: REV, path: 'nope.pte', sha256: '0'.repeat(64), size: 10 };
    const error = await expectError(fetcher().fetchFiles([missing]), 'download_failed');
    expect(error.details.status).toBe(404);
    expect(error.details.url).toBe(`${server.baseUrl}/${REPO}/resolve/${REV}/nope.pte`);
    expect(server.requests).toHaveLength(1);
    const dir = join(docs, 'react-native-executorch/models', REPO, REV);
    expect(existsSync(join(dir, 'nope.pte'))).toBe(false);
    expect(existsSync(join(dir, 'nope.pte.part'))).toBe(false);
  });

  it('cancels a download, keeps the part, and resumes it on the next fetch', async () => {
    const body = bytes(400_000, 9);
    const file = serve('model.pte', { body, chunkSize: 10_000, chunkDelayMs: 5 });
    const controller = new AbortController();
    const seen: number[] = [];
    const pending = fetcher().fetchFiles([file], {
      signal: controller.signal,
      onProgress: (p) => {
        seen.push(p);
        if (p >= 0.2) controller.abort();
      },
    });
    await expectError(pending, 'download_cancelled');
    const path = join(docs, 'react-native-executorch/models', REPO, REV, 'model.pte');
    expect(existsSync(path)).toBe(false);
    const partSize = await settledSize(`${path}.part`);
    expect(partSize).toBeGreaterThan(0);
    expect(partSize).toBeLessThan(body.length);

    const [done] = await fetcher().fetchFiles([file]);
    expect(readFileSync(done!).equals(body)).toBe(true);
    expect(server.requests[1]!.range).toBe(`bytes=${partSize}-`);
  });

  it('a suspended app (its thread not running) is not a stalled, slow or late download', async () => {
    // iOS suspends an app in the background while its transfer goes on; on return every timer
    // is overdue at once. Here the thread blocks for 2.5 s mid-download, past the idle timeout,
    // the rate window and the whole deadline: the one request goes on and the file arrives.
    const body = bytes(300_000, 12);
    const file = serve('model.pte', { body, chunkSize: 10_000, chunkDelayMs: 10 });
    const watched = new ResourceFetcher({
      ...nodeAdapters(docs),
      baseUrl: server.baseUrl,
      idleTimeoutMs: 300,
      minBytesPerSecond: 50_000,
      rateWindowMs: 400,
      deadlineGraceMs: 1500,
      deadlineBytesPerSecond: 1e12,
    });
    let suspended = false;
    const [path] = await watched.fetchFiles([file], {
      onProgress: (p) => {
        if (suspended || p < 0.3) return;
        suspended = true;
        const until = Date.now() + 2500;
        while (Date.now() < until) {
          // The thread does not run, as in a suspended app.
        }
      },
    });
    expect(suspended).toBe(true);
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests).toHaveLength(1);
  });

  it('a fetch right after a cancel waits for the cancelled download, then resumes it', async () => {
    const body = bytes(400_000, 14);
    const file = serve('model.pte', { body, chunkSize: 10_000, chunkDelayMs: 5 });
    const f = fetcher();
    const controller = new AbortController();
    const pending = f.fetchFiles([file], {
      signal: controller.signal,
      onProgress: (p) => p >= 0.2 && controller.abort(),
    });
    await expectError(pending, 'download_cancelled');
    // Same fetcher, at once: it must neither inherit the cancellation nor write concurrently.
    const [done] = await f.fetchFiles([file]);
    expect(readFileSync(done!).equals(body)).toBe(true);
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]!.range).toMatch(/^bytes=[1-9]\d*-$/);
  });

  it('refuses an already aborted signal without touching the network', async () => {
    const file = serve('model.pte', { body: bytes(1000, 10) });
    const controller = new AbortController();
    controller.abort();
    await expectError(fetcher().fetchFiles([file], { signal: controller.signal }), 'download_cancelled');
    expect(server.requests).toHaveLength(0);
  });

  it('shares one download between concurrent requests for the same file', async () => {
    const body = bytes(200_000, 11);
    const file = serve('model.pte', { body, chunkSize: 20_000, chunkDelayMs: 2 });
    const f = fetcher();
    const [a, b] = await Promise.all([f.fetchFiles([file]), f.fetchFiles([file])]);
    expect(a).toEqual(b);
    expect(server.requests).toHaveLength(1);
    expect(readFileSync(a[0]!).equals(body)).toBe(true);
  });

  it('keeps a shared download going when only one of its requesters cancels', async () => {
    const body = bytes(200_000, 12);
    const file = serve('model.pte', { body, chunkSize: 20_000, chunkDelayMs: 5 });
    const f = fetcher();
    const controller = new AbortController();
    const cancelled = f.fetchFiles([file], { signal: controller.signal });
    const kept = f.fetchFiles([file]);
    setTimeout(() => controller.abort(), 10);
    await expectError(cancelled, 'download_cancelled');
    const [path] = await kept;
    expect(readFileSync(path!).equals(body)).toBe(true);
    expect(server.requests).toHaveLength(1);
  });
});

describe('ResourceFetcher with registry models', () => {
  function publishedModel(): LLMDescriptor<'xnnpack'> {
    const pte = bytes(64_000, 13);
    const tokenizer = Buffer.from('{"model": {"type": "BPE"}}');
    const config = Buffer.from('{"chat_template": "{{ messages[0].content }}"}');
    const repo = 'acme/published';
    for (const [path, body] of [
      ['xnnpack/m.pte', pte],
      ['tokenizer.json', tokenizer],
      ['tokenizer_config.json', config],
    ] as const) {
      server.add(repo, 'r1', path, { body });
    }
    const pub = (path: string, body: Buffer) => ({ path, sha256: sha256(body), size: body.length });
    return {
      ...models.llm.smollm2_135m,
      id: 'acme_published',
      hf: { repo, revision: 'r1' },
      tokenizer: {
        status: 'published',
        chatTemplate: 'tokenizer_config.json',
        files: [pub('tokenizer.json', tokenizer), pub('tokenizer_config.json', config)],
      },
      variants: {
        xnnpack: {
          ...models.llm.smollm2_135m.variants.xnnpack,
          status: 'published',
          files: [pub('xnnpack/m.pte', pte)],
        },
      },
    };
  }

  it('refuses to download an unpublished registry variant with a typed error', async () => {
    const error = await expectError(
      fetcher().fetchModel(models.llm.smollm2_135m, 'xnnpack'),
      'model_unpublished',
    );
    expect(error.message).toContain('SmolLM2 135M Instruct');
    expect(error.message).toContain('xnnpack/smollm2_135m_xnnpack_8w.pte');
    await expectError(fetcher().fetchModel(models.llm.gemma4_e2b, 'vulkan'), 'model_unpublished');
    expect(server.requests).toHaveLength(0);
  });

  it('fetches a published model, lists it in the cache and deletes it', async () => {
    const model = publishedModel();
    const f = fetcher();
    const files = await f.fetchModel(model, 'xnnpack');
    const root = join(docs, 'react-native-executorch/models/acme/published/r1');
    expect(files).toEqual({
      modelPath: join(root, 'xnnpack/m.pte'),
      tokenizerPath: join(root, 'tokenizer.json'),
      chatTemplatePath: join(root, 'tokenizer_config.json'),
    });
    expect(await f.readText(files.chatTemplatePath)).toContain('chat_template');

    const cached = await f.listCachedModels();
    expect(cached).toEqual([
      {
        repo: 'acme/published',
        revision: 'r1',
        files: [
          { path: 'tokenizer.json', size: 26 },
          { path: 'tokenizer_config.json', size: 46 },
          { path: 'xnnpack/m.pte', size: 64_000 },
        ],
        sizeBytes: 64_000 + 26 + 46,
      },
    ]);
    await f.deleteCachedModel(model);
    expect(await f.listCachedModels()).toEqual([]);
    expect(existsSync(root)).toBe(false);
  });

  it('names the shipped backends when asked for one the model does not ship', async () => {
    const error = await expectError(
      fetcher().fetchModel(models.llm.smollm2_135m, 'vulkan'),
      'backend_unavailable',
    );
    expect(error.details.alternatives).toEqual(['xnnpack']);
  });
});

describe.each([
  ['node', (dir: string) => nodeAdapters(dir)],
  ['react-native-blob-util', (dir: string) => blobUtilAdapters(fakeBlobUtil(dir))],
])('pausing and resuming a download on 127.0.0.1, %s adapters', (_name, adapters) => {
  const make = () => new ResourceFetcher({ ...adapters(docs), baseUrl: server.baseUrl });
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Waits for `condition`, failing (not hanging) when it does not come within 10 s. */
  const until = async (condition: () => boolean, what: string) => {
    for (const started = Date.now(); !condition(); await wait(10)) {
      if (Date.now() - started > 10_000) throw new Error(`timed out waiting for ${what}`);
    }
  };

  it('keeps the part and the progress while paused, resumes with Range, reports rate and time left', async () => {
    const body = bytes(600_000, 21);
    const file = serve('model.pte', { body, chunkSize: 10_000, chunkDelayMs: 10 });
    const control = new DownloadControl();
    const progress: number[] = [];
    const statuses: DownloadStatus[] = [];
    let settled = false;
    const pending = make().fetchFiles([file], {
      control,
      onProgress: (p) => {
        progress.push(p);
        if (p >= 0.25 && !control.paused && statuses.every((s) => !s.paused)) control.pause();
      },
      onStatus: (s) => statuses.push(s),
    });
    void pending.finally(() => (settled = true));
    await until(() => statuses.some((s) => s.paused), 'the pause');
    const path = join(docs, 'react-native-executorch/models', REPO, REV, 'model.pte');
    const partSize = await settledSize(`${path}.part`);
    const reportsAtPause = progress.length;
    // Paused: still pending, the part unchanged, no new progress, no request.
    await wait(300);
    expect(settled).toBe(false);
    expect((await stat(`${path}.part`)).size).toBe(partSize);
    expect(progress.length).toBe(reportsAtPause);
    expect(server.requests).toHaveLength(1);
    const paused = statuses.find((s) => s.paused)!;
    expect(paused).toMatchObject({ bytesPerSecond: 0, secondsLeft: null, bytesTotal: body.length });
    expect(paused.bytesDone).toBeLessThanOrEqual(partSize);
    // While it ran: a rate and the time left at that rate.
    const running = statuses.filter((s) => !s.paused && s.bytesPerSecond > 0);
    expect(running.length).toBeGreaterThan(0);
    for (const s of running) expect(s.secondsLeft).toBeCloseTo((s.bytesTotal - s.bytesDone) / s.bytesPerSecond, 6);

    control.resume();
    const [done] = await pending;
    expect(readFileSync(done!).equals(body)).toBe(true);
    expect(server.requests.map((r) => r.range)).toEqual([undefined, `bytes=${partSize}-`]);
    // Progress never went back, and ended at 1.
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    expect(progress[progress.length - 1]).toBe(1);
    const after = statuses.slice(statuses.indexOf(paused) + 1);
    expect(after[0]).toMatchObject({ paused: false, progress: paused.progress });
    expect(after[after.length - 1]).toMatchObject({ progress: 1, bytesDone: body.length, secondsLeft: 0 });
  });

  it('paused before it starts: no request until resumed; cancelled while paused: download_cancelled', async () => {
    const body = bytes(200_000, 22);
    const file = serve('model.pte', { body, chunkSize: 10_000, chunkDelayMs: 5 });
    const control = new DownloadControl();
    control.pause();
    const first = make().fetchFiles([file], { control });
    await wait(200);
    expect(server.requests).toHaveLength(0);
    control.resume();
    expect(readFileSync((await first)[0]!).equals(body)).toBe(true);

    const other = serve('other.pte', { body, chunkSize: 10_000, chunkDelayMs: 10 });
    const abort = new AbortController();
    const again = new DownloadControl();
    const pending = make().fetchFiles([other], {
      control: again,
      signal: abort.signal,
      onProgress: (p) => p > 0.2 && again.pause(),
    });
    await until(() => server.requests.length >= 2, 'the second request');
    await wait(100);
    abort.abort();
    await expectError(pending, 'download_cancelled');
    const part = join(docs, 'react-native-executorch/models', REPO, REV, 'other.pte.part');
    expect(await settledSize(part)).toBeGreaterThan(0);
  });
});

describe('LLMModule.load with a DownloadControl', () => {
  it('pauses and resumes the model download; the load resolves after the resume', async () => {
    const model = publishOn(server);
    const control = new DownloadControl();
    const statuses: DownloadStatus[] = [];
    const llm = new LLMModule({
      model,
      resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
      native: new FakeNative({ answer: () => ['Hi.'] }),
    });
    let loaded = false;
    const loading = llm
      .load({
        download: control,
        onDownloadStatus: (s) => statuses.push(s),
        onDownloadProgress: (p) => p >= 0.3 && !statuses.some((s) => s.paused) && control.pause(),
      })
      .then(() => (loaded = true));
    for (const started = Date.now(); !statuses.some((s) => s.paused); await new Promise((r) => setTimeout(r, 10))) {
      if (Date.now() - started > 10_000) throw new Error('never paused');
    }
    const requests = server.requests.length;
    await new Promise((r) => setTimeout(r, 300));
    expect([loaded, llm.isReady, server.requests.length]).toEqual([false, false, requests]);
    control.resume();
    await loading;
    expect(llm.isReady).toBe(true);
    expect(statuses[statuses.length - 1]).toMatchObject({ progress: 1, paused: false });
    // The paused file resumed from its part.
    expect(server.requests.some((r) => r.range !== undefined)).toBe(true);
  });
});

describe('LLMModule.load and the memory check', () => {
  it('asks the native side before downloading; a refusal fetches nothing', async () => {
    const model = publishOn(server);
    const peak = model.variants.xnnpack.peakMemoryBytes!;
    const native = new FakeNative({ availableMemoryBytes: peak - 1 });
    const llm = new LLMModule({
      model,
      resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
      native,
    });
    await expectError(llm.load(), 'insufficient_memory');
    expect(native.calls).toEqual(['checkMemory']);
    expect(server.requests).toHaveLength(0);

    const fits = new FakeNative({ availableMemoryBytes: peak, answer: () => ['Hi.'] });
    const ok = new LLMModule({
      model,
      resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
      native: fits,
    });
    await ok.load();
    expect(fits.calls).toEqual(['checkMemory', 'loadLLM']);
    expect(fits.loads[0]!.peakMemoryBytes).toBe(peak);
    ok.release();
  });
});
