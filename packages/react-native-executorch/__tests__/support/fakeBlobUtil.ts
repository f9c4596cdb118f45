/**
 * A stand-in for `react-native-blob-util` over Node, reproducing the behaviours the device
 * adapters rely on: `config({ path, overwrite: false })` appends the body to the file, any
 * response body (error pages included) is written, `stateChange` reports status and headers
 * when they arrive (to every task's listener, as the library's event emitter does; events carry
 * the `taskId`), progress reports bytes of this response, `cancel()` aborts, and `fs.*`
 * mirror its filesystem API (`appendFile(path, source, 'uri')` appends another file's bytes).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';

import type { BlobUtilModule } from '../../src';

type StateListener = (state: { taskId: string; status: number; headers: Record<string, string> }) => void;

export function fakeBlobUtil(documentDir: string): BlobUtilModule {
  const stateListeners = new Set<StateListener>();
  let tasks = 0;
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
      writeFile: (path, data) => fsp.writeFile(path, data, 'utf8'),
      appendFile: async (path, source) => fsp.appendFile(path, await fsp.readFile(source)),
      hash: async (path) => createHash('sha256').update(readFileSync(path)).digest('hex'),
    },
    config: ({ path, overwrite }) => ({
      fetch(_method, url, headers) {
        const controller = new AbortController();
        let onProgress: (received: number, total: number) => void = () => {};
        const taskId = `task-${++tasks}`;
        let onState: StateListener | null = null;
        const run = (async () => {
          const response = await fetch(url, { headers, signal: controller.signal });
          const info = { taskId, status: response.status, headers: Object.fromEntries(response.headers) };
          stateListeners.forEach((listener) => listener(info));
          const file = await fsp.open(path, overwrite ? 'w' : 'a');
          let received = 0;
          try {
            for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
              await file.write(chunk);
              received += chunk.byteLength;
              onProgress(received, Number(response.headers.get('content-length') ?? -1));
            }
          } finally {
            await file.close();
          }
          return { info: () => info };
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
