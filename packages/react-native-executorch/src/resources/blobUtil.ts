/**
 * Device adapters over `react-native-blob-util` (an optional peer dependency): it streams
 * downloads straight to disk, can append to an existing file (what HTTP Range resume needs),
 * hashes files natively and follows Hugging Face's CDN redirects. Only the parts of its API used
 * here are typed, structurally, so the package builds without it.
 */
import type { FileSystemAdapter, HttpAdapter, ResourceAdapters } from './adapters';

interface BlobUtilTask extends PromiseLike<{ info(): { status: number } }> {
  progress(config: { interval: number }, cb: (received: number, total: number) => void): this;
  cancel(): void;
}

/** The subset of `react-native-blob-util`'s default export these adapters use. */
export interface BlobUtilModule {
  fs: {
    dirs: { DocumentDir: string };
    exists(path: string): Promise<boolean>;
    isDir(path: string): Promise<boolean>;
    stat(path: string): Promise<{ size: number | string }>;
    mkdir(path: string): Promise<void>;
    mv(from: string, to: string): Promise<boolean | void>;
    unlink(path: string): Promise<void>;
    ls(path: string): Promise<string[]>;
    readFile(path: string, encoding: 'utf8'): Promise<string>;
    hash(path: string, algorithm: 'sha256'): Promise<string>;
  };
  config(options: { path: string; overwrite: boolean }): {
    fetch(method: 'GET', url: string, headers: Record<string, string>): BlobUtilTask;
  };
}

/** Builds the filesystem and HTTP adapters from `react-native-blob-util`'s default export. */
export function blobUtilAdapters(blobUtil: BlobUtilModule): ResourceAdapters {
  const { fs } = blobUtil;
  const fileSystem: FileSystemAdapter = {
    documentDirectory: fs.dirs.DocumentDir,
    async stat(path) {
      if (!(await fs.exists(path))) return null;
      if (await fs.isDir(path)) return { size: 0, isDirectory: true };
      return { size: Number((await fs.stat(path)).size), isDirectory: false };
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
    sha256: (path) => fs.hash(path, 'sha256'),
  };

  const http: HttpAdapter = {
    async download({ url, destination, offset, signal, onProgress }) {
      const attempt = async (from: number) => {
        const task = blobUtil
          .config({ path: destination, overwrite: from === 0 })
          .fetch('GET', url, from > 0 ? { Range: `bytes=${from}-` } : {})
          .progress({ interval: 250 }, (received) => onProgress(from + Number(received)));
        const onAbort = () => task.cancel();
        signal.addEventListener('abort', onAbort);
        try {
          return (await task).info().status;
        } finally {
          signal.removeEventListener('abort', onAbort);
        }
      };
      let status = await attempt(offset);
      if (status === 200 && offset > 0) {
        // The server ignored the range and the full body was appended: start over.
        await fileSystem.remove(destination);
        status = await attempt(0);
      }
      if (status !== 200 && status !== 206) {
        // blob-util writes error bodies to the file too; they must not count as model bytes.
        await fileSystem.remove(destination);
      }
      return { status };
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
