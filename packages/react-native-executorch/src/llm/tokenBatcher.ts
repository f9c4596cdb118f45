/**
 * Accumulates streamed text and hands it on at most once per `intervalMs` (the first piece
 * right away), so a model producing hundreds of tokens per second does not re-render React per
 * token. `finish()` delivers whatever is pending.
 */
export class TokenBatcher {
  private text = '';
  private delivered = '';
  private timer: ReturnType<typeof setTimeout> | null = null;
  private lastFlush = -Infinity;

  constructor(
    private readonly intervalMs: number,
    private readonly deliver: (text: string) => void,
  ) {}

  push(piece: string): void {
    this.text += piece;
    if (this.timer !== null) return;
    const wait = this.lastFlush + this.intervalMs - Date.now();
    if (wait <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Delivers the pending text now and stops the timer. */
  finish(): void {
    this.flush();
  }

  /** Drops pending text and stops the timer (unmount). */
  cancel(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private flush(): void {
    this.cancel();
    this.lastFlush = Date.now();
    if (this.text !== this.delivered) {
      this.delivered = this.text;
      this.deliver(this.text);
    }
  }
}
