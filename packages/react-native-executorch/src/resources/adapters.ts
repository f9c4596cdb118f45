/**
 * The two adapters the resource fetcher runs on. On device they wrap a native filesystem and
 * download library (see `blobUtilAdapters`); in tests, Node's fs and fetch. Paths are plain
 * absolute filesystem paths (no `file://`), with `/` separators.
 */

/** What `stat` reports. */
export interface FileInfo {
  readonly size: number;
  readonly isDirectory: boolean;
  /** Last modification time, ms since the epoch (remembers which files were already verified). */
  readonly mtimeMs: number;
}

/** The filesystem operations the fetcher needs. */
export interface FileSystemAdapter {
  /** The app's documents directory; the cache lives below it. */
  readonly documentDirectory: string;
  /** Null when nothing exists at `path`. */
  stat(path: string): Promise<FileInfo | null>;
  /** Creates `path` and its parents; succeeds when it exists. */
  mkdir(path: string): Promise<void>;
  /** Moves `from` to `to` in one step (same directory, so atomic on every real filesystem). */
  rename(from: string, to: string): Promise<void>;
  /** Removes a file or a directory tree; succeeds when nothing is there. */
  remove(path: string): Promise<void>;
  /** Names (not paths) of the entries of a directory. */
  readDir(path: string): Promise<string[]>;
  readText(path: string): Promise<string>;
  /** Creates or replaces a (small) UTF-8 text file. */
  writeText(path: string, text: string): Promise<void>;
  /** Lowercase hex sha256 of the file's bytes. */
  sha256(path: string): Promise<string>;
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
   * `offset` (its bytes would land at the wrong place).
   */
  download(request: HttpDownloadRequest): Promise<HttpDownloadResult>;
}

/** Both adapters. */
export interface ResourceAdapters {
  readonly fs: FileSystemAdapter;
  readonly http: HttpAdapter;
}
