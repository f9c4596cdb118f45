/** When to try a failed download request again. */

/** Settings of the retry delay. */
export interface RetryPolicy {
  /** Delay after the first failure that made no progress; doubles with each further one. */
  readonly baseDelayMs: number;
  /** Upper bound of every delay, `Retry-After` included. */
  readonly maxDelayMs: number;
}

/**
 * The delay a `Retry-After` header asks for, in ms: delta-seconds (`120`) or an HTTP-date
 * (`Wed, 21 Oct 2015 07:28:00 GMT`, a past one meaning now). Undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | undefined, now: number = Date.now()): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // An HTTP-date names its weekday and month; Date.parse alone would take `-5` for a year.
  if (!/^[A-Za-z]{3}, /.test(value)) return undefined;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * The wait before the next request: none right after a request that made progress (a dropped
 * connection is resumed at once), otherwise what the server asked for or exponential backoff
 * over the consecutive failures without progress, capped.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  failuresWithoutProgress: number,
  serverAsked: number | undefined,
): number {
  if (failuresWithoutProgress === 0) return 0;
  const backoff = policy.baseDelayMs * 2 ** (failuresWithoutProgress - 1);
  return Math.min(serverAsked ?? backoff, policy.maxDelayMs);
}

/** Resolves after `ms`, or at once when `signal` aborts (the caller checks it). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
