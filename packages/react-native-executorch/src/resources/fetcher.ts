import { ExecutorchError } from '../errors';
import type { AnyLLMDescriptor, Backend, PublishedFile, VariantDescriptor } from '../models';
import type {
  FileInfo,
  FileSystemAdapter,
  HttpAdapter,
  HttpDownloadResult,
  ResourceAdapters,
} from './adapters';
import { checkedRelativePath, checkedRepoRevision, dirname, joinPath } from './paths';
import { type RetryPolicy, retryAfterMs, retryDelayMs, sleep } from './retry';

/** A published file of a Hugging Face repository at a pinned revision. */
export interface RemoteFile extends PublishedFile {
  readonly repo: string;
  readonly revision: string;
}

/** Options of one fetch. */
export interface FetchOptions {
  /** Aborting rejects this fetch with `download_cancelled`; partial data is kept for resume. */
  readonly signal?: AbortSignal;
  /** Combined progress of all requested files, 0..1, weighted by their registry sizes. */
  readonly onProgress?: (progress: number) => void;
}

/** Local paths of the files a model needs. */
export interface ModelFiles {
  readonly modelPath: string;
  readonly tokenizerPath: string;
  /** The file that holds the chat template (`tokenizer_config.json`). */
  readonly chatTemplatePath: string;
}

/** A model revision found in the cache. */
export interface CachedModel {
  readonly repo: string;
  readonly revision: string;
  /** Complete (verified) files, paths relative to the repository root. */
  readonly files: readonly { readonly path: string; readonly size: number }[];
  /** Bytes of complete files plus partial downloads. */
  readonly sizeBytes: number;
}

/** Settings of a {@link ResourceFetcher}. */
export interface ResourceFetcherOptions extends ResourceAdapters {
  /** Defaults to `https://huggingface.co`. */
  readonly baseUrl?: string;
  /** Defaults to `<documentDirectory>/react-native-executorch/models`. */
  readonly cacheDirectory?: string;
  /**
   * Requests per file before a failing download is reported (each resumes where the previous
   * one stopped). Default 4.
   */
  readonly maxAttempts?: number;
  /**
   * A request that receives no data for this long (no answer at all, or headers and then
   * silence) is aborted and counts as a failed attempt. Default 30 000 ms.
   */
  readonly idleTimeoutMs?: number;
  /**
   * Wait before retrying a request that failed without receiving data (HTTP 5xx, 429, no
   * connection); doubles with each such failure in a row. Default 1000 ms.
   */
  readonly retryDelayMs?: number;
  /** Upper bound of every retry wait, a server's `Retry-After` included. Default 30 000 ms. */
  readonly maxRetryDelayMs?: number;
}

const PART_SUFFIX = '.part';
/** Beside a verified file: `{ size, mtimeMs, sha256 }` of what was hashed, so it is hashed once. */
const VERIFIED_SUFFIX = '.verified';
/** Longer than the mtime clock tick of common filesystems other than FAT (ext4, APFS, f2fs). */
const RACY_WINDOW_MS = 25;

/** How one request for a file ended. */
type Attempt =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: string; readonly status?: number; readonly waitMs?: number };

/** Statuses that say "later": the request is retried after a delay. */
function isTransientStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599);
}

/** One file's download, shared by every fetch that asks for it at the same time. */
interface Download {
  readonly promise: Promise<string>;
  readonly controller: AbortController;
  bytes: number;
  waiters: number;
  readonly listeners: Set<() => void>;
}

function noop(): void {}

/** Throws `invalid_path` when `file`'s repo, revision or path could leave its folder. */
function checkedFile(file: RemoteFile): void {
  checkedRepoRevision(file.repo, file.revision);
  checkedRelativePath(file.path, 'file path');
}

function cancelledError(): ExecutorchError {
  return new ExecutorchError('download_cancelled', 'The download was cancelled.');
}

