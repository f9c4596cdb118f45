import { BACKENDS } from 'react-native-executorch';
import type { Backend, ExecutorchError, GenerationStats, StopReason } from 'react-native-executorch';

/** "MLX (GPU)": the label the SDK's backend catalog gives `backend`. */
export function backendLabel(backend: Backend): string {
  return BACKENDS[backend].label;
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

export function formatPercent(progress: number): string {
  return `${Math.floor(progress * 100)}%`;
}

const STOP_REASONS: Record<StopReason, string> = {
  eos: 'finished',
  stop_string: 'finished',
  max_new_tokens: 'hit the length limit',
  context_full: 'context full',
  interrupted: 'stopped',
};

/**
 * The stats line under the chat: time to first token, the image/audio encoders' time (only for
 * a prompt with media), prefill and decode rates, the share of drafted tokens the model kept
 * (only with speculative decoding), why it ended.
 */
export function formatStats(stats: GenerationStats): string {
  return (
    `first token ${Math.round(stats.timeToFirstTokenMs)} ms · ` +
    (stats.mediaEncodeMs > 0 ? `encode ${Math.round(stats.mediaEncodeMs)} ms · ` : '') +
    `prefill ${stats.prefillTokensPerSecond.toFixed(1)} tok/s · ` +
    `decode ${stats.tokensPerSecond.toFixed(1)} tok/s · ` +
    (stats.draftedTokens > 0 ? `${Math.round(stats.acceptanceRate * 100)}% of drafts accepted · ` : '') +
    `${stats.generatedTokens} tokens, ${STOP_REASONS[stats.stopReason]}`
  );
}

/** "2.5 s": a recording's length, to a tenth of a second. */
export function formatSeconds(seconds: number): string {
  return `${(Math.floor(seconds * 10) / 10).toFixed(1)} s`;
}

/** A short title and what the user can do about it, for each kind of failure. */
export function describeError(error: ExecutorchError): { title: string; hint: string } {
  switch (error.code) {
    case 'model_unpublished':
      return {
        title: 'This model is not published yet',
        hint: 'Its files have no checksums in the registry, so they are not downloaded. Sideload them (see the app README) or pick another model.',
      };
    case 'download_failed':
      return { title: 'The download failed', hint: 'Check the internet connection and retry; the download resumes where it stopped.' };
    case 'checksum_mismatch':
      return { title: 'A downloaded file was damaged', hint: 'It was deleted; retry to download it again.' };
    case 'download_cancelled':
      return { title: 'The download was cancelled', hint: 'Retry to resume it.' };
    case 'backend_unavailable':
    case 'no_backend':
      return { title: 'This model cannot run on this device', hint: 'Pick another backend or another model.' };
    case 'native_module_missing':
      return { title: 'The native part of the SDK is missing', hint: 'Rebuild the app (see the app README); Expo Go cannot run it.' };
    case 'no_resource_adapter':
      return { title: 'Downloads are not set up', hint: 'react-native-blob-util is missing from this build.' };
    case 'context_full':
      return { title: 'The conversation is too long for the model', hint: 'Clear the conversation and ask again.' };
    case 'unsupported_input':
      return { title: 'The model cannot take this attachment', hint: 'Remove it and send text only, or pick another photo or recording.' };
    case 'assistant_unavailable':
      return {
        title: 'This model has no assistant drafter here',
        hint: 'Open it without the assistant drafter, or on a backend the message names; prompt lookup needs no drafter.',
      };
    case 'busy':
      return { title: 'The model is still answering', hint: 'Wait for the answer or stop it.' };
    case 'not_found':
    case 'invalid_model':
    case 'tokenizer':
      return { title: 'The model files could not be loaded', hint: 'Delete them and download again, or sideload a matching set.' };
    default:
      return { title: 'Something went wrong', hint: 'Retry; if it keeps failing, pick another backend or model.' };
  }
}
