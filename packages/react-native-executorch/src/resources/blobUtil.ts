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
 *
 * With `background` (iOS), blob-util runs an `NSURLSessionDownloadTask` in a background session
 * (`IOSBackgroundTask`): it goes on while the app is suspended, but the body lands at its path
 * only when the task completes (a dropped or cancelled task leaves nothing), and no
 * `stateChange` fires, so `info()` carries the status alone, no headers. The file is therefore
 * fetched in closed ranges of `segmentBytes`, each appended to the part once whole (a drop
 * loses at most one segment). Without `Content-Range`, each ranged request starts a little
 * before the part's end and its first bytes must equal the part's last ones: an answer from the
 * wrong place (or longer than asked) is discarded whole, as a wrong `Content-Range` is.
 */
import { ExecutorchError } from '../errors';
import {
  bodyTooLargeError,
  type FileSystemAdapter,
  type HttpAdapter,
  type HttpDownloadRequest,
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
  config(options: { path: string; overwrite: boolean; IOSBackgroundTask?: boolean }): {
    fetch(method: 'GET', url: string, headers: Record<string, string>): BlobUtilTask;
  };
}

/** Options of {@link blobUtilAdapters}. */
export interface BlobUtilAdapterOptions {
  /**
   * iOS: download in a background URL session (blob-util's `IOSBackgroundTask`), which goes on
   * while the app is suspended, in closed ranges of `segmentBytes`. Ignored by blob-util on
   * Android, whose only background path (`addAndroidDownloads`, the DownloadManager) cannot
   * resume a part; leave it off there. Default false.
   */
  readonly background?: boolean;
  /**
   * Bytes of one background segment: a dropped, paused or cancelled transfer loses at most this
   * much, and while the app is suspended at most one segment goes on. Default 64 MiB.
   */
  readonly segmentBytes?: number;
}