/**
 * Downloads published model files into the app's documents directory and hands out local paths
 * only for complete, verified files.
 *
 * Layout: `<cacheDirectory>/<repo>/<revision>/<path>`; repo, revision and path are checked to
 * stay inside the cache (`invalid_path`). A file is written as `<path>.part`, resumed with HTTP
 * Range when a connection drops, stalls or a fetch is cancelled, retried with backoff on HTTP
 * 5xx/429, checked against the registry's size and sha256 (a resumed file that fails is
 * downloaded again from zero, once), and only then renamed to `<path>`. A file found at its
 * final name is hashed once and remembered (`<path>.verified`), so what this returns is always
 * a verified file. Concurrent requests for the same file share one download.
 */
export class ResourceFetcher {
  private readonly fs: FileSystemAdapter;
  private readonly http: HttpAdapter;
  private readonly baseUrl: string;
  private readonly maxAttempts: number;
  private readonly idleTimeoutMs: number;
  private readonly retry: RetryPolicy;
  readonly cacheDirectory: string;
  private readonly downloads = new Map<string, Download>();

  constructor(options: ResourceFetcherOptions) {
    this.fs = options.fs;
    this.http = options.http;
    this.baseUrl = (options.baseUrl ?? 'https://huggingface.co').replace(/\/+$/, '');
    this.maxAttempts = options.maxAttempts ?? 4;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
    this.retry = {
      baseDelayMs: options.retryDelayMs ?? 1000,
      maxDelayMs: options.maxRetryDelayMs ?? 30_000,
    };
    this.cacheDirectory =
      options.cacheDirectory ??
      joinPath(options.fs.documentDirectory, 'react-native-executorch', 'models');
  }

  /**
   * Where `file` lives once downloaded. Throws `invalid_path` when its repo, revision or path
   * would leave the cache.
   */
  localPath(file: RemoteFile): string {
    checkedFile(file);
    return joinPath(this.cacheDirectory, file.repo, file.revision, file.path);
  }

  /** The `<repo>/resolve/<revision>/<path>` URL of `file` (checked like {@link localPath}). */
  url(file: RemoteFile): string {
    checkedFile(file);
    const encode = (s: string) => s.split('/').map(encodeURIComponent).join('/');
    return `${this.baseUrl}/${encode(file.repo)}/resolve/${encodeURIComponent(file.revision)}/${encode(file.path)}`;
  }

  /**
   * The remote files `model` needs to run on `backend`. Throws `model_unpublished` when the
   * variant or the tokenizer has no published checksums (nothing is downloaded then).
   */
  static filesOf(model: AnyLLMDescriptor, backend: string): RemoteFile[] {
    const variant = (model.variants as Partial<Record<string, VariantDescriptor>>)[backend];
    if (variant === undefined) {
      throw new ExecutorchError(
        'backend_unavailable',
        `${model.name} ships no ${backend} variant (it ships ${Object.keys(model.variants).join(', ')}).`,
        { alternatives: Object.keys(model.variants) as Backend[] },
      );
    }
    for (const [what, set] of [
      [`its ${backend} variant`, variant],
      ['its tokenizer', model.tokenizer],
    ] as const) {
      if (set.status !== 'published') {
        throw new ExecutorchError(
          'model_unpublished',
          `${model.name}: ${what} is not published yet (the registry has no checksums for ` +
            `${set.files.map((f) => f.path).join(', ')}), so it cannot be downloaded and ` +
            'verified. Use a published model or a registry version that publishes it.',
        );
      }
    }
    const { repo, revision } = model.hf;
    const published = [...variant.files, ...model.tokenizer.files] as PublishedFile[];
    return published.map((f) => ({ ...f, repo, revision }));
  }

  /**
   * Downloads (or finds in the cache) everything `model` needs on `backend` and returns the
   * local paths. See {@link ResourceFetcher.fetchFiles} for progress and cancellation.
   */
  async fetchModel(
    model: AnyLLMDescriptor,
    backend: string,
    options: FetchOptions = {},
  ): Promise<ModelFiles> {
    const files = ResourceFetcher.filesOf(model, backend);
    const roles = ResourceFetcher.roles(model, backend, files);
    const paths = await this.fetchFiles(files, options);
    return {
      modelPath: paths[roles.modelPath]!,
      tokenizerPath: paths[roles.tokenizerPath]!,
      chatTemplatePath: paths[roles.chatTemplatePath]!,
    };
  }

