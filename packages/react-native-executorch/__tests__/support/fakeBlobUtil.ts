/**
 * A stand-in for `react-native-blob-util` over Node, reproducing the behaviours the device
 * adapters rely on: `config({ path, overwrite: false })` appends the body to the file, any
 * response body (error pages included) is written, `stateChange` reports status and headers
 * when they arrive (to every task's listener, as the library's event emitter does; events carry
 * the `taskId`), progress reports bytes of this response, `cancel()` aborts, and `fs.*`
 * mirror its filesystem API (`appendFile(path, source, 'uri')` appends another file's bytes,
 * `createFile` refuses an existing path after a check, not atomically; `stat` follows links).
 * `options.diskQuotaBytes` makes writes past that many bytes fail the way Android reports a full
 * disk (an IOException whose message says "No space left on device").
 *
 * `config({ IOSBackgroundTask: true })` reproduces iOS's background download task (blob-util's
 * `NSURLSessionDownloadTask` path): the body goes to a temporary file that is moved to `path`
 * (or, with `overwrite: false`, appended to it) only when the whole body arrived; a dropped or
 * cancelled task leaves nothing at `path`; no `stateChange` fires (`didReceiveResponse` is a
 * data-task callback), so `info()` carries the status alone; progress still comes (`didWriteData`).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { BlobUtilModule } from '../../src';

/**
 * The chunks of `body`, ending with an AbortError as soon as `signal` aborts (Node's fetch can
 * leave a read pending when the signal aborts between the headers and the first chunk).
 */
async function* chunksOf(body: ReadableStream<Uint8Array> | null, signal: AbortSignal): AsyncGenerator<Uint8Array> {
  if (!body) return;
  const reader = body.getReader();
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new DOMException('This operation was aborted', 'AbortError'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => {});
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), aborted]);
      if (done) return;
      yield value;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    reader.cancel().catch(() => {});
  }
}

type StateListener = (state: { taskId: string; status: number; headers: Record<string, string> }) => void;

export function fakeBlobUtil(documentDir: string, options: { diskQuotaBytes?: number } = {}): BlobUtilModule {
  const stateListeners = new Set<StateListener>();
  let tasks = 0;
  let left = options.diskQuotaBytes ?? Infinity;
  const take = (bytes: number, path: string) => {
    if (bytes > left) throw new Error(`ReactNativeBlobUtil: ${path}: write failed: ENOSPC (No space left on device)`);
    left -= bytes;
  };
  return {
    fs: {
      dirs: { DocumentDir: documentDir },
      exists: async (path) => existsSync(path),
      isDir: async (path) => (await fsp.stat(path)).isDirectory(),
      stat: async (path) => {
        const s = await fsp.stat(path);
        return { size: String(s.size), lastModified: Math.floor(s.mtimeMs) };
      },
      mkdir: async (path) => {
        await fsp.mkdir(path, { recursive: true });
      },
      mv: async (from, to) => {
        await fsp.rename(from, to);
        return true;
      },
      unlink: (path) => fsp.rm(path, { recursive: true }),
      ls: (path) => fsp.readdir(path),
      readFile: (path) => fsp.readFile(path, 'utf8'),
      writeFile: async (path, data) => {
        take(Buffer.byteLength(data), path);
        await fsp.writeFile(path, data, 'utf8');
      },
      createFile: async (path, data) => {
        if (existsSync(path)) throw Object.assign(new Error(`File '${path}' already exists`), { code: 'EEXIST' });
        // The library's check and create are two steps; another caller can slip in between.
        await new Promise((resolve) => setTimeout(resolve, 1));
        take(Buffer.byteLength(data), path);
        await fsp.writeFile(path, data, 'utf8');
      },
      appendFile: async (path, source) => {
        const data = await fsp.readFile(source);
        take(data.length, path);
        await fsp.appendFile(path, data);
      },
      slice: async (src, dest, start, end) => {
        const data = (await fsp.readFile(src)).subarray(start, end);
        await fsp.writeFile(dest, data);
      },
      hash: async (path) => createHash('sha256').update(readFileSync(path)).digest('hex'),
    },
    config: ({ path, overwrite, IOSBackgroundTask: background = false }) => ({
      fetch(_method, url, headers) {
        const controller = new AbortController();
        let onProgress: (received: number, total: number) => void = () => {};
        const taskId = `task-${++tasks}`;
        let onState: StateListener | null = null;
        const run = (async () => {
          const response = await fetch(url, { headers, signal: controller.signal });
          const info = { taskId, status: response.status, headers: Object.fromEntries(response.headers) };
          if (!background) stateListeners.forEach((listener) => listener(info));
          // The download task's own file, in the system's temporary folder.
          const into = background ? join(tmpdir(), `CFNetworkDownload_${process.pid}_${taskId}.tmp`) : path;
          const file = await fsp.open(into, !background && !overwrite ? 'a' : 'w');
          let received = 0;
          try {
            for await (const chunk of chunksOf(response.body, controller.signal)) {
              take(chunk.byteLength, into);
              await file.write(chunk);
              received += chunk.byteLength;
              onProgress(received, Number(response.headers.get('content-length') ?? -1));
            }
          } catch (error) {
            if (background) await fsp.rm(into, { force: true });
            throw error;
          } finally {
            await file.close();
          }
          if (!background) return { info: () => info };
          // didFinishDownloadingToURL: moved (or appended) to the path; the response's headers
          // never reach JavaScript.
          if (overwrite) {
            // NSFileManager's checks follow links: a dangling one is not removed, the move then
            // fails on it, and the copy that follows writes through it.
            if (existsSync(path)) await fsp.rm(path, { recursive: true });
            if (await fsp.lstat(path).then(() => true, () => false)) {
              await fsp.writeFile(path, await fsp.readFile(into));
              await fsp.rm(into);
            } else {
              await fsp.rename(into, path);
            }
          } else {
            await fsp.appendFile(path, await fsp.readFile(into));
            await fsp.rm(into);
          }
          return { info: () => ({ status: response.status }) };
        })().finally(() => {
          if (onState) stateListeners.delete(onState);
        });
        const task = {
          then: run.then.bind(run),
          progress(_config: { interval: number }, cb: typeof onProgress) {
            onProgress = cb;
            return task;
          },
          taskId,
          stateChange(cb: StateListener) {
            onState = cb;
            stateListeners.add(cb);
            return task;
          },
          cancel: () => controller.abort(),
        };
        return task as never;
      },
    }),
  };
}
