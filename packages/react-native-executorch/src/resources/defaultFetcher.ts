import { ExecutorchError } from '../errors';
import type { ResourceAdapters } from './adapters';
import { defaultResourceAdapters } from './blobUtil';
import { ResourceFetcher } from './fetcher';

let shared: ResourceFetcher | null = null;

/** Whether this runs on iOS, where blob-util downloads in a background session. */
function onIOS(): boolean {
  try {
    // Required here: the package also loads in Node (tests, the host addon), without React Native.
    return (require('react-native') as typeof import('react-native')).Platform.OS === 'ios';
  } catch {
    return false;
  }
}

/**
 * The app-wide fetcher (one instance, so every `useLLM` shares downloads and the cache), over
 * `react-native-blob-util`; on iOS its downloads go on while the app is suspended (background
 * transfer, see `blobUtilAdapters`). Use it to list or delete cached models:
 *
 * ```ts
 * const fetcher = getResourceFetcher();
 * for (const m of await fetcher.listCachedModels()) console.log(m.repo, m.sizeBytes);
 * await fetcher.deleteCachedModel(models.llm.gemma4_e2b);
 * ```
 *
 * Throws `no_resource_adapter` when `react-native-blob-util` is not installed.
 */
export function getResourceFetcher(): ResourceFetcher {
  if (shared) return shared;
  // Android keeps the foreground transfer: blob-util's DownloadManager path cannot resume a part.
  const adapters = defaultResourceAdapters({ background: onIOS() });
  if (!adapters) {
    throw new ExecutorchError(
      'no_resource_adapter',
      'No filesystem/download adapter for model files. Install `react-native-blob-util` ' +
        '(used automatically), or pass `resources` (a ResourceFetcher or adapters).',
    );
  }
  shared = new ResourceFetcher(adapters);
  return shared;
}

/** The fetcher for explicit `resources`, or the shared default one. */
export function resolveResourceFetcher(
  resources: ResourceFetcher | ResourceAdapters | undefined,
): ResourceFetcher {
  if (resources instanceof ResourceFetcher) return resources;
  return resources ? new ResourceFetcher(resources) : getResourceFetcher();
}
