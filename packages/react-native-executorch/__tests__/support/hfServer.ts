/**
 * A real HTTP server on 127.0.0.1 that serves files at Hugging Face style URLs,
 * `/<owner>/<name>/resolve/<revision>/<path>`, with Range support (`bytes=a-` and `bytes=a-b`)
 * and scripted failures (`dropAfter`/`ignoreRange` for the simple cases, `faults` for a
 * per-request script).
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the server does wrong on one request. */
export type Fault =
  /** Answers with this status (and `Retry-After`), an error page as body. */
  | { readonly kind: 'status'; readonly status: number; readonly retryAfter?: string }
  /** Accepts the request and never answers. */
  | { readonly kind: 'silent' }
  /** Sends headers and `after` body bytes, then nothing, keeping the connection open. */
  | { readonly kind: 'stall'; readonly after: number }
  /** Sends `after` body bytes (Content-Length says more), then destroys the socket. */
  | { readonly kind: 'drop'; readonly after: number }
  /** Flips the byte at file offset `at` when this response carries it. */
  | { readonly kind: 'corrupt'; readonly at: number }
  /**
   * Answers a ranged request 206 with the bytes from 0 (the whole file, or the asked-for length
   * of a closed range) and a Content-Range saying so.
   */
  | { readonly kind: 'wrongRange' }
  /** Answers 416 to a range that is valid. */
  | { readonly kind: 'bogus416' }
  /** Content-Length (and the body, which ends cleanly) cut to `length` bytes: a short answer. */
  | { readonly kind: 'shortLength'; readonly length: number }
  /** Content-Length says the whole rest; after `after` bytes the server closes cleanly (FIN). */
  | { readonly kind: 'closeEarly'; readonly after: number }
  /** Sends `after` bytes at full speed, then `bytes` bytes every `everyMs` (the right bytes). */
  | { readonly kind: 'trickle'; readonly after: number; readonly everyMs: number; readonly bytes?: number }
  /**
   * Answers 200 with the file followed by `extra` more bytes; Content-Length counts them when
   * `declared`, otherwise the body is chunked (no length).
   */
  | { readonly kind: 'oversize'; readonly extra: number; readonly declared: boolean }
  /** Answers 200, chunked, with the file and then bytes until the client hangs up. */
  | { readonly kind: 'endless' }
  /** Answers 200 with `Content-Encoding: gzip` of the file and 8 MB of zeros after it. */
  | { readonly kind: 'gzipBomb' };

export interface ServedFile {
  readonly body: Buffer;
  /** Destroy the socket after this many body bytes, for the first `dropTimes` requests. */
  readonly dropAfter?: number;
  readonly dropTimes?: number;
  /** Answer 200 with the whole file even when a Range is asked for. */
  readonly ignoreRange?: boolean;
  /** Send the body in chunks of this size with `chunkDelayMs` between them. */
  readonly chunkSize?: number;
  readonly chunkDelayMs?: number;
  /** `faults[n]` is what goes wrong with the (n+1)-th request for this file; absent: nothing. */
  readonly faults?: readonly (Fault | undefined)[];
}

