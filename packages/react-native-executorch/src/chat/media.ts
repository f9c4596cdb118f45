/**
 * Images and audio in prompts. The chat template writes a placeholder for each media part of a
 * message (Gemma 4: `\n\n<|image|>\n\n` for an image, `<|audio|>` for audio, as transformers'
 * `apply_chat_template` renders them); {@link spliceMedia} replaces each placeholder in the
 * rendered prompt with the media part itself, and the native side expands that into the model's
 * begin marker, soft tokens and end marker (see `MediaPromptPart` in `native/seam.ts`).
 */
import { ExecutorchError } from '../errors';
import type { MediaPromptPart, PromptPart } from '../native/seam';
import { GEMMA4_MEDIA_PLACEHOLDERS } from './formats/gemma4';
import type { ContentPart, Message } from './template';

/** A kind of media a message can carry. */
export type MediaKind = MediaPromptPart['media'];

/**
 * The placeholder text a chat template writes for each kind of media part. Gemma 4's are the
 * only multimodal templates the registry ships.
 */
export const MEDIA_PLACEHOLDERS: Readonly<Record<MediaKind, string>> = GEMMA4_MEDIA_PLACEHOLDERS;

/** The media part of the prompt that stands for `part`. */
function promptPartOf(part: Exclude<ContentPart, { type: 'text' }>): MediaPromptPart {
  if (part.type === 'image') return { media: 'image', path: part.path };
  return part.samples === undefined ? { media: 'audio', path: part.path } : { media: 'audio', samples: part.samples };
}

/** The media parts of `messages`, in the order the template renders them (message, then part). */
export function mediaOf(messages: readonly Message[]): MediaPromptPart[] {
  return messages.flatMap((message) =>
    (message.parts ?? []).flatMap((part) => (part.type === 'text' ? [] : [promptPartOf(part)])),
  );
}

const PLACEHOLDER = new RegExp(
  Object.values(MEDIA_PLACEHOLDERS)
    .map((text) => text.replace(/[|\\^$.*+?()[\]{}]/g, '\\$&'))
    .join('|'),
  'g',
);

const KIND_OF: ReadonlyMap<string, MediaKind> = new Map(
  (Object.entries(MEDIA_PLACEHOLDERS) as [MediaKind, string][]).map(([kind, text]) => [text, kind]),
);

function mismatch(what: string): ExecutorchError {
  return new ExecutorchError(
    'chat_template',
    `The rendered prompt does not line up with the conversation's images and audio: ${what}. ` +
      "The model's chat template must write one placeholder per media part, in order " +
      `(${Object.values(MEDIA_PLACEHOLDERS).join(', ')}).`,
  );
}

/**
 * `parts` (a rendered prompt) with the k-th media placeholder of its template text replaced by
 * `media[k]`, the k-th media part of the conversation. Plain text is never split: a user who
 * types `<|image|>` sends those characters. The text around a placeholder stays in its part (an
 * empty stretch is dropped). Throws `chat_template` when the placeholders and the media do not
 * line up: more of one than of the other, or a placeholder of another kind than its media part
 * (an image where the conversation has audio). Where rendering in parts fell back to one
 * template text (see `ChatTemplate.renderTemplateMessagesParts`), a placeholder typed in a
 * message counts too, and the mismatch is this error rather than media in the wrong place.
 */
export function spliceMedia(parts: readonly PromptPart[], media: readonly MediaPromptPart[]): PromptPart[] {
  const out: PromptPart[] = [];
  let next = 0;
  for (const part of parts) {
    if (part.media !== undefined || part.plain) {
      out.push(part);
      continue;
    }
    let start = 0;
    for (const match of part.text.matchAll(PLACEHOLDER)) {
      const kind = KIND_OF.get(match[0]) as MediaKind;
      const item = media[next];
      if (item === undefined) {
        throw mismatch(`the template wrote ${placeholders(parts)} placeholders for ${media.length} media parts`);
      }
      if (item.media !== kind) {
        throw mismatch(`placeholder ${next + 1} is ${match[0]} (${kind}) but media part ${next + 1} is ${item.media}`);
      }
      pushText(out, part.text.slice(start, match.index));
      out.push(item);
      next += 1;
      start = match.index + match[0].length;
    }
    pushText(out, part.text.slice(start));
  }
  if (next !== media.length) {
    throw mismatch(`the template wrote ${next} placeholders for ${media.length} media parts`);
  }
  return out;
}

/** Placeholders in the template text of `parts`. */
function placeholders(parts: readonly PromptPart[]): number {
  return parts.reduce(
    (n, part) => n + (part.media === undefined && !part.plain ? (part.text.match(PLACEHOLDER)?.length ?? 0) : 0),
    0,
  );
}

/** Template text, unless it is empty. */
function pushText(out: PromptPart[], text: string): void {
  if (text) out.push({ text });
}
