import { useEffect, useState } from 'react';
import { ScrollView, StyleSheet, Text, View } from 'react-native';
import type {
  AnyLLMDescriptor,
  Backend,
  CachedModel,
  DeviceCapabilities,
  FileSystemAdapter,
  ModelFiles,
  ResourceFetcher,
} from 'react-native-executorch';

import { assistantProgram, downloadSize, findSideloaded, runnableBackends, shippedBackends } from './catalog';
import { backendLabel, formatBytes } from './format';
import { Button, colors } from './ui';

/** What the user chose to open. */
export interface Selection {
  readonly model: AnyLLMDescriptor;
  /** Set only when the user overrode the automatic choice, or chose its variant's assistant. */
  readonly backend?: Backend;
  /** Sideloaded files to run instead of downloading. */
  readonly localFiles?: ModelFiles;
  /**
   * Load the variant's program with its assistant drafter (`useLLM({ assistant: true })`); set
   * only where the chosen variant declares one.
   */
  readonly assistant?: boolean;
}

interface ModelPickerProps {
  readonly catalog: readonly AnyLLMDescriptor[];
  /** Null when the native module is not linked. */
  readonly device: DeviceCapabilities | null;
  readonly fs: FileSystemAdapter;
  /** The app's fetcher: what is downloaded, and deleting it. */
  readonly resources: ResourceFetcher;
  onOpen(selection: Selection): void;
}

export function ModelPicker({ catalog, device, fs, resources, onOpen }: ModelPickerProps) {
  return (
    <ScrollView contentContainerStyle={styles.list}>
      <Text style={styles.title} accessibilityRole="header">
        Choose a model
      </Text>
      {device === null && (
        <Text style={styles.warning}>
          The native part of react-native-executorch is not in this build, so no model can run. Rebuild the app
          as the README describes.
        </Text>
      )}
      {catalog.map((model) => (
        <ModelCard key={model.id} model={model} device={device} fs={fs} resources={resources} onOpen={onOpen} />
      ))}
    </ScrollView>
  );
}

interface ModelCardProps {
  readonly model: AnyLLMDescriptor;
  readonly device: DeviceCapabilities | null;
  readonly fs: FileSystemAdapter;
  readonly resources: ResourceFetcher;
  onOpen(selection: Selection): void;
}

