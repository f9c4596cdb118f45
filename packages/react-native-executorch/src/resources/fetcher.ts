import { AssistantUnavailableError, ExecutorchError, type VariantRef } from '../errors';
import {
  models,
  type AnyLLMDescriptor,
  type AssistantDescriptor,
  type Backend,
  type MediaCapability,
  type PublishedFile,
  type VariantDescriptor,
} from '../models';
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
  /** Pauses and resumes this fetch (see {@link DownloadControl}). */
  readonly control?: DownloadControl;
  /**
   * The fetch's bytes, rate and time left: at each whole permille of progress, and at once on a
   * pause and a resume.
   */
  readonly onStatus?: (status: DownloadStatus) => void;
}

/** Which files of a variant a model needs. */
export interface ModelFileOptions {
  /**
   * The variant's program with the assistant drafter instead of its plain program
   * (`LLMOptions.assistant`). Default false: the assistant's program is never fetched.
   */
  readonly assistant?: boolean;
}

/** Where a fetch stands ({@link FetchOptions.onStatus}). */
export interface DownloadStatus {
  /** 0..1, the value `onProgress` gets. */
  readonly progress: number;
  /** Bytes of the requested files on the device (complete files and parts). */
  readonly bytesDone: number;
  /** The registry's sizes of the requested files, summed. */
  readonly bytesTotal: number;
  /** Over the last {@link RATE_WINDOW_MS}; 0 while paused or before there are two samples. */
  readonly bytesPerSecond: number;
  /** `(bytesTotal - bytesDone) / bytesPerSecond`; null while paused or when the rate is 0. */
  readonly secondsLeft: number | null;
  readonly paused: boolean;
}

/** The window of {@link DownloadStatus.bytesPerSecond}. */
export const RATE_WINDOW_MS = 5000;

/**
 * Pauses and resumes fetches it is passed to (`FetchOptions.control`, `LoadOptions.download`).
 * `pause()` stops the fetch's downloads once they stopped writing (the `.part` files are kept;
 * a download another fetch also waits for goes on for that one); the fetch stays pending, its
 * progress where it was. `resume()` continues with HTTP Range requests from the parts. Aborting
 * the fetch's `signal` while paused rejects it with `download_cancelled` as usual.
 */
export class DownloadControl {
  private pausedNow = false;
  private readonly listeners = new Set<() => void>();

  get paused(): boolean {
    return this.pausedNow;
  }

  pause(): void {
    this.set(true);
  }

  resume(): void {
    this.set(false);
  }

  /** Calls `listener` after every change between paused and running; returns its removal. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private set(paused: boolean): void {
    if (paused === this.pausedNow) return;
    this.pausedNow = paused;
    [...this.listeners].forEach((listener) => listener());
  }
}

/** Resolves when `control` is running again; rejects with `download_cancelled` when `signal` aborts. */
function resumed(control: DownloadControl, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: ExecutorchError) => {
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve();
    };
    const onAbort = () => done(cancelledError());
    const unsubscribe = control.subscribe(() => {
      if (!control.paused) done();
    });
    signal?.addEventListener('abort', onAbort);
    if (signal?.aborted) onAbort();
    else if (!control.paused) done();
  });
}

/**
 * Turns the bytes of a fetch into `onProgress` steps and `onStatus` reports, across the pauses
 * of one fetch: after a resume nothing below the value at the pause is reported (the parts are
 * kept, so the bytes come back at once).
 */
class ProgressMeter {
  private lastStep = -1;
  private floor = 0;
  private done = 0;
  private samples: { at: number; bytes: number }[] = [];

  constructor(
    private readonly total: number,
    private readonly options: FetchOptions,
  ) {}

  update(bytes: number): void {
    const done = Math.max(bytes, this.floor);
    const now = Date.now();
    // A download restarted from zero: the rate starts over.
    if (done < this.done) this.samples = [];
    this.done = done;
    this.samples.push({ at: now, bytes: done });
    while (this.samples.length > 2 && this.samples[1]!.at <= now - RATE_WINDOW_MS) this.samples.shift();
    const step = Math.floor(this.progress() * 1000);
    if (step === this.lastStep) return;
    this.lastStep = step;
    this.options.onProgress?.(step / 1000);
    this.status(false);
  }

  /** At a pause: the rate is 0 and the progress stays; on a resume the rate starts over. */
  paused(paused: boolean): void {
    this.floor = this.done;
    this.samples = [];
    this.status(paused);
  }

  private progress(): number {
    return this.total > 0 ? Math.min(this.done, this.total) / this.total : 1;
  }

  private status(paused: boolean): void {
    if (!this.options.onStatus) return;
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    const span = first && last ? last.at - first.at : 0;
    const bytesPerSecond = paused || span <= 0 ? 0 : Math.max(0, ((last!.bytes - first!.bytes) * 1000) / span);
    const left = Math.max(0, this.total - this.done);
    this.options.onStatus({
      progress: Math.floor(this.progress() * 1000) / 1000,
      bytesDone: this.done,
      bytesTotal: this.total,
      bytesPerSecond,
      secondsLeft: bytesPerSecond > 0 ? left / bytesPerSecond : left === 0 && !paused ? 0 : null,
      paused,
    });
  }
}

/** Local paths of the files a model needs. */
export interface ModelFiles {
  readonly modelPath: string;
  readonly tokenizerPath: string;
  /** The file that holds the chat template (`tokenizer_config.json`). */
  readonly chatTemplatePath: string;
  /**
   * The vision encoder (models with the `vision` capability). Absent: the model is loaded
   * without it and takes no images.
   */
  readonly visionEncoderPath?: string;
  /** The audio encoder (models with the `audio` capability); absent: no audio. */
  readonly audioEncoderPath?: string;
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
   * A request whose average rate over the last `rateWindowMs` is below this is aborted and
   * counts as a failed attempt (a trickle of bytes keeps the idle timer alive; this does not).
   * 0 turns the check off. Default 1024 bytes/s.
   */
  readonly minBytesPerSecond?: number;
  /**
   * The sliding window of `minBytesPerSecond`. Default 20 000 ms: long enough for a phone's
   * connection to recover from a dip, short enough that a trickle is noticed in seconds.
   */
  readonly rateWindowMs?: number;
  /**
   * Requests in a row aborted for being below `minBytesPerSecond` before the download fails with
   * `download_too_slow` (a second one confirms the first was not a dip). With the defaults a
   * trickle ends after about 2 x 20 s, where it took 4 x 60 s before. Default 2.
   */
  readonly maxSlowAttempts?: number;
  /**
   * Overall deadline of one file's download (all its attempts and waits):
   * `deadlineGraceMs + size / deadlineBytesPerSecond`. Past it the download stops with
   * `download_too_slow` (the part is kept). Defaults: 300 000 ms and 16 384 bytes/s.
   */
  readonly deadlineGraceMs?: number;
  readonly deadlineBytesPerSecond?: number;
  /**
   * Wait before retrying a request that failed without receiving data (HTTP 5xx, 429, no
   * connection); doubles with each such failure in a row. Default 1000 ms.
   */
  readonly retryDelayMs?: number;
  /** Upper bound of every retry wait, a server's `Retry-After` included. Default 30 000 ms. */
  readonly maxRetryDelayMs?: number;
  /**
   * A `<path>.lock` (the inter-process download lock) not refreshed for this long belongs to a
   * fetcher that died and is taken over: its mtime is older than this, further than this in the
   * future (a clock set back), or it stays unchanged this long while a fetcher waits on it. Its
   * owner refreshes it every third of this. Default 30 000 ms.
   */
  readonly lockStaleMs?: number;
  /** How often a fetcher waiting for another one's download looks again. Default 250 ms. */
  readonly lockPollMs?: number;
}