  /**
   * Checks files already on the device (`localFiles`) against the registry before their first
   * load, when the registry publishes checksums for `model` on `backend` (otherwise there is
   * nothing to check against and it returns). Each file is hashed once: a `.verified` mark
   * beside it remembers it while its size and mtime stay the same (where the folder is
   * writable). Throws `not_found` for a missing file and `checksum_mismatch` for a corrupt one,
   * which is left in place: it is the caller's.
   */
  async verifyLocalFiles(model: AnyLLMDescriptor, backend: string, local: ModelFiles): Promise<void> {
    const variant = (model.variants as Partial<Record<string, VariantDescriptor>>)[backend];
    if (variant?.status !== 'published' || model.tokenizer.status !== 'published') return;
    const files = ResourceFetcher.filesOf(model, backend);
    const roles = ResourceFetcher.roles(model, backend, files);
    for (const role of Object.keys(roles) as (keyof ModelFiles)[]) {
      const file = files[roles[role]]!;
      const path = local[role];
      const info = await this.fs.stat(path);
      if (!info || info.isDirectory) {
        throw new ExecutorchError(
          'not_found',
          `${path} (${model.name}, ${file.path}) is not a file.`,
          { path },
        );
      }
      if (await this.isRemembered(file, path, info)) continue;
      const problem = await this.integrityProblem(file, path);
      if (problem !== null) {
        throw new ExecutorchError(
          'checksum_mismatch',
          `${path} is a corrupt file: ${problem} (${model.name}, ${file.path} at revision ` +
            `${model.hf.revision}). Copy the published file there again.`,
          { path },
        );
      }
      await this.remember(file, path);
    }
  }

  /** Which of `files` (from {@link filesOf}) are the model, the tokenizer and the chat template. */
  private static roles(
    model: AnyLLMDescriptor,
    backend: string,
    files: readonly RemoteFile[],
  ): Record<keyof ModelFiles, number> {
    const find = (pred: (f: RemoteFile) => boolean, what: string): number => {
      const i = files.findIndex(pred);
      if (i < 0) {
        throw new ExecutorchError(
          'invalid_model',
          `${model.name}: the registry lists no ${what} for the ${backend} variant.`,
        );
      }
      return i;
    };
    const base = (p: string) => p.slice(p.lastIndexOf('/') + 1);
    return {
      modelPath: find((f) => f.path.endsWith('.pte'), '.pte file'),
      tokenizerPath: find((f) => base(f.path) === 'tokenizer.json', 'tokenizer.json'),
      chatTemplatePath: find(
        (f) => base(f.path) === model.tokenizer.chatTemplate,
        model.tokenizer.chatTemplate,
      ),
    };
  }

  /**
   * Makes every file available locally and returns their paths, in order. Progress is one value
   * 0..1 over all files (cached files count as done). Cancelling rejects this call with
   * `download_cancelled`; a download shared with another fetch continues for that one.
   */
  async fetchFiles(files: readonly RemoteFile[], options: FetchOptions = {}): Promise<string[]> {
    const { signal, onProgress } = options;
    if (signal?.aborted) throw cancelledError();
    // Every path is checked before any download starts.
    files.forEach((f) => this.localPath(f));
    const total = files.reduce((sum, f) => sum + f.size, 0);
    const joined = files.map((f) => this.join(f));
    let lastReported = -1;
    const report = () => {
      if (!onProgress) return;
      const done = joined.reduce((sum, d, i) => sum + Math.min(d.bytes, files[i]!.size), 0);
      const progress = total > 0 ? done / total : 1;
      // Report whole permille steps so a large file does not cause thousands of updates.
      const step = Math.floor(progress * 1000);
      if (step !== lastReported) {
        lastReported = step;
        onProgress(step / 1000);
      }
    };
    joined.forEach((d) => d.listeners.add(report));

    let leave: () => void = () => {};
    const cancelled = new Promise<never>((_, reject) => {
      const onAbort = () => reject(cancelledError());
      signal?.addEventListener('abort', onAbort);
      leave = () => signal?.removeEventListener('abort', onAbort);
    });
    cancelled.catch(() => {});
    try {
      return await Promise.race([Promise.all(joined.map((d) => d.promise)), cancelled]);
    } finally {
      leave();
      for (const d of joined) {
        d.listeners.delete(report);
        d.waiters -= 1;
        // The last fetch waiting for a running download gave up: stop it (the .part stays).
        if (d.waiters === 0 && signal?.aborted) d.controller.abort();
      }
    }
  }