/** The default `segmentBytes`. */
const DEFAULT_SEGMENT_BYTES = 64 << 20;
/** Bytes a background range re-asks for before the part's end, to check where it starts. */
const MAX_OVERLAP_BYTES = 64 << 10;
/** Where a ranged response is written before it is known to belong at the end of the part. */
const RANGE_SUFFIX = '.range.part';
/** A background range without the bytes it shares with the part, before it is appended. */
const TAIL_SUFFIX = '.tail.part';
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
export function blobUtilAdapters(blobUtil: BlobUtilModule, options: BlobUtilAdapterOptions = {}): ResourceAdapters {
  const { fs } = blobUtil;
  const segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
  if (!Number.isSafeInteger(segmentBytes) || segmentBytes < 1) {
    throw new ExecutorchError(
      'invalid_argument',
      `segmentBytes must be a whole number of bytes >= 1 (got ${String(options.segmentBytes)}); ` +
        `leave it out for ${DEFAULT_SEGMENT_BYTES} (64 MiB).`,
    );
  }
  // A sixteenth of a segment, so small test segments still overlap by a fraction of themselves.
  const overlapBytes = Math.min(MAX_OVERLAP_BYTES, Math.max(1, Math.floor(segmentBytes / 16)));
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

  /**
   * One background range: `segmentBytes` after `offset` (fewer at `maxBytes`), asked from
   * `overlap` bytes earlier. Appends what is new to the part once the whole answer is there and
   * starts with the part's last bytes; a 200 (ranges ignored) replaces the part.
   */
  const backgroundSegment = async (
    { url, destination, maxBytes, signal, onProgress }: HttpDownloadRequest,
    offset: number,
  ): Promise<HttpDownloadResult & { added: number; asked: number }> => {
    const limit = maxBytes ?? Infinity;
    const overlap = Math.min(offset, overlapBytes);
    const from = offset - overlap;
    const to = Math.min(offset + segmentBytes, limit) - 1;
    const asked = to - from + 1;
    const target = offset > 0 ? destination + RANGE_SUFFIX : destination;
    if (offset > 0 || (await fileSystem.stat(target))?.type === 'link') await fileSystem.remove(target);
    let over = false;
    const task = blobUtil
      .config({ path: target, overwrite: true, IOSBackgroundTask: true })
      .fetch('GET', url, { 'Accept-Encoding': 'identity', Range: `bytes=${from}-${to}` })
      .progress({ interval: 250 }, (received, total) => {
        // No status until the end: a body longer than the range is the whole file (a 200) or an
        // error page, counted from zero with the error page margin.
        const whole = Number(total) > asked || Number(received) > asked;
        const bytes = whole ? Number(received) : Math.max(offset, from + Number(received));
        const declared = whole ? Number(total) : 0;
        if (Math.max(bytes, declared) > limit + (whole ? ERROR_PAGE_MARGIN : 0)) {
          over = true;
          task.cancel();
          return;
        }
        // Not on disk yet (the task writes at the end), but the fetcher's idle and rate checks
        // need to see the transfer move.
        onProgress(Math.min(limit, bytes));
      });
    const onAbort = () => task.cancel();
    signal.addEventListener('abort', onAbort);
    let status = 0;
    try {
      status = Number((await task).info().status);
    } catch (error) {
      // A download task that did not complete wrote nothing; remove whatever is there anyway.
      await fileSystem.remove(target);
      throw over ? bodyTooLargeError(limit) : error;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    const written = (await fileSystem.stat(target))?.size ?? 0;
    if (over || (status === 200 && written > limit)) {
      await fileSystem.remove(target);
      throw bodyTooLargeError(limit);
    }
    if (status === 200) {
      // The server ignored the range: the whole file, which replaces the part.
      if (target !== destination) await fileSystem.rename(target, destination);
      return { status, added: written, asked: 0 };
    }
    if (status !== 206) {
      // An error page (written like any body) or a 416: nothing of it is kept.
      await fileSystem.remove(target);
      return { status, added: 0, asked };
    }
    try {
      // Longer than asked could pass maxBytes; at offset 0 nothing is there to compare with.
      const starts =
        written >= overlap &&
        written <= asked &&
        (overlap === 0 ||
          (await fileSystem.sha256Range!(destination, from, offset)) ===
            (await fileSystem.sha256Range!(target, 0, overlap)));
      if (!starts) {
        const why = written > asked ? 'more than asked' : `not starting with the ${overlap} bytes the part ends with`;
        throw new Error(
          `Asked for bytes ${from}-${to} (${asked} bytes), the server answered 206 with ${written} ` +
            `bytes, ${why}: a wrong range; nothing was kept from this response.`,
        );
      }
      if (offset === 0) return { status, added: written, asked };
      if (written > overlap) {
        const tail = destination + TAIL_SUFFIX;
        await fileSystem.remove(tail);
        try {
          await fs.slice(target, tail, overlap, written);
          await fs.appendFile(destination, tail, 'uri');
        } finally {
          await fileSystem.remove(tail);
        }
      }
    } catch (error) {
      await fileSystem.remove(target);
      throw error;
    }
    await fileSystem.remove(target);
    return { status, added: written - overlap, asked: to - offset + 1 };
  };

  /** Range after range until the file is whole, an answer is not a full 206, or one fails. */
  const backgroundDownload = async (request: HttpDownloadRequest): Promise<HttpDownloadResult> => {
    let offset = request.offset;
    for (;;) {
      const step = await backgroundSegment(request, offset);
      offset += step.added;
      // Short of what was asked: the end of the file (size unknown), or an answer that ended
      // early, which the fetcher resumes.
      if (step.status !== 206 || step.added < step.asked || offset >= (request.maxBytes ?? Infinity)) {
        return { status: step.status };
      }
      if (request.signal.aborted) {
        throw Object.assign(new Error('The download was aborted between two ranges.'), { name: 'AbortError' });
      }
    }
  };

  const foregroundDownload = async ({
    url,
    destination,
    offset,
    maxBytes,
    signal,
    onProgress,
  }: HttpDownloadRequest): Promise<HttpDownloadResult> => {
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
  };

  // A background task reports no headers: no Retry-After (the fetcher backs off on its own).
  const http: HttpAdapter = { download: options.background ? backgroundDownload : foregroundDownload };
  return { fs: fileSystem, http };
}

/**
 * The adapters used when none are passed: `react-native-blob-util` when the app has it
 * installed, otherwise null (downloads then fail with `no_resource_adapter`).
 */
export function defaultResourceAdapters(options: BlobUtilAdapterOptions = {}): ResourceAdapters | null {
  let mod: { default?: BlobUtilModule } & BlobUtilModule;
  try {
    // Optional dependency: Metro resolves this require only when the package is installed.
    mod = require('react-native-blob-util') as { default?: BlobUtilModule } & BlobUtilModule;
  } catch {
    return null;
  }
  return blobUtilAdapters(mod.default ?? mod, options);
}