const PART_SUFFIX = '.part';
/**
 * Beside a verified file: what was hashed (size, mtime, identity, sha256 and sampled block
 * hashes), so it is hashed in full once and only sampled on later loads.
 */
const VERIFIED_SUFFIX = '.verified';
/** Beside a file being downloaded: who downloads it (see `acquireLock`). */
const LOCK_SUFFIX = '.lock';
/** Longer than the mtime clock tick of common filesystems other than FAT (ext4, APFS, f2fs). */
const RACY_WINDOW_MS = 25;
const MARK_VERSION = 2;
/** A mark is a few hundred bytes; anything bigger was not written by this fetcher. */
const MAX_MARK_BYTES = 64 * 1024;
/** Sampled re-check of a remembered file: the first, the last and this many random blocks. */
const SAMPLE_BLOCK_BYTES = 64 * 1024;
const RANDOM_SAMPLES = 8;
/** Bounds of a cache walk: a loop or a planted tree cannot make listing run forever. */
const MAX_WALK_DEPTH = 32;
const MAX_WALK_ENTRIES = 100_000;

/** Lock files held by fetchers of this JS runtime (the in-process half of the download lock). */
const heldLocks = new Set<string>();

/** How one request for a file ended. */
type Attempt =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly reason: string;
      readonly status?: number;
      readonly waitMs?: number;
      /** Aborted for going below `minBytesPerSecond`. */
      readonly slow?: boolean;
    };

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

/** One file's download once started: the state its steps share. */
interface Run {
  readonly file: RemoteFile;
  readonly path: string;
  readonly url: string;
  /** Aborted when every requester cancelled or the deadline passed. */
  readonly signal: AbortSignal;
  readonly deadlineMs: number;
  expired: boolean;
  setBytes(bytes: number): void;
}

function noop(): void {}

/**
 * A gap between two ticks of a timer longer than this means the JavaScript thread did not run:
 * iOS suspends a backgrounded app while its background transfer goes on, and on return every
 * timer is overdue at once. Such a gap is not time the download was watched.
 */
const SUSPENDED_GAP_MS = 1000;

/** The gap between two ticks of a `tickMs` timer past which the thread is taken as suspended. */
function suspendedGapMs(tickMs: number): number {
  return Math.max(SUSPENDED_GAP_MS, 4 * tickMs);
}

/**
 * A timeout that counts only the time this thread ran (gaps past {@link suspendedGapMs} count
 * as one tick), so a suspension never reads as a stalled, slow or late download. `onGap` hears
 * of each such gap.
 */
class AwakeTimeout {
  private awakeMs = 0;
  private last = Date.now();
  private readonly handle: ReturnType<typeof setInterval>;

  constructor(
    private readonly ms: number,
    onExpire: () => void,
    onGap: () => void = noop,
  ) {
    const tick = Math.max(10, Math.min(1000, ms / 8));
    const gapLimit = suspendedGapMs(tick);
    this.handle = setInterval(() => {
      const now = Date.now();
      const gap = now - this.last;
      this.last = now;
      if (gap > gapLimit) onGap();
      this.awakeMs += gap > gapLimit ? tick : gap;
      if (this.awakeMs >= this.ms) {
        this.clear();
        onExpire();
      }
    }, tick);
  }

  /** Starts counting again from zero (data arrived). */
  restart(): void {
    this.awakeMs = 0;
    this.last = Date.now();
  }

  clear(): void {
    clearInterval(this.handle);
  }
}

/** Throws `invalid_path` when `file`'s repo, revision or path could leave its folder. */
function checkedFile(file: RemoteFile): void {
  checkedRepoRevision(file.repo, file.revision);
  checkedRelativePath(file.path, 'file path');
}

