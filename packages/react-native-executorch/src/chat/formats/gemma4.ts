/**
 * Gemma 4's chat format: how the SDK uses the markers its template writes, which are special
 * tokens of its tokenizer (the runner drops them from the streamed text unless a generation
 * keeps them). The markers themselves are declared in `model-registry/chat_formats/gemma4.yaml`,
 * which C++ (`rne_llm`) reads too; the parser of its calls is `src/tools/gemma4.ts`.
 */
import { GEMMA4_SYNTAX } from './gemma4.generated';
import type { ChatFormat, ThoughtChannel } from './index';

export const GEMMA4_CALL_OPEN = GEMMA4_SYNTAX.toolCall.open;
export const GEMMA4_CALL_CLOSE = GEMMA4_SYNTAX.toolCall.close;
export const GEMMA4_QUOTE = GEMMA4_SYNTAX.toolCall.quote;
/** Opens a tool's response: the model writes it after its calls, the host fills it in. */
export const GEMMA4_RESPONSE_OPEN = GEMMA4_SYNTAX.toolCall.responseOpen;

/** The thought channel: `<|channel>thought\n` ... `<channel|>`. */
const THOUGHT: ThoughtChannel = {
  markers: { open: GEMMA4_SYNTAX.thought.open, close: GEMMA4_SYNTAX.thought.close },
  tokens: GEMMA4_SYNTAX.thought.tokens,
};

/**
 * The placeholder text the template writes for each kind of media part (`\n\n<|image|>\n\n`
 * for an image, `<|audio|>` for audio, as transformers' `apply_chat_template` renders them);
 * Gemma 4's processor (`Gemma4Processor`) replaces the same strings.
 */
export const GEMMA4_MEDIA_PLACEHOLDERS = GEMMA4_SYNTAX.mediaPlaceholders;

const callOpening = (toolName: string) => `${GEMMA4_CALL_OPEN}call:${toolName}`;

export const GEMMA4_FORMAT: ChatFormat & { readonly thought: ThoughtChannel } = {
  toolCallSyntax: 'gemma4',
  writesCall: (rendered, toolName) => rendered.includes(`${callOpening(toolName)}{n:1}${GEMMA4_CALL_CLOSE}`),
  callTokens: [GEMMA4_CALL_OPEN, GEMMA4_CALL_CLOSE, GEMMA4_QUOTE, GEMMA4_RESPONSE_OPEN],
  // After its calls Gemma 4 opens the tool response itself: the answer ends there, and the
  // results are rendered in that place next round.
  callStops: [GEMMA4_RESPONSE_OPEN],
  // The model writes only the arguments, constrained by the tool's schema in Gemma 4's argument
  // syntax (bare keys, `<|"|>`-quoted strings): the bytes the template re-renders for the history.
  forcedCall: {
    opening: callOpening,
    closing: GEMMA4_CALL_CLOSE,
    argumentSyntax: 'gemma4',
    keepSpecialTokens: [GEMMA4_QUOTE],
  },
  thought: THOUGHT,
};
