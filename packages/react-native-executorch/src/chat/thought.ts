import type { ThoughtMarkers } from './template';

/** What {@link ThoughtSplitter} made of a whole generation. */
export interface SplitAnswer {
  /** The answer, without the thought and its markers. */
  readonly answer: string;
  /** The thought, without its markers ('' when the model did not think). */
  readonly thought: string;
  /**
   * True when the generation stopped inside the thought (token budget, interrupt): everything
   * generated is the thought and the answer is empty.
   */
  readonly thoughtUnfinished: boolean;
}

/** Pieces of one streamed text piece: the part that belongs to the answer, and to the thought. */
export interface SplitPiece {
  readonly answer: string;
  readonly thought: string;
}

/** The longest end of `text` that is the start of `marker` (it may complete in the next piece). */
function partialMarkerAt(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) {
    if (marker.startsWith(text.slice(text.length - n))) return n;
  }
  return 0;
}

/**
 * Separates a thinking model's thought from its answer while they stream: a generation that
 * starts with the thought channel (`markers.open`, Gemma 4: `<|channel>thought\n`) is thought up
 * to `markers.close` (`<channel|>`), the rest is the answer. Markers split across pieces are
 * held back until they are whole. Without markers (a model with no thought channel) everything
 * is the answer.
 */
export class ThoughtSplitter {
  /** `afterThought`: the thought closed and the answer has not begun (whitespace is dropped). */
  private state: 'start' | 'thought' | 'afterThought' | 'answer';
  private pending = '';
  private answer = '';
  private thought = '';

  constructor(private readonly markers: ThoughtMarkers | null) {
    this.state = markers ? 'start' : 'answer';
  }

  push(piece: string): SplitPiece {
    this.pending += piece;
    let answer = '';
    let thought = '';
    const markers = this.markers;
    for (;;) {
      if (this.state === 'answer' || markers === null) {
        answer += this.pending;
        this.pending = '';
        break;
      }
      if (this.state === 'start') {
        const lead = this.pending.trimStart();
        if (lead.startsWith(markers.open)) {
          this.pending = lead.slice(markers.open.length);
          this.state = 'thought';
          continue;
        }
        if (markers.open.startsWith(lead)) break; // The marker may still be arriving.
        this.state = 'answer';
        continue;
      }
      if (this.state === 'afterThought') {
        // The answer begins after the channel, as the template trims it.
        this.pending = this.pending.replace(/^\s+/, '');
        if (this.pending === '') break;
        this.state = 'answer';
        continue;
      }
      const close = this.pending.indexOf(markers.close);
      if (close >= 0) {
        thought += this.pending.slice(0, close);
        this.pending = this.pending.slice(close + markers.close.length);
        this.state = 'afterThought';
        continue;
      }
      const keep = partialMarkerAt(this.pending, markers.close);
      thought += this.pending.slice(0, this.pending.length - keep);
      this.pending = this.pending.slice(this.pending.length - keep);
      break;
    }
    this.answer += answer;
    this.thought += thought;
    return { answer, thought };
  }

  /** The whole generation, split; what was held back goes where it was heading. */
  finish(): SplitAnswer {
    const rest = this.pending;
    this.pending = '';
    if (this.state === 'thought') this.thought += rest;
    else this.answer += rest;
    return { answer: this.answer, thought: this.thought, thoughtUnfinished: this.state === 'thought' };
  }
}