function cancelledError(): ExecutorchError {
  return new ExecutorchError('download_cancelled', 'The download was cancelled.');
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** How the platforms word a full disk or quota (Node errno codes, Android and iOS messages). */
const DISK_FULL_MESSAGE =
  /\b(ENOSPC|EDQUOT)\b|no space left|not enough (free )?space|out of space|quota exceeded|disk (is )?full/i;

function isDiskFull(error: unknown): boolean {
  const code = errnoOf(error);
  if (code === 'ENOSPC' || code === 'EDQUOT') return true;
  return DISK_FULL_MESSAGE.test(error instanceof Error ? error.message : String(error));
}

/** Errno codes that say a download failed on the disk, not on the network: retrying cannot help. */
const FILESYSTEM_ERRNOS = new Set([
  'EACCES', 'EPERM', 'EROFS', 'EISDIR', 'ENOTDIR', 'ELOOP', 'ENXIO', 'EEXIST', 'EMLINK',
  'ENAMETOOLONG', 'EIO', 'EBADF', 'EMFILE', 'ENFILE', 'EINVAL', 'ENOTEMPTY',
]);

function diskFullError(path: string, cause: unknown): ExecutorchError {
  return new ExecutorchError(
    'disk_full',
    `No space left on the device (or the storage quota is used up) while writing ${path}. The ` +
      'partial download was deleted so it does not keep the space; free up space (e.g. ' +
      'deleteCachedModel for models you no longer need) and fetch again.',
    { path, cause },
  );
}

/** Any failure of a filesystem call, as an ExecutorchError that says what to do. */
function storageError(what: string, path: string, cause: unknown): ExecutorchError {
  if (cause instanceof ExecutorchError) return cause;
  if (isDiskFull(cause)) return diskFullError(path, cause);
  const message = cause instanceof Error ? cause.message : String(cause);
  return new ExecutorchError(
    'storage_error',
    `Could not ${what} ${path}: ${message}. Check that the app may read and write there; ` +
      'deleting the cached model (deleteCachedModel) or the cache folder resets the cache.',
    { path, cause },
  );
}

/** `fs` whose every call rejects with an ExecutorchError (`disk_full`, `storage_error`). */
function typedFileSystem(fs: FileSystemAdapter): FileSystemAdapter {
  function guard<A extends unknown[], R>(
    what: string,
    op: (path: string, ...rest: A) => Promise<R>,
  ): (path: string, ...rest: A) => Promise<R> {
    return async (path, ...rest) => {
      try {
        return await op.call(fs, path, ...rest);
      } catch (error) {
        throw storageError(what, path, error);
      }
    };
  }
  const optional = <A extends unknown[], R>(
    what: string,
    op: ((path: string, ...rest: A) => Promise<R>) | undefined,
  ) => (typeof op === 'function' ? guard(what, op) : undefined);
  return {
    documentDirectory: fs.documentDirectory,
    stat: guard('inspect', fs.stat),
    mkdir: guard('create the folder', fs.mkdir),
    rename: guard('rename', fs.rename),
    remove: guard('delete', fs.remove),
    readDir: guard('list', fs.readDir),
    readText: guard('read', fs.readText),
    writeText: guard('write', fs.writeText),
    sha256: guard('hash', fs.sha256),
    sha256Range: optional('hash', fs.sha256Range),
    createExclusive: optional('create', fs.createExclusive),
    realpath: optional('resolve', fs.realpath),
    freeBytes: optional('measure the free space of', fs.freeBytes),
  };
}

/** A regular file (adapters that cannot tell report files and directories only). */
function isRegular(info: FileInfo): boolean {
  return !info.isDirectory && (info.type === undefined || info.type === 'file');
}

/** A real directory, not a link to one. */
function isRealDirectory(info: FileInfo): boolean {
  return info.isDirectory && (info.type === undefined || info.type === 'directory');
}

function randomToken(): string {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

/** Blocks `[start, end)` re-hashed on later loads: the first, the last and some at random. */
function sampleBlocks(size: number): [number, number][] {
  const blocks = Math.ceil(size / SAMPLE_BLOCK_BYTES);
  const chosen = new Set<number>([0, blocks - 1]);
  if (blocks <= RANDOM_SAMPLES + 2) for (let i = 0; i < blocks; i += 1) chosen.add(i);
  while (chosen.size < Math.min(blocks, RANDOM_SAMPLES + 2)) {
    chosen.add(Math.floor(Math.random() * blocks));
  }
  return [...chosen]
    .filter((i) => i >= 0)
    .sort((a, b) => a - b)
    .map((i) => [i * SAMPLE_BLOCK_BYTES, Math.min(size, (i + 1) * SAMPLE_BLOCK_BYTES)]);
}

/** A published file's own fields, without its entry's others (status, source). */
function pick({ path, sha256, size }: PublishedFile): PublishedFile {
  return { path, sha256, size };
}

/**
 * Downloads published model files into the app's documents directory and hands out local paths
 * only for complete, verified files.
 *
 * Layout: `<cacheDirectory>/<repo>/<revision>/<path>`; repo, revision and path are checked to
 * stay inside the cache (`invalid_path`), and no symbolic link below the cache root is followed
 * for anything written or deleted. A file is written as `<path>.part` (never past the registry's
 * size), resumed with HTTP Range when a connection drops, stalls, trickles or a fetch is
 * cancelled, retried with backoff on HTTP 5xx/429, checked against the registry's size and
 * sha256 (a resumed file that fails is downloaded again from zero, once), and only then renamed
 * to `<path>`. A file found at its final name is hashed once and remembered (`<path>.verified`,
 * bound to the file's identity and re-checked by sampled hashes), so what this returns is always
 * a verified file. Concurrent requests for the same file share one download: in one fetcher
 * directly, between fetchers and processes through `<path>.lock`.
 */
export class ResourceFetcher {
  private readonly fs: FileSystemAdapter;
  private readonly http: HttpAdapter;
  private readonly baseUrl: string;
  private readonly maxAttempts: number;
  private readonly idleTimeoutMs: number;
  private readonly minBytesPerSecond: number;
  private readonly rateWindowMs: number;
  private readonly maxSlowAttempts: number;
  private readonly deadlineGraceMs: number;
  private readonly deadlineBytesPerSecond: number;
  private readonly lockStaleMs: number;
  private readonly lockPollMs: number;
  private readonly retry: RetryPolicy;
  readonly cacheDirectory: string;
  private readonly downloads = new Map<string, Download>();

  constructor(options: ResourceFetcherOptions) {
    this.fs = typedFileSystem(options.fs);
    this.http = options.http;
    this.baseUrl = (options.baseUrl ?? 'https://huggingface.co').replace(/\/+$/, '');
    this.maxAttempts = options.maxAttempts ?? 4;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
    this.minBytesPerSecond = options.minBytesPerSecond ?? 1024;
    this.rateWindowMs = options.rateWindowMs ?? 20_000;
    this.maxSlowAttempts = Math.max(1, options.maxSlowAttempts ?? 2);
    this.deadlineGraceMs = options.deadlineGraceMs ?? 300_000;
    this.deadlineBytesPerSecond = options.deadlineBytesPerSecond ?? 16_384;
    this.lockStaleMs = options.lockStaleMs ?? 30_000;
    this.lockPollMs = options.lockPollMs ?? 250;
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
   * The variant's program with the assistant drafter. Throws {@link AssistantUnavailableError}
   * (naming the variants that have one) when the `backend` variant of `model` has none.
   */
  static assistantOf(
    model: AnyLLMDescriptor,
    backend: string,
    asked = 'be loaded with assistant: true',
  ): AssistantDescriptor {
    const found = ResourceFetcher.variantOf(model, backend).assistant;
    if (found !== undefined) return found;
    const having = ResourceFetcher.variantsWithAssistant(model);
    throw new AssistantUnavailableError(
      `${model.name} has no assistant drafter for its ${backend} variant, so it cannot ${asked}. ` +
        (having.length
          ? `Variants with one: ${having.map((v) => `${v.model} (${v.backend})`).join(', ')}. `
          : 'No model of this registry has one. ') +
        "Load without it, or use speculative: { drafter: 'promptLookup' }.",
      having,
    );
  }

  /** The variants with an assistant drafter: `model`'s, then the rest of the registry's. */
  static variantsWithAssistant(model: AnyLLMDescriptor): VariantRef[] {
    const all = [model, ...Object.values(models.llm).filter((m) => m.id !== model.id)] as AnyLLMDescriptor[];
    return all.flatMap((m) =>
      (Object.values(m.variants) as VariantDescriptor[])
        .filter((v) => v.assistant !== undefined)
        .map((v) => ({ model: m.id, backend: v.backend })),
    );
  }

  private static variantOf(model: AnyLLMDescriptor, backend: string): VariantDescriptor {
    const variant = (model.variants as Partial<Record<string, VariantDescriptor>>)[backend];
    if (variant === undefined) {
      throw new ExecutorchError(
        'backend_unavailable',
        `${model.name} ships no ${backend} variant (it ships ${Object.keys(model.variants).join(', ')}).`,
        { alternatives: Object.keys(model.variants) as Backend[] },
      );
    }
    return variant;
  }

  /**
   * The remote files `model` needs to run on `backend`: the variant's (its program with the
   * assistant drafter in place of its own with `assistant`), the tokenizer's and each published
   * encoder (an unpublished one is left out: the model then loads without it). Throws
   * `model_unpublished` when the program or the tokenizer has no published checksums (nothing is
   * downloaded then), and {@link AssistantUnavailableError} for an assistant the variant lacks.
   */
  static filesOf(model: AnyLLMDescriptor, backend: string, options: ModelFileOptions = {}): RemoteFile[] {
    const variant = ResourceFetcher.variantOf(model, backend);
    const assistant = options.assistant ? ResourceFetcher.assistantOf(model, backend) : undefined;
    const sets = [
      [`its ${backend} variant`, variant, variant.files],
      ...(assistant ? [[`its ${backend} variant's assistant drafter`, assistant, [assistant]] as const] : []),
      ['its tokenizer', model.tokenizer, model.tokenizer.files],
    ] as const;
    for (const [what, set, files] of sets) {
      if (set.status !== 'published') {
        throw new ExecutorchError(
          'model_unpublished',
          `${model.name}: ${what} is not published yet (the registry has no checksums for ` +
            `${files.map((f) => f.path).join(', ')}), so it cannot be downloaded and ` +
            'verified. Use a published model or a registry version that publishes it.',
        );
      }
    }
    const { repo, revision } = model.hf;
    const encoders = Object.values(variant.encoders ?? {}).flatMap((e) => (e.status === 'published' ? [pick(e)] : []));
    // The program first (roles reads it there): the assistant's replaces the variant's own, the
    // one .pte among its files.
    const isProgram = (f: { path: string }) => f.path.endsWith('.pte');
    const program = assistant ? [pick(assistant as PublishedFile)] : variant.files.filter(isProgram);
    const own = variant.files.filter((f) => !isProgram(f));
    const published = [...program, ...own, ...model.tokenizer.files, ...encoders] as PublishedFile[];
    return published.map((f) => ({ ...f, repo, revision }));
  }

  /**
   * Downloads (or finds in the cache) everything `model` needs on `backend` and returns the
   * local paths. See {@link ResourceFetcher.fetchFiles} for progress and cancellation.
   */
  async fetchModel(
    model: AnyLLMDescriptor,
    backend: string,
    options: FetchOptions & ModelFileOptions = {},
  ): Promise<ModelFiles> {
    const files = ResourceFetcher.filesOf(model, backend, options);
    const roles = ResourceFetcher.roles(model, backend, files);
    const paths = await this.fetchFiles(files, options);
    return Object.fromEntries(
      Object.entries(roles).flatMap(([role, index]) => (index === undefined ? [] : [[role, paths[index]!]])),
    ) as unknown as ModelFiles;
  }

  /**
   * Checks files already on the device (`localFiles`) against the registry before their first
   * load, when the registry publishes checksums for `model` on `backend` (otherwise there is
   * nothing to check against and it returns). Each file is hashed in full once: a `.verified`
   * mark beside it remembers it while its size, mtime and identity stay the same and its sampled
   * blocks still hash the same (where the folder is writable). Throws `not_found` for a missing
   * or non-regular file and `checksum_mismatch` for a corrupt one, which is left in place: it is
   * the caller's. An encoder is checked when `local` names it and the registry publishes it.
   * With `assistant`, `local.modelPath` is checked as the variant's program with the assistant
   * drafter (when the registry publishes that).
   */
  async verifyLocalFiles(
    model: AnyLLMDescriptor,
    backend: string,
    local: ModelFiles,
    options: ModelFileOptions = {},
  ): Promise<void> {
    const variant = ResourceFetcher.variantOf(model, backend);
    const assistant = options.assistant ? ResourceFetcher.assistantOf(model, backend) : undefined;
    if (variant.status !== 'published' || model.tokenizer.status !== 'published') return;
    if (assistant && assistant.status !== 'published') return;
    const files = ResourceFetcher.filesOf(model, backend, options);
    const roles = ResourceFetcher.roles(model, backend, files);
    for (const role of Object.keys(roles) as (keyof ModelFiles)[]) {
      const file = files[roles[role]!]!;
      // The caller's files may be links (the cache's never are): check what they point at.
      const given = local[role];
      if (given === undefined) continue; // an encoder the app does not use
      let path = given;
      let info = await this.fs.stat(path);
      if (info?.type === 'link' && this.fs.realpath) {
        path = await this.fs.realpath(path).catch(() => path);
        info = await this.fs.stat(path);
      }
      if (!info || !isRegular(info)) {
        throw new ExecutorchError(
          'not_found',
          `${given} (${model.name}, ${file.path}) is not a regular file. Pass the path of ` +
            'the downloaded file itself.',
          { path: given },
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

  /**
   * Which of `files` (from {@link filesOf}) are the model, the tokenizer, the chat template and
   * the published encoders.
   */
  private static roles(
    model: AnyLLMDescriptor,
    backend: string,
    files: readonly RemoteFile[],
  ): Record<'modelPath' | 'tokenizerPath' | 'chatTemplatePath', number> &
    Record<'visionEncoderPath' | 'audioEncoderPath', number | undefined> {
    const find = (pred: (f: RemoteFile, i: number) => boolean, what: string): number => {
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
    const encoders = (model.variants as Partial<Record<string, VariantDescriptor>>)[backend]?.encoders ?? {};
    const encoder = (kind: MediaCapability): number | undefined => {
      const spec = encoders[kind];
      if (spec?.status !== 'published') return undefined;
      return files.findIndex((f) => f.path === spec.path);
    };
    return {
      // filesOf lists the program (the variant's or its assistant's) first.
      modelPath: find((f, i) => i === 0 && f.path.endsWith('.pte'), '.pte file'),
      tokenizerPath: find((f) => base(f.path) === 'tokenizer.json', 'tokenizer.json'),
      chatTemplatePath: find(
        (f) => base(f.path) === model.tokenizer.chatTemplate,
        model.tokenizer.chatTemplate,
      ),
      visionEncoderPath: encoder('vision'),
      audioEncoderPath: encoder('audio'),
    };
  }

  /**
   * Makes every file available locally and returns their paths, in order. Progress is one value
   * 0..1 over all files (cached files count as done). Cancelling rejects this call with
   * `download_cancelled`; a download shared with another fetch continues for that one. With
   * `control`, the fetch pauses and resumes (see {@link DownloadControl}).
   */
  async fetchFiles(files: readonly RemoteFile[], options: FetchOptions = {}): Promise<string[]> {
    const { signal, control } = options;
    if (signal?.aborted) throw cancelledError();
    // Every path is checked before any download starts.
    files.forEach((f) => this.localPath(f));
    const meter = new ProgressMeter(
      files.reduce((sum, f) => sum + f.size, 0),
      options,
    );
    if (!control) return this.fetchFilesOnce(files, signal, meter);
    for (;;) {
      if (control.paused) await resumed(control, signal);
      const attempt = new AbortController();
      let pausedHere = false;
      const stop = () => attempt.abort();
      signal?.addEventListener('abort', stop);
      const unsubscribe = control.subscribe(() => {
        if (!control.paused) return;
        pausedHere = true;
        attempt.abort();
      });
      try {
        if (signal?.aborted || control.paused) {
          pausedHere = !signal?.aborted;
          throw cancelledError();
        }
        return await this.fetchFilesOnce(files, attempt.signal, meter);
      } catch (error) {
        // Stopped by the pause (and its downloads no longer writing): wait for the resume.
        if (!pausedHere || signal?.aborted || !(error instanceof ExecutorchError) || error.code !== 'download_cancelled') {
          throw error;
        }
        meter.paused(true);
        await resumed(control, signal);
        meter.paused(false);
      } finally {
        unsubscribe();
        signal?.removeEventListener('abort', stop);
      }
    }
  }

  private async fetchFilesOnce(
    files: readonly RemoteFile[],
    signal: AbortSignal | undefined,
    meter: ProgressMeter,
  ): Promise<string[]> {
    if (signal?.aborted) throw cancelledError();
    const joined = files.map((f) => this.join(f));
    const report = () => meter.update(joined.reduce((sum, d, i) => sum + Math.min(d.bytes, files[i]!.size), 0));
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
      const stopped: Promise<unknown>[] = [];
      for (const d of joined) {
        d.listeners.delete(report);
        d.waiters -= 1;
        // The last fetch waiting for a running download gave up: stop it (the .part stays).
        if (d.waiters === 0 && signal?.aborted) {
          d.controller.abort();
          stopped.push(d.promise.then(noop, noop));
        }
      }
      // A stopped download may still be writing its last chunk: once this call settles, none
      // of its files change, so the caller may delete or reuse them.
      await Promise.all(stopped);
    }
  }

  /** Reads a (downloaded or local) text file, e.g. the tokenizer config. */
  readText(path: string): Promise<string> {
    return this.fs.readText(path);
  }

  /**
   * The models in the cache, with their files and sizes. Symbolic links and special files are
   * neither followed nor listed; unreadable folders are skipped; the walk is bounded in depth
   * and entries, so a planted loop or tree cannot make it run forever.
   */
  async listCachedModels(): Promise<CachedModel[]> {
    const result: CachedModel[] = [];
    const budget = { entries: MAX_WALK_ENTRIES };
    for (const owner of await this.entries(this.cacheDirectory, budget, true)) {
      const ownerDir = joinPath(this.cacheDirectory, owner);
      for (const name of await this.entries(ownerDir, budget)) {
        const repoDir = joinPath(ownerDir, name);
        for (const revision of await this.entries(repoDir, budget)) {
          const files: { path: string; size: number }[] = [];
          let sizeBytes = 0;
          await this.walk(joinPath(repoDir, revision), '', 0, budget, (path, info) => {
            if (path.endsWith(VERIFIED_SUFFIX) || path.endsWith(LOCK_SUFFIX)) return;
            sizeBytes += info.size;
            if (!path.endsWith(PART_SUFFIX)) files.push({ path, size: info.size });
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
   * revision. Refuses (`invalid_argument`) while one of its files is downloading, here or in
   * another fetcher or process; throws `invalid_path` (deleting nothing) when the repo or
   * revision would leave the cache. A symbolic link in the way is removed itself, never
   * followed: nothing outside the cache is deleted.
   */
  async deleteCachedModel(
    target: AnyLLMDescriptor | { readonly repo: string; readonly revision: string },
  ): Promise<void> {
    const { repo, revision } = 'hf' in target ? target.hf : target;
    checkedRepoRevision(repo, revision);
    const dir = joinPath(this.cacheDirectory, repo, revision);
    const busy = () =>
      new ExecutorchError(
        'invalid_argument',
        `${repo}@${revision} is downloading; cancel the download before deleting it.`,
      );
    for (const path of this.downloads.keys()) {
      if (path.startsWith(`${dir}/`)) throw busy();
    }
    let current = this.cacheDirectory;
    const parts = [...repo.split('/'), revision];
    for (const [i, part] of parts.entries()) {
      current = joinPath(current, part);
      const info = await this.fs.stat(current);
      if (!info) return;
      // A link or file where the owner or repo folder belongs: nothing of the model is inside.
      if (i < parts.length - 1 && !isRealDirectory(info)) return;
    }
    const info = await this.fs.stat(dir);
    if (info && isRealDirectory(info) && (await this.hasLiveLock(dir))) throw busy();
    await this.fs.remove(dir);
  }

  /**
   * Sorted names in the folder `path` ([] when it is missing, unreadable, or a link: `root`
   * alone may be one, it is the configured cache). Counts them against `budget`.
   */
  private async entries(path: string, budget: { entries: number }, root = false): Promise<string[]> {
    try {
      const info = await this.fs.stat(path);
      if (!info || (root ? !info.isDirectory && info.type !== 'link' : !isRealDirectory(info))) return [];
      const names = (await this.fs.readDir(path)).slice(0, Math.max(0, budget.entries));
      budget.entries -= names.length;
      return names.sort();
    } catch {
      return [];
    }
  }

  /** Visits the regular files below `dir`, links and special files skipped. */
  private async walk(
    dir: string,
    prefix: string,
    depth: number,
    budget: { entries: number },
    visit: (path: string, info: FileInfo) => void,
  ): Promise<void> {
    for (const name of await this.entries(dir, budget)) {
      const full = joinPath(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      const info = await this.fs.stat(full).catch(() => null);
      if (!info) continue;
      if (isRealDirectory(info)) {
        if (depth < MAX_WALK_DEPTH) await this.walk(full, rel, depth + 1, budget, visit);
      } else if (isRegular(info)) {
        visit(rel, info);
      }
    }
  }

  /** True when a lock below `dir` was refreshed recently: some fetcher is downloading there. */
  private async hasLiveLock(dir: string): Promise<boolean> {
    let live = false;
    await this.walk(dir, '', 0, { entries: MAX_WALK_ENTRIES }, (path, info) => {
      if (path.endsWith(LOCK_SUFFIX) && this.isFresh(info)) live = true;
    });
    return live;
  }

  /**
   * Whether a lock's mtime is recent: within `lockStaleMs` of now on either side. A lock stamped
   * further in the future (a clock set back, a planted file) was not refreshed by a live owner.
   */
  private isFresh(info: FileInfo): boolean {
    return Math.abs(Date.now() - info.mtimeMs) <= this.lockStaleMs;
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
    await this.safeDir(dirname(path));
    if (await this.isVerified(file, path)) {
      setBytes(file.size);
      return path;
    }
    const controller = new AbortController();
    const run: Run = {
      file,
      path,
      url: this.url(file),
      signal: controller.signal,
      deadlineMs: Math.round(this.deadlineGraceMs + (file.size / this.deadlineBytesPerSecond) * 1000),
      expired: false,
      setBytes,
    };
    const cancel = () => controller.abort();
    signal.addEventListener('abort', cancel);
    if (signal.aborted) cancel();
    const deadline = new AwakeTimeout(run.deadlineMs, () => {
      run.expired = true;
      controller.abort();
    });
    try {
      const release = await this.acquireLock(run);
      if (release === null) return path; // Another fetcher downloaded it meanwhile.
      try {
        // It may have finished just before the lock was ours.
        if (await this.isVerified(file, path)) {
          setBytes(file.size);
          return path;
        }
        return await this.downloadLocked(run);
      } finally {
        await release();
      }
    } finally {
      deadline.clear();
      signal.removeEventListener('abort', cancel);
    }
  }

  /** Why `run` stopped: its deadline passed, or every requester cancelled. */
  private stopped(run: Run): ExecutorchError {
    if (!run.expired) return cancelledError();
    return new ExecutorchError(
      'download_too_slow',
      `Downloading ${run.url} did not finish within ${run.deadlineMs} ms (deadlineGraceMs + ` +
        `${run.file.size} bytes at deadlineBytesPerSecond). The downloaded part is kept; try ` +
        'again on a faster connection, or raise the deadline options.',
      { url: run.url },
    );
  }

  private async downloadLocked(run: Run): Promise<string> {
    const { file, path, url } = run;
    const part = path + PART_SUFFIX;
    const { resumed } = await this.fillPart(run, part);
    let problem = await this.integrityProblem(file, part);
    if (problem !== null && resumed) {
      // Bytes from several responses (or an earlier session) that do not add up point at the
      // data, not at the registry: start over once from zero.
      await this.fs.remove(part);
      await this.fillPart(run, part);
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
    await this.clearNonRegular(path);
    await this.fs.rename(part, path);
    await this.remember(file, path);
    run.setBytes(file.size);
    return path;
  }

  /**
   * Creates the folders from the cache root down to `dir`, one at a time: a link, file or
   * special file where a folder belongs is removed (the link itself, never its target) and
   * replaced by a folder, so nothing is written through a link out of the cache. Where the
   * adapter resolves paths, `dir` is checked to resolve inside the root as well.
   */
  private async safeDir(dir: string): Promise<void> {
    const root = this.cacheDirectory;
    await this.fs.mkdir(root);
    let current = root;
    for (const part of dir.slice(root.length + 1).split('/')) {
      current = joinPath(current, part);
      const info = await this.fs.stat(current);
      if (info && isRealDirectory(info)) continue;
      if (info) await this.fs.remove(current);
      await this.fs.mkdir(current);
    }
    if (!this.fs.realpath) return;
    const [realRoot, realDir] = [await this.fs.realpath(root), await this.fs.realpath(dir)];
    if (realDir !== realRoot && !realDir.startsWith(`${realRoot}/`)) {
      throw new ExecutorchError(
        'storage_error',
        `${dir} resolves to ${realDir}, outside the models cache ${realRoot} (a link was ` +
          'planted while the folder was checked). Nothing was written; try again.',
        { path: dir },
      );
    }
  }

  /** Removes what is at `path` unless it is a regular file; returns the file's info, or null. */
  private async clearNonRegular(path: string): Promise<FileInfo | null> {
    const info = await this.fs.stat(path);
    if (!info) return null;
    if (isRegular(info)) return info;
    await this.fs.remove(path);
    return null;
  }

  /**
   * Makes `run.path` this fetcher's to download, through `<path>.lock`: created atomically
   * (`createExclusive`) holding a random token, refreshed every third of `lockStaleMs`, removed
   * when done. While another fetcher (this process or another) holds it, waits, reporting that
   * one's progress, and returns null as soon as the file is there and verified. A lock not
   * refreshed for `lockStaleMs` (its mtime older, or further in the future, than that, or seen
   * unchanged for that long), or one that is not a regular file, is taken over. Returns the
   * release function.
   */
  private async acquireLock(run: Run): Promise<(() => Promise<void>) | null> {
    const lock = run.path + LOCK_SUFFIX;
    const token = randomToken();
    const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
    const content = JSON.stringify({ token, pid, at: Date.now() });
    // The other holder's lock as last seen, and since when (this clock) it has not changed: a
    // live owner rewrites it every third of lockStaleMs, whatever its mtime says.
    let seen = '';
    let seenSince = 0;
    for (;;) {
      if (run.signal.aborted) throw this.stopped(run);
      if (!heldLocks.has(lock)) {
        heldLocks.add(lock);
        if (await this.createLock(lock, content, token).catch((e: unknown) => {
          heldLocks.delete(lock);
          throw e;
        })) {
          break;
        }
        heldLocks.delete(lock);
        const info = await this.fs.stat(lock);
        const state = info ? `${info.mtimeMs}:${info.size}:${info.identity ?? ''}` : '';
        if (state !== seen) [seen, seenSince] = [state, Date.now()];
        const unchangedFor = Date.now() - seenSince;
        if (info && (!isRegular(info) || !this.isFresh(info) || unchangedFor > this.lockStaleMs)) {
          await this.fs.remove(lock);
          continue;
        }
      }
      const part = await this.fs.stat(run.path + PART_SUFFIX);
      if (part && isRegular(part)) run.setBytes(Math.min(part.size, run.file.size));
      await sleep(this.lockPollMs, run.signal);
      if (run.signal.aborted) throw this.stopped(run);
      if ((await this.fs.stat(run.path)) && (await this.isVerified(run.file, run.path))) {
        run.setBytes(run.file.size);
        return null;
      }
    }
    const heartbeat = setInterval(() => {
      this.fs.writeText(lock, content).catch(noop);
    }, Math.max(10, this.lockStaleMs / 3));
    return async () => {
      clearInterval(heartbeat);
      heldLocks.delete(lock);
      try {
        const saved = JSON.parse(await this.fs.readText(lock)) as { token?: unknown };
        if (saved.token === token) await this.fs.remove(lock);
      } catch {
        // Gone or replaced: it is no longer ours to remove.
      }
    };
  }

  /** Creates the lock file; true when it now holds `token` (read back: the fallback can race). */
  private async createLock(lock: string, content: string, token: string): Promise<boolean> {
    if (this.fs.createExclusive) {
      if (!(await this.fs.createExclusive(lock, content))) return false;
    } else {
      if (await this.fs.stat(lock)) return false;
      await this.fs.writeText(lock, content);
    }
    try {
      return (JSON.parse(await this.fs.readText(lock)) as { token?: unknown }).token === token;
    } catch {
      return false;
    }
  }

  /**
   * The size of a resumable `part` (0 when there is none). Anything but a regular file (a folder,
   * link, FIFO), an empty file (what a FIFO looks like to adapters that cannot tell) and a file
   * larger than the registry's size are removed.
   */
  private async partSize(file: RemoteFile, part: string): Promise<number> {
    const info = await this.clearNonRegular(part);
    if (!info) return 0;
    if (info.size > 0 && info.size <= file.size) return info.size;
    await this.fs.remove(part);
    return 0;
  }

  /**
   * Requests `file` until `part` holds `file.size` bytes. Returns whether any bytes came from an
   * earlier request or session; throws `download_failed`, `download_too_slow`, `disk_full`,
   * `storage_error`, `checksum_mismatch` (a body past the size) or `download_cancelled`.
   */
  private async fillPart(run: Run, part: string): Promise<{ resumed: boolean }> {
    const { file, url, signal } = run;
    let resumed = false;
    let failuresWithoutProgress = 0;
    let slowInARow = 0;
    for (let attempt = 1; ; attempt += 1) {
      const offset = await this.partSize(file, part);
      run.setBytes(offset);
      // Bytes already in the part came from an earlier request or session.
      resumed ||= offset > 0;
      if (offset === file.size) return { resumed };
      if (attempt === 1) await this.checkFreeSpace(run, file.size - offset);
      const result = await this.request(run, part, offset);
      const size = (await this.fs.stat(part))?.size ?? 0;
      if (result.ok && size >= file.size) return { resumed };
      const failure = result.ok ? { reason: 'the response ended early' } : result;
      const slow = 'slow' in failure && failure.slow === true;
      slowInARow = slow ? slowInARow + 1 : 0;
      if (attempt >= this.maxAttempts || slowInARow >= this.maxSlowAttempts) {
        const status = 'status' in failure ? failure.status : undefined;
        if (slow) {
          throw new ExecutorchError(
            'download_too_slow',
            `Downloading ${url} failed ${attempt} times (last: ${failure.reason}). The ` +
              'connection or the server is too slow; the downloaded part is kept and will be ' +
              'resumed. Try again later or on another network (or lower minBytesPerSecond).',
            { url, status },
          );
        }
        throw new ExecutorchError(
          'download_failed',
          `Downloading ${url} failed ${attempt} times (last: ${failure.reason}). Check the ` +
            'network connection and try again later; the downloaded part is kept and will be ' +
            'resumed.',
          { url, status },
        );
      }
      failuresWithoutProgress = size > offset ? 0 : failuresWithoutProgress + 1;
      const waitMs = 'waitMs' in failure ? failure.waitMs : undefined;
      await sleep(retryDelayMs(this.retry, failuresWithoutProgress, waitMs), signal);
      if (signal.aborted) throw this.stopped(run);
    }
  }

  /**
   * Fails with `disk_full` before any request when the adapter says fewer than `needed` bytes
   * are free (the part is kept: nothing was written, and it resumes once there is space).
   */
  private async checkFreeSpace(run: Run, needed: number): Promise<void> {
    if (!this.fs.freeBytes) return;
    const free = await this.fs.freeBytes(dirname(run.path)).catch(() => null);
    if (free === null || free >= needed) return;
    throw new ExecutorchError(
      'disk_full',
      `${run.url} needs ${needed} more bytes but only ${free} are free. Free up space (e.g. ` +
        'deleteCachedModel for models you no longer need) and fetch again; what was already ' +
        'downloaded is kept and resumed.',
      { url: run.url, path: run.path },
    );
  }

  /**
   * One request for the rest of `part`, aborted after `idleTimeoutMs` without data, when its
   * rate over the last `rateWindowMs` falls below `minBytesPerSecond`, or at the first byte past
   * the registry's size. Transient failures come back as values; a cancel, the deadline, a full
   * disk, a filesystem error, an oversized body or an answer that retrying cannot fix throws.
   */
  private async request(run: Run, part: string, offset: number): Promise<Attempt> {
    const { file, url, signal } = run;
    const controller = new AbortController();
    const cancel = () => controller.abort();
    signal.addEventListener('abort', cancel);
    let idle = false;
    let slow = false;
    let over = false;
    // Rate samples, at most one per 1/16 window: the oldest one at or before the window's start
    // is the base of the average. After a suspension the window starts again.
    let started = Date.now();
    const samples: { at: number; bytes: number }[] = [{ at: started, bytes: offset }];
    let latest = offset;
    const window = this.rateWindowMs;
    const restartWindow = () => {
      started = Date.now();
      samples.splice(0, samples.length, { at: started, bytes: latest });
    };
    const timer = new AwakeTimeout(
      this.idleTimeoutMs,
      () => {
        idle = true;
        controller.abort();
      },
      restartWindow,
    );
    const tick = Math.max(10, Math.min(1000, window / 4));
    let lastCheck = started;
    const checkRate = () => {
      const now = Date.now();
      // Either timer may be the first to run after a suspension.
      const suspended = now - lastCheck > suspendedGapMs(tick);
      lastCheck = now;
      if (suspended) restartWindow();
      if (now - started < window) return;
      while (samples.length > 1 && samples[1]!.at <= now - window) samples.shift();
      const base = samples[0]!;
      if (((latest - base.bytes) * 1000) / (now - base.at) < this.minBytesPerSecond) {
        slow = true;
        controller.abort();
      }
    };
    const ticker =
      this.minBytesPerSecond > 0
        ? setInterval(checkRate, tick)
        : undefined;
    let result: HttpDownloadResult;
    try {
      result = await this.http.download({
        url,
        destination: part,
        offset,
        maxBytes: file.size,
        signal: controller.signal,
        onProgress: (bytes) => {
          if (bytes > file.size) {
            over = true;
            controller.abort();
            return;
          }
          timer.restart();
          latest = bytes;
          const now = Date.now();
          if (now - samples[samples.length - 1]!.at >= window / 16) samples.push({ at: now, bytes });
          run.setBytes(bytes);
        },
      });
    } catch (error) {
      if (over || errnoOf(error) === 'EFBIG') throw await this.tooLarge(run, part);
      if (isDiskFull(error)) {
        await this.fs.remove(part);
        throw diskFullError(part, error);
      }
      if (error instanceof ExecutorchError) throw error;
      if (FILESYSTEM_ERRNOS.has(errnoOf(error) ?? '')) throw storageError('write', part, error);
      if (signal.aborted) throw this.stopped(run);
      const reason = idle
        ? `no data for ${this.idleTimeoutMs} ms`
        : slow
          ? `slower than ${this.minBytesPerSecond} bytes/s over ${window} ms`
          : String(error);
      return { ok: false, reason, slow };
    } finally {
      timer.clear();
      clearInterval(ticker);
      signal.removeEventListener('abort', cancel);
    }
    if (over || ((await this.fs.stat(part))?.size ?? 0) > file.size) throw await this.tooLarge(run, part);
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

  /** Deletes the part of a body that went past the registry's size; the error to throw. */
  private async tooLarge(run: Run, part: string): Promise<ExecutorchError> {
    await this.fs.remove(part);
    return new ExecutorchError(
      'checksum_mismatch',
      `${run.url} sent more than the registry's size of ${run.file.size} bytes (a padded, ` +
        'endless or decompressed body); writing stopped at the first byte over and the partial ' +
        'file was deleted. The repository, the registry or a proxy on the way is wrong.',
      { url: run.url },
    );
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
   * True when the file at `path` is the registry's: hashed now, or remembered by its
   * `.verified` mark. Anything else there (a wrong file, a folder, a link) is removed.
   */
  private async isVerified(file: RemoteFile, path: string): Promise<boolean> {
    const info = await this.fs.stat(path);
    if (!info) return false;
    if (isRegular(info) && info.size === file.size) {
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
   * True when the `.verified` mark beside `path` vouches for the file as it is now: the mark
   * names the registry's sha256 and the file's size, mtime and identity (device, inode, change
   * time, where the adapter reports them), and the blocks it sampled still hash the same. An
   * in-place change that restores size and mtime still changes the identity (the change time
   * cannot be set back), and where the adapter has no identity the sampled blocks catch it with
   * a probability of their share of the file. A mark is also ignored when it was written in the
   * same clock tick as the file's last change: filesystems stamp mtimes from a coarse clock, so
   * such a "racy" mark cannot tell a later rewrite (git's racy-index rule).
   */
  private async isRemembered(file: RemoteFile, path: string, info: FileInfo): Promise<boolean> {
    const mark = path + VERIFIED_SUFFIX;
    const markInfo = await this.fs.stat(mark);
    // Never empty when this fetcher wrote it (and an empty one may be a FIFO an adapter cannot tell).
    if (!markInfo || !isRegular(markInfo) || markInfo.size === 0 || markInfo.size > MAX_MARK_BYTES) return false;
    if (markInfo.mtimeMs <= info.mtimeMs) return false;
    try {
      const saved = JSON.parse(await this.fs.readText(mark)) as Record<string, unknown>;
      if (
        saved.v !== MARK_VERSION ||
        saved.size !== info.size ||
        saved.mtimeMs !== info.mtimeMs ||
        (saved.identity ?? null) !== (info.identity ?? null) ||
        saved.sha256 !== file.sha256.toLowerCase() ||
        !Array.isArray(saved.samples)
      ) {
        return false;
      }
      if (!this.fs.sha256Range) return true;
      const samples = saved.samples as unknown[];
      if (samples.length === 0 || samples.length > RANDOM_SAMPLES + 2) return false;
      for (const sample of samples) {
        const [start, end, sha] = Array.isArray(sample) ? (sample as unknown[]) : [];
        if (typeof start !== 'number' || typeof end !== 'number' || typeof sha !== 'string') return false;
        if (!(start >= 0 && start < end && end <= info.size)) return false;
        if ((await this.fs.sha256Range(path, start, end)) !== sha) return false;
      }
      return true;
    } catch {
      return false; // An unreadable mark: hash again.
    }
  }

  /**
   * Writes the `.verified` mark (see `isRemembered`), with the hashes of a few sampled blocks.
   * Best effort: without it the file is only hashed again. A file changed moments ago gets its
   * mark after a short wait, so the mark lands in a later mtime tick than the file.
   */
  private async remember(file: RemoteFile, path: string): Promise<void> {
    try {
      const info = await this.fs.stat(path);
      if (!info || !isRegular(info)) return;
      const wait = info.mtimeMs + RACY_WINDOW_MS - Date.now();
      if (wait > 0) await new Promise<void>((done) => setTimeout(() => done(), Math.min(wait, RACY_WINDOW_MS)));
      const samples: [number, number, string][] = [];
      if (this.fs.sha256Range && info.size > 0) {
        for (const [start, end] of sampleBlocks(info.size)) {
          samples.push([start, end, await this.fs.sha256Range(path, start, end)]);
        }
      }
      const mark = {
        v: MARK_VERSION,
        size: info.size,
        mtimeMs: info.mtimeMs,
        identity: info.identity ?? null,
        sha256: file.sha256.toLowerCase(),
        samples,
      };
      // Replaced, never written through: what is there may be a FIFO that an adapter cannot tell.
      await this.fs.remove(path + VERIFIED_SUFFIX);
      await this.fs.writeText(path + VERIFIED_SUFFIX, JSON.stringify(mark));
    } catch {
      // A full disk or a read-only folder (bundled files).
    }
  }
}
