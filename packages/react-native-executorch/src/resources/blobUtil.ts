/**
 * Device adapters over `react-native-blob-util` (an optional peer dependency): it streams
 * downloads straight to disk, can append one file to another, hashes files natively and follows
 * Hugging Face's CDN redirects. Only the parts of its API used here are typed, structurally, so
 * the package builds without it.
 */
import type {
  FileSystemAdapter,
  HttpAdapter,
  HttpDownloadResult,
  ResourceAdapters,
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
    dirs: { DocumentDir: string };
    exists(path: string): Promise<boolean>;
    isDir(path: string): Promise<boolean>;
    stat(path: string): Promise<{ size: number | string; lastModified: number | string }>;
    mkdir(path: string): Promise<void>;
    mv(from: string, to: string): Promise<boolean | void>;
    unlink(path: string): Promise<void>;
    ls(path: string): Promise<string[]>;
    readFile(path: string, encoding: 'utf8'): Promise<string>;
    writeFile(path: string, data: string, encoding: 'utf8'): Promise<unknown>;
    /** With `'uri'`, `data` is a file path whose bytes are appended. */
    appendFile(path: string, data: string, encoding: 'uri'): Promise<unknown>;
    hash(path: string, algorithm: 'sha256'): Promise<string>;
  };
  config(options: { path: string; overwrite: boolean }): {
    fetch(method: 'GET', url: string, headers: Record<string, string>): BlobUtilTask;
  };
}

/** Where a ranged response is written before it is known to belong at the end of the part. */
const RANGE_SUFFIX = '.range.part';

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
  const fileSystem: FileSystemAdapter = {
    documentDirectory: fs.dirs.DocumentDir,
    async stat(path) {
      if (!(await fs.exists(path))) return null;
      if (await fs.isDir(path)) return { size: 0, isDirectory: true, mtimeMs: 0 };
      const info = await fs.stat(path);
      return { size: Number(info.size), isDirectory: false, mtimeMs: Number(info.lastModified) };
    },
    async mkdir(path) {
      if (!(await fs.exists(path))) await fs.mkdir(path);
    },
    async rename(from, to) {
      await fs.mv(from, to);
    },
    async remove(path) {
      if (await fs.exists(path)) await fs.unlink(path);
    },
    readDir: (path) => fs.ls(path),
    readText: (path) => fs.readFile(path, 'utf8'),
    async writeText(path, text) {
      await fs.writeFile(path, text, 'utf8');
    },
    sha256: (path) => fs.hash(path, 'sha256'),
  };

  const http: HttpAdapter = {
    async download({ url, destination, offset, signal, onProgress }): Promise<HttpDownloadResult> {
      // blob-util writes every body to its path, error pages too. A ranged request therefore
      // goes to a side file, appended to the part only once it is known to be the asked-for
      // range; the part never holds a byte that is not the file's.
      const target = offset > 0 ? destination + RANGE_SUFFIX : destination;
      let info: BlobUtilResponseInfo | null = null;
      const task = blobUtil
        .config({ path: target, overwrite: true })
        .fetch('GET', url, offset > 0 ? { Range: `bytes=${offset}-` } : {})
        .progress({ interval: 250 }, (received) => onProgress(offset + Number(received)));
      // Without it (or a taskId), a dropped ranged response's bytes are discarded, never guessed.
      task.stateChange?.((state) => {
        if (state.taskId === task.taskId) info = state;
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