export interface RequestLog {
  readonly path: string;
  readonly range: string | undefined;
  /** 0 when the server never answered. */
  readonly status: number;
  /** When the request arrived (`Date.now()`). */
  readonly at: number;
}

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Deterministic pseudo-random bytes (so checksums are stable between runs). */
export function bytes(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

export class HfServer {
  readonly requests: RequestLog[] = [];
  private readonly files = new Map<string, ServedFile>();
  private readonly served = new Map<string, number>();
  private readonly bombs = new Map<Buffer, Buffer>();
  private server: Server | null = null;
  baseUrl = '';

  /** Serves `file` as `<repo>/resolve/<revision>/<path>`. */
  add(repo: string, revision: string, path: string, file: ServedFile): void {
    this.files.set(`/${repo}/resolve/${revision}/${path}`, file);
    // Compressed now: gzip on the request's turn would block the loop the client shares.
    if (file.faults?.some((f) => f?.kind === 'gzipBomb')) {
      this.bombs.set(file.body, gzipSync(Buffer.concat([file.body, Buffer.alloc(8 << 20)]), { level: 1 }));
    }
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const range = req.headers.range;
    const file = this.files.get(path);
    const log = (status: number) => this.requests.push({ path, range, status, at: Date.now() });
    if (!file) {
      log(404);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Entry not found');
      return;
    }
    const count = (this.served.get(path) ?? 0) + 1;
    this.served.set(path, count);
    const fault = file.faults?.[count - 1];
    if (fault?.kind === 'silent') {
      log(0);
      return;
    }
    if (fault?.kind === 'status') {
      log(fault.status);
      const headers = fault.retryAfter === undefined ? {} : { 'retry-after': fault.retryAfter };
      res.writeHead(fault.status, { 'content-type': 'text/html', ...headers }).end('<h1>Error</h1>');
      return;
    }
    if (fault?.kind === 'oversize' || fault?.kind === 'endless' || fault?.kind === 'gzipBomb') {
      log(200);
      this.sendTooMuch(res, file.body, fault);
      return;
    }
    /** How many of `n` remaining bytes this response carries. */
    const sent = (n: number) => (fault?.kind === 'shortLength' ? Math.min(fault.length, n) : n);
    let start = 0;
    // One past the last byte this response carries.
    let end = file.body.length;
    // `bytes=a-` or the closed `bytes=a-b` (b past the end means up to the end).
    const match = range && !file.ignoreRange ? /^bytes=(\d+)-(\d*)$/.exec(range) : null;
    if (match && (match[2] === '' || Number(match[2]) >= Number(match[1]))) {
      start = Number(match[1]);
      end = match[2] === '' ? end : Math.min(end, Number(match[2]) + 1);
      if (start >= file.body.length || fault?.kind === 'bogus416') {
        log(416);
        res.writeHead(416, { 'content-range': `bytes */${file.body.length}` }).end();
        return;
      }
      // From the first byte: the rest of the file, or as many bytes as a closed range asked for.
      if (fault?.kind === 'wrongRange') [start, end] = [0, match[2] === '' ? end : end - start];
      log(206);
      res.writeHead(206, {
        'content-length': sent(end - start),
        'content-range': `bytes ${start}-${end - 1}/${file.body.length}`,
        'accept-ranges': 'bytes',
      });
    } else {
      log(200);
      res.writeHead(200, { 'content-length': sent(file.body.length), 'accept-ranges': 'bytes' });
    }
    let body = file.body.subarray(start, end);
    body = body.subarray(0, sent(body.length));
    if (fault?.kind === 'closeEarly') body = body.subarray(0, fault.after);
    if (fault?.kind === 'corrupt' && fault.at >= start && fault.at < end) {
      body = Buffer.from(body);
      body[fault.at - start] = body[fault.at - start]! ^ 0xff;
    }
    const scriptedDrop = fault?.kind === 'drop';
    const drop = scriptedDrop || (file.dropAfter !== undefined && count <= (file.dropTimes ?? 1));
    if (drop) body = body.subarray(0, scriptedDrop ? fault.after : file.dropAfter);
    // Stalling: the rest is never sent; the connection stays open until the client gives up.
    if (fault?.kind === 'stall') body = body.subarray(0, fault.after);
    if (fault?.kind === 'trickle') {
      const head = body.subarray(0, fault.after);
      let at = head.length;
      res.write(head);
      const timer = setInterval(() => {
        if (res.destroyed || at >= body.length) {
          clearInterval(timer);
          if (!res.destroyed) res.end();
          return;
        }
        res.write(body.subarray(at, at + (fault.bytes ?? 1)));
        at += fault.bytes ?? 1;
      }, fault.everyMs);
      res.on('close', () => clearInterval(timer));
      return;
    }
    const chunkSize = file.chunkSize ?? body.length;
    const send = (offset: number) => {
      if (res.destroyed) return;
      if (offset >= body.length) {
        // Dropping: kill the socket with the body incomplete, as a lost connection does.
        if (drop) setTimeout(() => res.socket?.destroy(), 20);
        else if (fault?.kind === 'closeEarly') res.socket?.end();
        else if (fault?.kind !== 'stall') res.end();
        return;
      }
      res.write(body.subarray(offset, offset + chunkSize), () => {
        setTimeout(() => send(offset + chunkSize), file.chunkDelayMs ?? 0);
      });
    };
    send(0);
  }

  /** The bodies of `oversize`, `endless` and `gzipBomb`. */
  private sendTooMuch(res: ServerResponse, file: Buffer, fault: Fault): void {
    if (fault.kind === 'gzipBomb') {
      const bomb = this.bombs.get(file)!;
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': bomb.length }).end(bomb);
      return;
    }
    if (fault.kind === 'oversize') {
      const body = Buffer.concat([file, bytes(fault.extra, 77)]);
      res.writeHead(200, fault.declared ? { 'content-length': body.length } : {}).end(body);
      return;
    }
    res.writeHead(200, {});
    res.write(file);
    const junk = bytes(8192, 78);
    const more = () => {
      if (!res.destroyed) res.write(junk, () => setTimeout(more, 1));
    };
    more();
  }
}