function ModelCard({ model, device, fs, resources, onOpen }: ModelCardProps) {
  const shipped = shippedBackends(model);
  const runnable = runnableBackends(model, device);
  const [override, setOverride] = useState<Backend | null>(null);
  const backend = override ?? runnable[0] ?? null;
  // Offered only where the variant about to load declares an assistant: the choice does not
  // carry over to a backend whose variant has none.
  const assistant = backend ? assistantProgram(model, backend) : null;
  const [assistantChosen, setAssistantChosen] = useState(false);
  const withAssistant = assistantChosen && assistant !== null;
  // The assistant belongs to the variant shown: loading with it pins that backend.
  const pinned = override ?? (withAssistant ? backend : null);
  const [sideloaded, setSideloaded] = useState<ModelFiles | null>(null);

  useEffect(() => {
    let live = true;
    setSideloaded(null);
    if (backend) {
      findSideloaded(fs, model, backend, withAssistant).then(
        (files) => live && setSideloaded(files),
        // Unreadable means not sideloaded; downloading stays possible.
        () => undefined,
      );
    }
    return () => {
      live = false;
    };
  }, [fs, model, backend, withAssistant]);

  // Downloaded files (complete or partial) of this model's repository revision, any backend.
  const [cached, setCached] = useState<CachedModel | null>(null);
  const [cacheVersion, setCacheVersion] = useState(0);
  const [deleteError, setDeleteError] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    const { repo, revision } = model.hf;
    resources.listCachedModels().then(
      (list) => live && setCached(list.find((c) => c.repo === repo && c.revision === revision && c.sizeBytes > 0) ?? null),
      () => live && setCached(null),
    );
    return () => {
      live = false;
    };
  }, [resources, model, cacheVersion]);

  const deleteFiles = () => {
    setDeleteError(null);
    resources.deleteCachedModel(model).then(
      () => setCacheVersion((n) => n + 1),
      (error: unknown) => setDeleteError(error instanceof Error ? error.message : String(error)),
    );
  };

  const size = backend ? downloadSize(model, backend, withAssistant) : null;
  const assistantSize = backend && assistant ? downloadSize(model, backend, true) : null;
  const files = sideloaded
    ? 'Files: sideloaded on this device'
    : backend === null
      ? ''
      : size === null
        ? 'Download: not published yet'
        : `Download: ${formatBytes(size)}`;
  // Without the native module the load itself reports what is wrong, in words.
  const canOpen = device === null || backend !== null;

  return (
    <View style={styles.card} accessibilityLabel={model.name}>
      <Text style={styles.name}>{model.name}</Text>
      <Text style={styles.detail}>
        {backend
          ? `Backend on this device: ${backendLabel(backend)}${override ? ' (chosen)' : ''}`
          : device
            ? `Cannot run on this ${device.os}${device.isSimulator ? ' simulator' : ''}: it ships ${shipped.join(', ')}`
            : 'Backend: unknown (native module missing)'}
      </Text>
      {files !== '' && <Text style={styles.detail}>{files}</Text>}
      {cached && (
        <View style={styles.row}>
          <Text style={styles.detail}>Downloaded: {formatBytes(cached.sizeBytes)}</Text>
          <Button small title="Delete" label={`Delete the downloaded files of ${model.name}`} onPress={deleteFiles} />
        </View>
      )}
      {deleteError && <Text style={styles.warning}>{deleteError}</Text>}
      <Text style={styles.detail}>Context: {model.contextLength} tokens</Text>
      {shipped.length > 1 && device && (
        <View style={styles.chips}>
          <Button
            small
            title="Auto"
            selected={override === null}
            label={`${model.name}: automatic backend`}
            onPress={() => setOverride(null)}
          />
          {shipped.map((b) => (
            <Button
              key={b}
              small
              title={runnable.includes(b) ? b : `${b} (not here)`}
              selected={override === b}
              disabled={!runnable.includes(b)}
              label={`${model.name}: ${b}`}
              onPress={() => setOverride(b)}
            />
          ))}
        </View>
      )}
      {assistant && (
        <View style={styles.assistant}>
          <Button
            small
            title="Speculative drafter: assistant"
            selected={withAssistant}
            label={`${model.name}: speculative drafter assistant`}
            onPress={() => setAssistantChosen(!withAssistant)}
          />
          <Text style={styles.detail}>
            {`Loads ${assistant.path} instead: a larger download (` +
              `${assistantSize === null ? 'not published yet' : formatBytes(assistantSize)})`}
          </Text>
        </View>
      )}
      <Button
        title="Open"
        label={`Open ${model.name}`}
        disabled={!canOpen}
        onPress={() =>
          onOpen({
            model,
            ...(pinned ? { backend: pinned } : {}),
            ...(sideloaded ? { localFiles: sideloaded } : {}),
            ...(withAssistant ? { assistant: true } : {}),
          })
        }
      />
    </View>
  );
}

const styles = StyleSheet.create({
  list: { padding: 16, gap: 12 },
  title: { fontSize: 24, fontWeight: '600', color: colors.text },
  warning: { color: colors.error },
  card: { padding: 12, borderRadius: 8, backgroundColor: colors.surface, gap: 6 },
  name: { fontSize: 18, fontWeight: '600', color: colors.text },
  detail: { color: colors.muted },
  chips: { flexDirection: 'row', flexWrap: 'wrap', gap: 6 },
  assistant: { gap: 4, alignItems: 'flex-start' },
  row: { flexDirection: 'row', alignItems: 'center', justifyContent: 'space-between' },
});
