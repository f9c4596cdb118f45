/**
 * Device adapters over `react-native-blob-util` (an optional peer dependency): it streams
 * downloads straight to disk, can append one file to another, hashes files natively and follows
 * Hugging Face's CDN redirects. Only the parts of its API used here are typed, structurally, so
 * the package builds without it.
 *
 * What its API lacks, and what is done instead:
 * - no lstat, inode or realpath: `exists` and `stat` follow links. A dangling link (`exists`
 *   false, yet its folder lists the name) is reported as a link, so the fetcher removes it (the
 *   link itself: `unlink` does not follow) before anything is written there, instead of the
 *   library creating a file at its target; `writeText` and `createExclusive` refuse to write
 *   through one as well. A link to an existing entry looks like that entry and cannot be seen
 *   (the app's sandbox is the boundary: no other app can plant one there); a FIFO looks like an
 *   empty file, and empty parts are discarded;
 * - no O_EXCL: `createExclusive` is `fs.createFile` (which refuses an existing path after a
 *   check), and the fetcher reads the lock back to catch the race between check and create;
 * - no ranged read: `sha256Range` slices the range into a scratch file and hashes that;
 * - no free-space figure worth trusting (iOS's leaves out purgeable space, which the system
 *   frees on demand): no `freeBytes`, a full disk is caught when a write fails;
 * - no control over the writes of a download: the body is cut off (task cancelled) when its
 *   `Content-Length` or its progress passes `maxBytes`, and what went past it is deleted.
 */
import {
  bodyTooLargeError,
  type FileSystemAdapter,
  type HttpAdapter,
  type HttpDownloadResult,
  type ResourceAdapters,
} from './adapters';

/** What blob-util reports about a response (`stateChange` when headers arrive, `info()` at the end). */
interface BlobUtilResponseInfo {
  taskId?: string;
  status: number | string;
  headers?: Record<string, string>;
}

interface BlobUtilTask extends PromiseLike<{ info(): BlobUtilResponseInfo }> {
  /** At run time on every version this package supports; missing from blob-util's typings. */
  readonly taskId?: string;
  progress(config: { interval: number }, cb: (received: number, total: number) => void): this;
  /** Likewise untyped upstream. Its callback also receives other tasks' events: filter by taskId. */
  stateChange?(cb: (state: BlobUtilResponseInfo) => void): this;
  cancel(): void;
}

/** The subset of `react-native-blob-util`'s default export these adapters use. */
export interface BlobUtilModule {
  fs: {
    dirs: { DocumentDir: string; CacheDir?: string };
    exists(path: string): Promise<boolean>;
    isDir(path: string): Promise<boolean>;
    stat(path: string): Promise<{ size: number | string; lastModified: number | string }>;
    mkdir(path: string): Promise<void>;
    mv(from: string, to: string): Promise<boolean | void>;
    unlink(path: string): Promise<void>;
    ls(path: string): Promise<string[]>;
    readFile(path: string, encoding: 'utf8'): Promise<string>;
    writeFile(path: string, data: string, encoding: 'utf8'): Promise<unknown>;
    /** Rejects when something exists at `path`. */
    createFile(path: string, data: string, encoding: 'utf8'): Promise<unknown>;
    /** With `'uri'`, `data` is a file path whose bytes are appended. */
    appendFile(path: string, data: string, encoding: 'uri'): Promise<unknown>;
    /** Copies bytes `start` to `end` (exclusive) of `src` into a new file `dest`. */
    slice(src: string, dest: string, start: number, end: number): Promise<unknown>;
    hash(path: string, algorithm: 'sha256'): Promise<string>;
  };
  config(options: { path: string; overwrite: boolean }): {
    fetch(method: 'GET', url: string, headers: Record<string, string>): BlobUtilTask;
  };
}

/** Where a ranged response is written before it is known to belong at the end of the part. */
const RANGE_SUFFIX = '.range.part';
/** Bytes past `maxBytes` tolerated while a response's status is not yet known. */
const ERROR_PAGE_MARGIN = 1 << 20;

