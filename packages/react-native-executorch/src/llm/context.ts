/**
 * Context strategies: which messages of a conversation are sent when it no longer fits in the
 * model's context (see {@link ContextStrategy}).
 */
import type { Message } from '../chat/template';
import { ExecutorchError } from '../errors';
import type { ChatConfig, ContextBudget, ContextStrategy } from './types';

/** The strategy and the room kept for the answer, validated. */
export interface ContextSettings {
  readonly strategy: ContextStrategy;
  /** Tokens kept free for the answer. */
  readonly reserveTokens: number;
}

/** What fitting needs from the loaded model. */
export interface ContextModel {
  readonly maxContextLength: number;
  countTokens(messages: readonly Message[]): number;
}

/**
 * The strategy of `chat` (default `'slidingWindow'`) and its reserve (default: `maxNewTokens`).
 * Throws `invalid_argument` for an unknown strategy or a reserve that is not an integer >= 0.
 */
export function resolveContextSettings(
  chat: Pick<ChatConfig, 'contextStrategy' | 'contextReserveTokens'>,
  maxNewTokens: number,
): ContextSettings {
  const strategy = chat.contextStrategy ?? 'slidingWindow';
  if (strategy !== 'slidingWindow' && strategy !== 'error' && typeof strategy !== 'function') {
    throw new ExecutorchError(
      'invalid_argument',
      `Unknown contextStrategy ${JSON.stringify(strategy)}: use 'slidingWindow', 'error' or a function.`,
    );
  }
  const reserve = chat.contextReserveTokens ?? maxNewTokens;
  if (!(Number.isInteger(reserve) && reserve >= 0)) {
    throw new ExecutorchError(
      'invalid_argument',
      `contextReserveTokens ${reserve} is not an integer >= 0.`,
    );
  }
  return { strategy, reserveTokens: reserve };
}

/**
 * The messages to render for `messages` (the system prompt, if any, first) under `settings`.
 * `'error'` returns them unchanged (the native side rejects a prompt that does not fit).
 */
export function fitContext(
  messages: readonly Message[],
  settings: ContextSettings,
  model: ContextModel,
): readonly Message[] {
  if (settings.strategy === 'error') return messages;
  const budget: ContextBudget = {
    maxPromptTokens: model.maxContextLength - settings.reserveTokens,
    maxContextLength: model.maxContextLength,
    countTokens: (list) => model.countTokens(list),
  };
  if (budget.maxPromptTokens <= 0) {
    throw new ExecutorchError(
      'context_full',
      `No room for a prompt: the context holds ${model.maxContextLength} tokens and ` +
        `${settings.reserveTokens} are kept for the answer. Lower maxNewTokens or contextReserveTokens.`,
    );
  }
  if (settings.strategy === 'slidingWindow') return slidingWindow(messages, budget);
  const chosen = settings.strategy(messages, budget);
  if (!Array.isArray(chosen)) {
    throw new ExecutorchError('invalid_argument', 'The contextStrategy function must return an array of messages.');
  }
  return chosen;
}

/**
 * Keeps the system prompt and the newest messages whose prompt fits `budget`. The kept part
 * starts at a user message (chat templates such as Gemma's require user/assistant alternation
 * from a user turn). As a conversation only grows, the first kept message moves forward only
 * when it must, so the prompt keeps extending the native KV cache between slides.
 */
export function slidingWindow(messages: readonly Message[], budget: ContextBudget): readonly Message[] {
  const fits = (list: readonly Message[]) => budget.countTokens(list) <= budget.maxPromptTokens;
  if (fits(messages)) return messages;
  const head = messages[0]?.role === 'system' ? messages.slice(0, 1) : [];
  const rest = messages.slice(head.length);
  const starts = rest.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  if (starts.length === 0) starts.push(rest.length - 1);
  const window = (start: number) => [...head, ...rest.slice(start)];
  // Fewer messages never need more tokens: binary search for the first start that fits.
  let [low, high] = [0, starts.length - 1];
  if (!fits(window(starts[high]!))) {
    const needed = budget.countTokens(window(starts[high]!));
    throw new ExecutorchError(
      'context_full',
      `The newest message alone needs a ${needed}-token prompt, but ${budget.maxPromptTokens} of the ` +
        `${budget.maxContextLength}-token context are left after the room kept for the answer. ` +
        'Shorten the message or the system prompt, or lower maxNewTokens / contextReserveTokens.',
    );
  }
  while (low < high) {
    const mid = (low + high) >> 1;
    if (fits(window(starts[mid]!))) high = mid;
    else low = mid + 1;
  }
  return window(starts[low]!);
}
