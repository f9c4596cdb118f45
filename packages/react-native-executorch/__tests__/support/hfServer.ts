/**
 * A real HTTP server on 127.0.0.1 that serves files at Hugging Face style URLs,
 * `/<owner>/<name>/resolve/<revision>/<path>`, with Range support and scripted failures.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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
}

export interface RequestLog {
  readonly path: string;
  readonly range: string | undefined;
  readonly status: number;
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
  private server: Server | null = null;
  baseUrl = '';

  /** Serves `file` as `<repo>/resolve/<revision>/<path>`. */
  add(repo: string, revision: string, path: string, file: ServedFile): void {
    this.files.set(`/${repo}/resolve/${revision}/${path}`, file);
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
    const log = (status: number) => this.requests.push({ path, range, status });
    if (!file) {
      log(404);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Entry not found');
      return;
    }
    const count = (this.served.get(path) ?? 0) + 1;
    this.served.set(path, count);
    let start = 0;
    const match = range && !file.ignoreRange ? /^bytes=(\d+)-$/.exec(range) : null;
    if (match) {
      start = Number(match[1]);
      if (start >= file.body.length) {
        log(416);
        res.writeHead(416, { 'content-range': `bytes */${file.body.length}` }).end();
        return;
      }
      log(206);
      res.writeHead(206, {
        'content-length': file.body.length - start,
        'content-range': `bytes ${start}-${file.body.length - 1}/${file.body.length}`,
        'accept-ranges': 'bytes',
      });
    } else {
      log(200);
      res.writeHead(200, { 'content-length': file.body.length, 'accept-ranges': 'bytes' });
    }
    let body = file.body.subarray(start);
    const drop = file.dropAfter !== undefined && count <= (file.dropTimes ?? 1);
    if (drop) body = body.subarray(0, file.dropAfter);
    const chunkSize = file.chunkSize ?? body.length;
    const send = (offset: number) => {
      if (res.destroyed) return;
      if (offset >= body.length) {
        // Dropping: kill the socket with the body incomplete, as a lost connection does.
        if (drop) setTimeout(() => res.socket?.destroy(), 20);
        else res.end();
        return;
      }
      res.write(body.subarray(offset, offset + chunkSize), () => {
        setTimeout(() => send(offset + chunkSize), file.chunkDelayMs ?? 0);
      });
    };
    send(0);
  }
}