  /** Reads a (downloaded or local) text file, e.g. the tokenizer config. */
  readText(path: string): Promise<string> {
    return this.fs.readText(path);
  }

  /** The models in the cache, with their files and sizes. */
  async listCachedModels(): Promise<CachedModel[]> {
    const result: CachedModel[] = [];
    for (const owner of await this.readDirIfAny(this.cacheDirectory)) {
      const ownerDir = joinPath(this.cacheDirectory, owner);
      for (const name of await this.readDirIfAny(ownerDir)) {
        const repoDir = joinPath(ownerDir, name);
        for (const revision of await this.readDirIfAny(repoDir)) {
          const files: { path: string; size: number }[] = [];
          let sizeBytes = 0;
          await this.walk(joinPath(repoDir, revision), '', async (path, size) => {
            if (path.endsWith(VERIFIED_SUFFIX)) return;
            sizeBytes += size;
            if (!path.endsWith(PART_SUFFIX)) files.push({ path, size });
          });
          files.sort((a, b) => (a.path < b.path ? -1 : 1));
          result.push({ repo: `${owner}/${name}`, revision, files, sizeBytes });
        }
      }
    }
    return result;
  }

  /**
   * Deletes a model's cached files (complete and partial), given the model or its repo and
   * revision. Refuses while one of its files is downloading; throws `invalid_path` (deleting
   * nothing) when the repo or revision would leave the cache.
   */
  async deleteCachedModel(
    target: AnyLLMDescriptor | { readonly repo: string; readonly revision: string },
  ): Promise<void> {
    const { repo, revision } = 'hf' in target ? target.hf : target;
    checkedRepoRevision(repo, revision);
    const dir = joinPath(this.cacheDirectory, repo, revision);
    for (const path of this.downloads.keys()) {
      if (path.startsWith(`${dir}/`)) {
        throw new ExecutorchError(
          'invalid_argument',
          `${repo}@${revision} is downloading; cancel the download before deleting it.`,
        );
      }
    }
    await this.fs.remove(dir);
  }

  private async readDirIfAny(path: string): Promise<string[]> {
    const info = await this.fs.stat(path);
    return info?.isDirectory ? (await this.fs.readDir(path)).sort() : [];
  }