function header(info: BlobUtilResponseInfo | null, name: string): string | undefined {
  const entry = Object.entries(info?.headers ?? {}).find(([k]) => k.toLowerCase() === name);
  return entry?.[1];
}

/** The first byte a 206 answer carries (`Content-Range: bytes <first>-<last>/<total>`). */
function rangeStart(info: BlobUtilResponseInfo | null): number | null {
  const match = /^bytes (\d+)-/.exec(header(info, 'content-range') ?? '');
  return match ? Number(match[1]) : null;
}

/** Builds the filesystem and HTTP adapters from `react-native-blob-util`'s default export. */
export function blobUtilAdapters(blobUtil: BlobUtilModule): ResourceAdapters {
  const { fs } = blobUtil;
  /** Whether the folder of `path` lists its name: where `exists` is false, a dangling link. */
  const listed = async (path: string): Promise<boolean> => {
    const slash = path.lastIndexOf('/');
    try {
      return (await fs.ls(path.slice(0, slash))).includes(path.slice(slash + 1));
    } catch {
      return false; // No folder there: nothing at the path either.
    }
  };
  const fileSystem: FileSystemAdapter = {
    documentDirectory: fs.dirs.DocumentDir,
    async stat(path) {
      // Each answer is one call of the library: an entry created, renamed or removed between
      // them (another fetcher at work) is looked at again, a few times.
      for (let look = 1; ; look += 1) {
        try {
          if (await fs.exists(path)) {
            if (await fs.isDir(path)) return { size: 0, isDirectory: true, mtimeMs: 0 };
            const info = await fs.stat(path);
            return { size: Number(info.size), isDirectory: false, mtimeMs: Number(info.lastModified) };
          }
          if (!(await listed(path))) return null;
          // Listed yet not there: a dangling link, unless it was created in between.
          if (!(await fs.exists(path))) return { size: 0, isDirectory: false, mtimeMs: 0, type: 'link' };
        } catch (error) {
          if (look >= 3) throw error;
        }
        if (look >= 3) return null;
      }
    },
    async mkdir(path) {
      if (!(await fs.exists(path))) await fs.mkdir(path);
    },
    async rename(from, to) {
      await fs.mv(from, to);
    },
    async remove(path) {
      if (!(await fs.exists(path)) && !(await listed(path))) return;
      try {
        await fs.unlink(path);
      } catch (error) {
        // Removed by someone else in between is removed.
        if ((await fs.exists(path)) || (await listed(path))) throw error;
      }
    },
    readDir: (path) => fs.ls(path),
    readText: (path) => fs.readFile(path, 'utf8'),
    async writeText(path, text) {
      // The library would write through a dangling link: replace it instead.
      if ((await fileSystem.stat(path))?.type === 'link') await fileSystem.remove(path);
      await fs.writeFile(path, text, 'utf8');
    },
    sha256: (path) => fs.hash(path, 'sha256'),
    async sha256Range(path, start, end) {
      const scratch = `${fs.dirs.CacheDir ?? fs.dirs.DocumentDir}/rne-sample-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      try {
        await fs.slice(path, scratch, start, end);
        return await fs.hash(scratch, 'sha256');
      } finally {
        await fileSystem.remove(scratch);
      }
    },
    async createExclusive(path, text) {
      // A dangling link counts as something there (createFile would write through it).
      if (await fileSystem.stat(path)) return false;
      try {
        await fs.createFile(path, text, 'utf8');
        return true;
      } catch (error) {
        if (await fs.exists(path)) return false;
        throw error;
      }
    },
  };

  const http: HttpAdapter = {
    async download({ url, destination, offset, maxBytes, signal, onProgress }): Promise<HttpDownloadResult> {
      // blob-util writes every body to its path, error pages too. A ranged request therefore
      // goes to a side file, appended to the part only once it is known to be the asked-for
      // range; the part never holds a byte that is not the file's.
      const target = offset > 0 ? destination + RANGE_SUFFIX : destination;
      // A leftover side file (or anything planted there) is not appended to, and the library
      // must not create a file at the target of a dangling link.
      if (offset > 0 || (await fileSystem.stat(target))?.type === 'link') await fileSystem.remove(target);
      const limit = maxBytes ?? Infinity;
      let info: BlobUtilResponseInfo | null = null;
      let over = false;
      /** Bytes the part holds with `received` bytes of this body (a 200 starts from zero). */
      const onDisk = (received: number) => (Number(info?.status) === 200 ? 0 : offset) + received;
      const headers: Record<string, string> = { 'Accept-Encoding': 'identity' };
      if (offset > 0) headers.Range = `bytes=${offset}-`;
      const task = blobUtil
        .config({ path: target, overwrite: true })
        .fetch('GET', url, headers)
        .progress({ interval: 250 }, (received) => {
          // Only a body that goes to the part counts. Before the headers are known (no
          // stateChange), an error page gets a margin: it is discarded, and never that big.
          const status = Number(info?.status ?? 0);
          if (status !== 0 && status !== 200 && status !== 206) return;
          if (onDisk(Number(received)) > limit + (status === 0 ? ERROR_PAGE_MARGIN : 0)) {
            over = true;
            task.cancel();
            return;
          }
          onProgress(Math.min(limit, onDisk(Number(received))));
        });
      // Without it (or a taskId), a dropped ranged response's bytes are discarded, never guessed.
      task.stateChange?.((state) => {
        if (state.taskId !== task.taskId) return;
        info = state;
        const declared = Number(header(state, 'content-length') ?? NaN);
        const encoded = (header(state, 'content-encoding') ?? 'identity') !== 'identity';
        const status = Number(state.status);
        // A range that starts elsewhere is discarded whole: stop it at once.
        if (status === 206 && rangeStart(state) !== offset) task.cancel();
        else if ((status === 200 || status === 206) && !encoded && onDisk(declared) > limit) {
          over = true;
          task.cancel();
        }
      });
      const onAbort = () => task.cancel();
      signal.addEventListener('abort', onAbort);
      let failure: unknown = null;
      try {
        info = (await task).info();
      } catch (error) {
        // Dropped, stalled or cancelled: what arrived is kept when the headers said it is ours.
        failure = error;
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
      const status = Number((info as BlobUtilResponseInfo | null)?.status ?? 0);
      // Progress comes every 250 ms: the bytes past the limit written meanwhile are deleted.
      const written = (await fileSystem.stat(target))?.size ?? 0;
      if (over || (status === 200 || status === 206 ? onDisk(written) > limit : false)) {
        await fileSystem.remove(target);
        throw bodyTooLargeError(limit);
      }
      const wrongRange = status === 206 && rangeStart(info) !== offset;
      if (offset === 0) {
        if (status !== 200) await fileSystem.remove(destination);
      } else {
        if (status === 206 && !wrongRange) await fs.appendFile(destination, target, 'uri');
        // The server ignored the range: the side file holds the file from its first byte.
        if (status === 200) await fileSystem.rename(target, destination);
        await fileSystem.remove(target);
      }
      if (failure !== null) throw failure;
      if (wrongRange) {
        throw new Error(
          `Asked for bytes from ${offset}, the server answered Content-Range ` +
            `"${header(info, 'content-range') ?? ''}"; nothing was kept from this response.`,
        );
      }
      return { status, retryAfter: header(info, 'retry-after') };
    },
  };
  return { fs: fileSystem, http };
}

/**
 * The adapters used when none are passed: `react-native-blob-util` when the app has it
 * installed, otherwise null (downloads then fail with `no_resource_adapter`).
 */
export function defaultResourceAdapters(): ResourceAdapters | null {
  try {
    // Optional dependency: Metro resolves this require only when the package is installed.
    const mod = require('react-native-blob-util') as { default?: BlobUtilModule } & BlobUtilModule;
    return blobUtilAdapters(mod.default ?? mod);
  } catch {
    return null;
  }
}
