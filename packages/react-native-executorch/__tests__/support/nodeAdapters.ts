/** The fetcher's adapters on Node: `node:fs` and the global `fetch` (what the tests run on). */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';

import type { FileSystemAdapter, HttpAdapter, ResourceAdapters } from '../../src';

export function nodeFileSystem(documentDirectory: string): FileSystemAdapter {
  return {
    documentDirectory,
    async stat(path) {
      try {
        const s = await fsp.stat(path);
        return { size: s.size, isDirectory: s.isDirectory(), mtimeMs: s.mtimeMs };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
    },
    mkdir: async (path) => {
      await fsp.mkdir(path, { recursive: true });
    },
    rename: (from, to) => fsp.rename(from, to),
    remove: (path) => fsp.rm(path, { recursive: true, force: true }),
    readDir: (path) => fsp.readdir(path),
    readText: (path) => fsp.readFile(path, 'utf8'),
    writeText: (path, text) => fsp.writeFile(path, text, 'utf8'),
    sha256: (path) =>
      new Promise((resolve, reject) => {
        const hash = createHash('sha256');
        createReadStream(path)
          .on('data', (chunk) => hash.update(chunk))
          .on('error', reject)
          .on('end', () => resolve(hash.digest('hex')));
      }),
  };
}

export const nodeHttp: HttpAdapter = {
  async download({ url, destination, offset, signal, onProgress }) {
    const headers: Record<string, string> = offset > 0 ? { Range: `bytes=${offset}-` } : {};
    const response = await fetch(url, { headers, signal });
    if (response.status !== 200 && response.status !== 206) {
      await response.body?.cancel();
      return { status: response.status, retryAfter: response.headers.get('retry-after') ?? undefined };
    }
    const append = response.status === 206;
    const contentRange = response.headers.get('content-range') ?? '';
    if (append && Number(/^bytes (\d+)-/.exec(contentRange)?.[1]) !== offset) {
      await response.body?.cancel();
      throw new Error(`Asked for bytes from ${offset}, the server answered Content-Range "${contentRange}".`);
    }
    const file = await fsp.open(destination, append ? 'a' : 'w');
    let size = append ? offset : 0;
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        await file.write(chunk);
        size += chunk.byteLength;
        onProgress(size);
      }
    } finally {
      await file.close();
    }
    return { status: response.status };
  },
};

export function nodeAdapters(documentDirectory: string): ResourceAdapters {
  return { fs: nodeFileSystem(documentDirectory), http: nodeHttp };
}
