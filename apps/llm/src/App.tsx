import { useMemo, useState } from 'react';
import { StatusBar, StyleSheet, View } from 'react-native';
import ReactNativeBlobUtil from 'react-native-blob-util';
import { blobUtilAdapters, ResourceFetcher, type AnyLLMDescriptor } from 'react-native-executorch';

import { registryModels } from './catalog';
import { ChatScreen } from './ChatScreen';
import { deviceCapabilities } from './device';
import { ModelPicker, type Selection } from './ModelPicker';
import { colors } from './ui';

export interface AppProps {
  /** The models offered; default: every model of the registry. */
  readonly catalog?: readonly AnyLLMDescriptor[];
  /** Where model files are downloaded from (a mirror); default: Hugging Face. */
  readonly baseUrl?: string;
}

export default function App({ catalog = registryModels, baseUrl }: AppProps) {
  const adapters = useMemo(() => blobUtilAdapters(ReactNativeBlobUtil), []);
  // One fetcher for the app: reopening a model finds its files in the cache.
  const resources = useMemo(
    () => new ResourceFetcher({ ...adapters, ...(baseUrl ? { baseUrl } : {}) }),
    [adapters, baseUrl],
  );
  const device = useMemo(deviceCapabilities, []);
  const [selection, setSelection] = useState<Selection | null>(null);
  // Bumped by Retry: a new key remounts the chat screen, which loads from scratch.
  const [attempt, setAttempt] = useState(0);

  return (
    <View style={styles.root}>
      <StatusBar barStyle="dark-content" />
      {selection ? (
        <ChatScreen
          key={attempt}
          selection={selection}
          resources={resources}
          onBack={() => setSelection(null)}
          onRetry={() => setAttempt((n) => n + 1)}
        />
      ) : (
        <ModelPicker catalog={catalog} device={device} fs={adapters.fs} resources={resources} onOpen={setSelection} />
      )}
    </View>
  );
}

const styles = StyleSheet.create({
  // Clears the status bar / notch without another dependency.
  root: { flex: 1, paddingTop: 48, paddingBottom: 24, backgroundColor: colors.background },
});
