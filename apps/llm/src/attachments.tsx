import { Image, StyleSheet, Text, View } from 'react-native';
import type { ContentPart } from 'react-native-executorch';

import { formatSeconds } from './format';
import { SAMPLE_RATE } from './media';
import { Button, colors } from './ui';

/** `file://` URI of a local path, for <Image>. */
function fileUri(path: string): string {
  return `file://${encodeURI(path)}`;
}

/** A photo's thumbnail (a pending one, or one in a message). */
export function Thumbnail({ path, label }: { readonly path: string; readonly label: string }) {
  return <Image source={{ uri: fileUri(path) }} style={styles.thumbnail} accessibilityLabel={label} />;
}

/** A recording, as a chip with its length. */
export function AudioChip({ samples }: { readonly samples: Float32Array }) {
  const seconds = formatSeconds(samples.length / SAMPLE_RATE);
  return (
    <Text style={styles.chip} accessibilityLabel={`Recording, ${seconds}`}>
      Audio {seconds}
    </Text>
  );
}

/** The images and recordings of a message, above its text. */
export function MessageMedia({ parts }: { readonly parts: readonly ContentPart[] }) {
  const media = parts.filter((part) => part.type !== 'text');
  if (media.length === 0) return null;
  return (
    <View style={styles.row}>
      {media.map((part, i) =>
        part.type === 'image' ? (
          <Thumbnail key={i} path={part.path} label="Attached photo" />
        ) : part.type === 'audio' && part.samples ? (
          <AudioChip key={i} samples={part.samples} />
        ) : part.type === 'audio' ? (
          <Text key={i} style={styles.chip}>
            Audio file
          </Text>
        ) : null,
      )}
    </View>
  );
}

interface PendingProps {
  readonly imagePath: string | null;
  readonly audio: Float32Array | null;
  onRemoveImage(): void;
  onRemoveAudio(): void;
}

/** What the next message will carry; each can be removed before sending. */
export function PendingAttachments({ imagePath, audio, onRemoveImage, onRemoveAudio }: PendingProps) {
  if (imagePath === null && audio === null) return null;
  return (
    <View style={styles.row} accessibilityLabel="Attachments to send">
      {imagePath !== null && (
        <View style={styles.pending}>
          <Thumbnail path={imagePath} label="Photo to send" />
          <Button small title="Remove" label="Remove the photo" onPress={onRemoveImage} />
        </View>
      )}
      {audio !== null && (
        <View style={styles.pending}>
          <AudioChip samples={audio} />
          <Button small title="Remove" label="Remove the recording" onPress={onRemoveAudio} />
        </View>
      )}
    </View>
  );
}

const styles = StyleSheet.create({
  row: { flexDirection: 'row', flexWrap: 'wrap', gap: 8, alignItems: 'center' },
  pending: { flexDirection: 'row', gap: 4, alignItems: 'center' },
  thumbnail: { width: 64, height: 64, borderRadius: 6, backgroundColor: colors.surface },
  chip: {
    paddingHorizontal: 10,
    paddingVertical: 4,
    borderRadius: 12,
    backgroundColor: colors.surface,
    color: colors.text,
    fontVariant: ['tabular-nums'],
  },
});