  private async walk(
    dir: string,
    prefix: string,
    visit: (path: string, size: number) => Promise<void>,
  ): Promise<void> {
    for (const name of await this.readDirIfAny(dir)) {
      const full = joinPath(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      const info = await this.fs.stat(full);
      if (info?.isDirectory) await this.walk(full, rel, visit);
      else if (info) await visit(rel, info.size);
    }
  }

  /** The running download of `file`, started if there is none. */
  private join(file: RemoteFile): Download {
    const path = this.localPath(file);
    const running = this.downloads.get(path);
    if (running && !running.controller.signal.aborted) {
      running.waiters += 1;
      return running;
    }
    // A cancelled download may still be unwinding (its last chunk going to the .part file):
    // start the new one after it, so there is never more than one writer.
    const previous = running ? running.promise.then(noop, noop) : Promise.resolve();
    const controller = new AbortController();
    const download: Download = {
      controller,
      bytes: 0,
      waiters: 1,
      listeners: new Set(),
      promise: Promise.resolve(''),
    };
    const setBytes = (bytes: number) => {
      download.bytes = bytes;
      download.listeners.forEach((listener) => listener());
    };
    const promise = previous
      .then(() => this.download(file, path, controller.signal, setBytes))
      .finally(() => {
        if (this.downloads.get(path) === download) this.downloads.delete(path);
      });
    promise.catch(() => {});
    Object.assign(download, { promise });
    this.downloads.set(path, download);
    return download;
  }

  private async download(
    file: RemoteFile,
    path: string,
    signal: AbortSignal,
    setBytes: (bytes: number) => void,
  ): Promise<string> {
    if (await this.isVerified(file, path)) {
      setBytes(file.size);
      return path;
    }
    const part = path + PART_SUFFIX;
    const url = this.url(file);
    await this.fs.mkdir(dirname(path));
    const { resumed } = await this.fillPart(file, part, url, signal, setBytes);
    let problem = await this.integrityProblem(file, part);
    if (problem !== null && resumed) {
      // Bytes from several responses (or an earlier session) that do not add up point at the
      // data, not at the registry: start over once from zero.
      await this.fs.remove(part);
      await this.fillPart(file, part, url, signal, setBytes);
      problem = await this.integrityProblem(file, part);
    }
    if (problem !== null) {
      await this.fs.remove(part);
      throw new ExecutorchError(
        'checksum_mismatch',
        `The file downloaded from ${url} is a corrupt file: ${problem}` +
          `${resumed ? ', also when downloaded again from zero' : ''}. It was deleted; the ` +
          'repository or the registry is wrong, so retrying will not help until they agree.',
        { url },
      );
    }
    await this.fs.rename(part, path);
    await this.remember(file, path);
    setBytes(file.size);
    return path;
  }

  /**
   * Requests `file` until `part` holds `file.size` bytes (or more). Returns whether any bytes
   * came from an earlier request or session; throws `download_failed` or `download_cancelled`.
   */
  private async fillPart(
    file: RemoteFile,
    part: string,
    url: string,
    signal: AbortSignal,
    setBytes: (bytes: number) => void,
  ): Promise<{ resumed: boolean }> {
    let resumed = false;
    let failuresWithoutProgress = 0;
    for (let attempt = 1; ; attempt += 1) {
      let offset = (await this.fs.stat(part))?.size ?? 0;
      if (offset > file.size) {
        await this.fs.remove(part);
        offset = 0;
      }
      setBytes(offset);
      // Bytes already in the part came from an earlier request or session.
      resumed ||= offset > 0;
      if (offset === file.size) return { resumed };
      const result = await this.request(url, part, offset, signal, setBytes);
      if (result.ok && ((await this.fs.stat(part))?.size ?? 0) >= file.size) return { resumed };
      const failure = result.ok ? { reason: 'the response ended early' } : result;
      if (attempt >= this.maxAttempts) {
        const status = 'status' in failure ? failure.status : undefined;
        throw new ExecutorchError(
          'download_failed',
          `Downloading ${url} failed ${attempt} times (last: ${failure.reason}). Check the ` +
            'network connection and try again later; the downloaded part is kept and will be ' +
            'resumed.',
          { url, status },
        );
      }
      const progressed = ((await this.fs.stat(part))?.size ?? 0) > offset;
      failuresWithoutProgress = progressed ? 0 : failuresWithoutProgress + 1;
      const waitMs = 'waitMs' in failure ? failure.waitMs : undefined;
      await sleep(retryDelayMs(this.retry, failuresWithoutProgress, waitMs), signal);
      if (signal.aborted) throw cancelledError();
    }
  }

  /**
   * One request for the rest of `part`, aborted after `idleTimeoutMs` without data. Transient
   * failures come back as values; a cancel or an answer that retrying cannot fix throws.
   */
  private async request(
    url: string,
    part: string,
    offset: number,
    signal: AbortSignal,
    setBytes: (bytes: number) => void,
  ): Promise<Attempt> {
    const controller = new AbortController();
    const cancel = () => controller.abort();
    signal.addEventListener('abort', cancel);
    let idle = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const rearm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        idle = true;
        controller.abort();
      }, this.idleTimeoutMs);
    };
    rearm();
    let result: HttpDownloadResult;
    try {
      result = await this.http.download({
        url,
        destination: part,
        offset,
        signal: controller.signal,
        onProgress: (bytes) => {
          rearm();
          setBytes(bytes);
        },
      });
    } catch (error) {
      if (signal.aborted) throw cancelledError();
      const reason = idle ? `no data for ${this.idleTimeoutMs} ms` : String(error);
      return { ok: false, reason };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', cancel);
    }
    const { status } = result;
    if (status === 200 || status === 206) return { ok: true };
    if (status === 416) {
      // The part no longer matches what the server has; download it again.
      await this.fs.remove(part);
      return { ok: false, reason: 'HTTP 416', status };
    }
    if (isTransientStatus(status)) {
      return { ok: false, reason: `HTTP ${status}`, status, waitMs: retryAfterMs(result.retryAfter) };
    }
    const hint =
      status === 404
        ? 'The file is not in the repository at this revision: the registry and the ' +
          'published repository disagree.'
        : status === 401 || status === 403
          ? 'The repository is private or gated.'
          : 'Retrying will not help; check the URL.';
    throw new ExecutorchError('download_failed', `GET ${url} answered HTTP ${status}. ${hint}`, {
      url,
      status,
    });
  }

  /** Why `part` is not the registry's file (size first, then sha256), or null when it is. */
  private async integrityProblem(file: RemoteFile, part: string): Promise<string | null> {
    const size = (await this.fs.stat(part))?.size ?? 0;
    if (size !== file.size) return `its size is ${size} bytes, the registry says ${file.size}`;
    const sha = (await this.fs.sha256(part)).toLowerCase();
    return sha === file.sha256.toLowerCase()
      ? null
      : `its sha256 is ${sha}, the registry says ${file.sha256}`;
  }

  /**
   * True when the file at `path` is the registry's: hashed now, or earlier with the same size,
   * mtime and expected sha256 (its `.verified` mark). Anything else there is removed.
   */
  private async isVerified(file: RemoteFile, path: string): Promise<boolean> {
    const info = await this.fs.stat(path);
    if (!info) return false;
    if (!info.isDirectory && info.size === file.size) {
      if (await this.isRemembered(file, path, info)) return true;
      if ((await this.integrityProblem(file, path)) === null) {
        await this.remember(file, path);
        return true;
      }
    }
    // Damaged or replaced since it was verified: download it again.
    await this.fs.remove(path);
    await this.fs.remove(path + VERIFIED_SUFFIX);
    return false;
  }

  /**
   * A mark vouches for the file only when it was written in a later clock tick than the file's
   * last change. Filesystems stamp mtimes from a coarse clock (a few ms on Linux, 2 s on FAT), so
   * a file rewritten in the tick it was hashed in keeps its size and mtime; such a "racy" mark
   * is ignored and the file hashed again (git's racy-index rule).
   */
  private async isRemembered(file: RemoteFile, path: string, info: FileInfo): Promise<boolean> {
    const mark = path + VERIFIED_SUFFIX;
    const markInfo = await this.fs.stat(mark);
    if (!markInfo || markInfo.mtimeMs <= info.mtimeMs) return false;
    try {
      const saved = JSON.parse(await this.fs.readText(mark)) as Record<string, unknown>;
      return (
        saved.size === info.size &&
        saved.mtimeMs === info.mtimeMs &&
        saved.sha256 === file.sha256.toLowerCase()
      );
    } catch {
      return false; // An unreadable mark: hash again.
    }
  }

  /**
   * Writes the `.verified` mark. Best effort: without it the file is only hashed again. A file
   * changed moments ago gets its mark after a short wait, so the mark lands in a later mtime
   * tick than the file and is not racy (see `isRemembered`).
   */
  private async remember(file: RemoteFile, path: string): Promise<void> {
    try {
      const info = await this.fs.stat(path);
      if (!info) return;
      const wait = info.mtimeMs + RACY_WINDOW_MS - Date.now();
      if (wait > 0) await new Promise<void>((done) => setTimeout(() => done(), Math.min(wait, RACY_WINDOW_MS)));
      const mark = { size: info.size, mtimeMs: info.mtimeMs, sha256: file.sha256.toLowerCase() };
      await this.fs.writeText(path + VERIFIED_SUFFIX, JSON.stringify(mark));
    } catch {
      // A full disk or a read-only folder (bundled files).
    }
  }
}
