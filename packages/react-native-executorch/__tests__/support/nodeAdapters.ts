/** The fetcher's adapters on Node: `node:fs` and the global `fetch` (what the tests run on). */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import * as fsp from 'node:fs/promises';

import { bodyTooLargeError } from '../../src/resources/adapters';
import type { FileSystemAdapter, HttpAdapter, ResourceAdapters } from '../../src';

const { O_APPEND, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_TRUNC, O_WRONLY } = constants;

/** Fault injection: how many more bytes the "disk" takes before writes fail with ENOSPC. */
export interface DiskQuota {
  left: number;
}

/** The error the kernel's ENOSPC becomes in Node. */
function enospc(syscall: string, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOSPC: no space left on device, ${syscall} '${path}'`), {
    code: 'ENOSPC',
    errno: -28,
    syscall,
    path,
  });
}

function take(quota: DiskQuota | undefined, bytes: number, path: string): void {
  if (!quota) return;
  if (bytes > quota.left) throw enospc('write', path);
  quota.left -= bytes;
}

/**
 * Opens a regular file without blocking or following a link at `path` (O_NOFOLLOW fails with
 * ELOOP on one, O_NONBLOCK makes a FIFO fail instead of waiting for a peer), then checks on the
 * descriptor that it is a regular file: what was checked is what is used.
 */
async function openRegular(path: string, flags: number, follow = false): Promise<fsp.FileHandle> {
  const file = await fsp.open(path, flags | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW), 0o644);
  if (!(await file.stat()).isFile()) {
    await file.close();
    throw Object.assign(new Error(`EINVAL: not a regular file, open '${path}'`), { code: 'EINVAL', path });
  }
  return file;
}

function hashOf(file: fsp.FileHandle, start?: number, end?: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    file
      .createReadStream({ start, end, autoClose: false })
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolve(hash.digest('hex')));
  });
}

/** `quota`: see {@link DiskQuota}; free space (`freeBytes`) stays the real disk's, as when another app fills it. */
export function nodeFileSystem(documentDirectory: string, quota?: DiskQuota): FileSystemAdapter {
  return {
    documentDirectory,
    async stat(path) {
      try {
        const s = await fsp.lstat(path);
        const type = s.isFile() ? 'file' : s.isDirectory() ? 'directory' : s.isSymbolicLink() ? 'link' : 'other';
        return {
          size: s.size,
          isDirectory: s.isDirectory(),
          mtimeMs: s.mtimeMs,
          type,
          identity: `${s.dev}:${s.ino}:${s.ctimeMs}`,
        };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
    },
    mkdir: async (path) => {
      await fsp.mkdir(path, { recursive: true });
    },
    rename: (from, to) => fsp.rename(from, to),
    // fs.rm lstat()s every entry: a link is unlinked, never followed.
    remove: (path) => fsp.rm(path, { recursive: true, force: true }),
    readDir: (path) => fsp.readdir(path),
    async readText(path) {
      // The caller's own files (a chat template) may be links; a FIFO must not block.
      const file = await openRegular(path, O_RDONLY, true);
      try {
        return await file.readFile('utf8');
      } finally {
        await file.close();
      }
    },
    async writeText(path, text) {
      take(quota, Buffer.byteLength(text), path);
      const file = await openRegular(path, O_WRONLY | O_CREAT | O_TRUNC);
      try {
        await file.writeFile(text, 'utf8');
      } finally {
        await file.close();
      }
    },
    async sha256(path) {
      const file = await openRegular(path, O_RDONLY, true);
      try {
        return await hashOf(file);
      } finally {
        await file.close();
      }
    },
    async sha256Range(path, start, end) {
      const file = await openRegular(path, O_RDONLY, true);
      try {
        return end > start ? await hashOf(file, start, end - 1) : createHash('sha256').digest('hex');
      } finally {
        await file.close();
      }
    },
    async createExclusive(path, text) {
      take(quota, Buffer.byteLength(text), path);
      let file: fsp.FileHandle;
      try {
        file = await fsp.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
        throw error;
      }
      try {
        await file.writeFile(text, 'utf8');
      } finally {
        await file.close();
      }
      return true;
    },
    realpath: (path) => fsp.realpath(path),
    async freeBytes(path) {
      const s = await fsp.statfs(path);
      return s.bavail * s.bsize;
    },
  };
}

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

export function nodeHttp(quota?: DiskQuota): HttpAdapter {
  return {
    async download({ url, destination, offset, maxBytes, signal, onProgress }) {
      const headers: Record<string, string> = { 'accept-encoding': 'identity' };
      if (offset > 0) headers.Range = `bytes=${offset}-`;
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
      let size = append ? offset : 0;
      const limit = maxBytes ?? Infinity;
      // A declared length past the limit fails before a byte is written (unless the body is
      // encoded: then the length is the encoded one, and the decoded bytes are counted below).
      const declared = Number(response.headers.get('content-length') ?? NaN);
      const encoded = (response.headers.get('content-encoding') ?? 'identity') !== 'identity';
      if (!encoded && size + declared > limit) {
        await response.body?.cancel();
        throw bodyTooLargeError(limit);
      }
      const file = await openRegular(destination, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC));
      try {
        for await (const chunk of chunksOf(response.body, signal)) {
          if (size + chunk.byteLength > limit) throw bodyTooLargeError(limit);
          take(quota, chunk.byteLength, destination);
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
}

/** `options.diskQuotaBytes`: see {@link DiskQuota}. */
export function nodeAdapters(documentDirectory: string, options: { diskQuotaBytes?: number } = {}): ResourceAdapters {
  const quota = options.diskQuotaBytes === undefined ? undefined : { left: options.diskQuotaBytes };
  return { fs: nodeFileSystem(documentDirectory, quota), http: nodeHttp(quota) };
}
