/**
 * The two adapters the resource fetcher runs on. On device they wrap a native filesystem and
 * download library (see `blobUtilAdapters`); in tests, Node's fs and fetch. Paths are plain
 * absolute filesystem paths (no `file://`), with `/` separators.
 */

/** What `stat` reports about the entry at a path (the path itself: a link is not followed). */
export interface FileInfo {
  readonly size: number;
  readonly isDirectory: boolean;
  /** Last modification time, ms since the epoch (remembers which files were already verified). */
  readonly mtimeMs: number;
  /**
   * What the entry is: a regular file, a directory, a symbolic link (not followed), or anything
   * else (FIFO, socket, device). Adapters that cannot tell leave it out; the fetcher then takes
   * `isDirectory` for a directory and anything else for a file.
   */
  readonly type?: 'file' | 'directory' | 'link' | 'other';
  /**
   * Where the bytes live and when the entry last changed in any way (device, inode and change
   * time, e.g. `"2049:1234:1700000000123.4"`). A file replaced, or written in place with its mtime
   * set back, gets another identity. Left out by adapters that cannot tell.
   */
  readonly identity?: string;
}

/** The filesystem operations the fetcher needs. */
export interface FileSystemAdapter {
  /** The app's documents directory; the cache lives below it. */
  readonly documentDirectory: string;
  /** Null when nothing exists at `path`. Does not follow a symbolic link at `path` (lstat). */
  stat(path: string): Promise<FileInfo | null>;
  /** Creates `path` and its parents; succeeds when it exists. */
  mkdir(path: string): Promise<void>;
  /** Moves `from` to `to` in one step (same directory, so atomic on every real filesystem). */
  rename(from: string, to: string): Promise<void>;
  /**
   * Removes a file or a directory tree; succeeds when nothing is there. A symbolic link is
   * removed itself, never followed (neither at `path` nor inside the tree).
   */
  remove(path: string): Promise<void>;
  /** Names (not paths) of the entries of a directory. */
  readDir(path: string): Promise<string[]>;
  readText(path: string): Promise<string>;
  /** Creates or replaces a (small) UTF-8 text file; refuses to write through a link at `path`. */
  writeText(path: string, text: string): Promise<void>;
  /** Lowercase hex sha256 of the file's bytes. */
  sha256(path: string): Promise<string>;
  /**
   * Lowercase hex sha256 of bytes `start` (inclusive) to `end` (exclusive). Optional: without it
   * the `.verified` mark is trusted on size, mtime and identity alone (no sampled re-check).
   */
  sha256Range?(path: string, start: number, end: number): Promise<string>;
  /**
   * Creates `path` holding `text` unless something (a link included) is there already, in one
   * atomic step where the platform allows (`O_CREAT | O_EXCL`). Resolves false when something was
   * there. Optional: without it, the fetcher checks with `stat` and then writes (a short race
   * between two processes, caught by reading the lock back).
   */
  createExclusive?(path: string, text: string): Promise<boolean>;
  /** The path with every symbolic link resolved. Optional: a second check that writes stay in the cache. */
  realpath?(path: string): Promise<string>;
  /** Bytes free for the app on the filesystem holding `path`, or null when unknown. Optional. */
  freeBytes?(path: string): Promise<number | null>;
}

/** One ranged GET written to a file. */
export interface HttpDownloadRequest {
  readonly url: string;
  /** The file the body goes to. */
  readonly destination: string;
  /**
   * Bytes of `destination` already downloaded. When > 0 the adapter sends
   * `Range: bytes=<offset>-`; it appends the body on 206 and rewrites the file from the start
   * on 200 (a server that ignores ranges).
   */
  readonly offset: number;
  /**
   * The registry's size of the file: `destination` never grows past it. At the first byte that
   * would go over, the adapter stops writing (nothing past `maxBytes` stays on disk) and rejects
   * with an error whose `code` is `'EFBIG'`. Absent: no limit.
   */
  readonly maxBytes?: number;
  readonly signal: AbortSignal;
  /** Called as data arrives with the size of `destination` so far. */
  onProgress(bytesOnDisk: number): void;
}

/** How a download request ended. */
export interface HttpDownloadResult {
  readonly status: number;
  /** The raw `Retry-After` header of a response other than 200/206, when it had one. */
  readonly retryAfter?: string;
}

/** The HTTP operation the fetcher needs. */
export interface HttpAdapter {
  /**
   * Performs the request. Resolves with the HTTP status once the body is written (for a status
   * other than 200/206 nothing is added to `destination`). Rejects when the connection fails or
   * `signal` aborts, after keeping what was written, so the next request can resume from it.
   * Rejects without adding anything when a 206 answer's `Content-Range` does not start at
   * `offset` (its bytes would land at the wrong place). Asks for the body unencoded
   * (`Accept-Encoding: identity`); a body decoded anyway counts its decoded bytes.
   */
  download(request: HttpDownloadRequest): Promise<HttpDownloadResult>;
}

/** Both adapters. */
export interface ResourceAdapters {
  readonly fs: FileSystemAdapter;
  readonly http: HttpAdapter;
}

/** The error an adapter rejects with when a body would pass `maxBytes`. */
export function bodyTooLargeError(maxBytes: number): Error {
  return Object.assign(
    new Error(`The response body goes past the expected ${maxBytes} bytes; writing stopped there.`),
    { code: 'EFBIG' },
  );
}
