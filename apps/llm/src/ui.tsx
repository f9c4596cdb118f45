import { Pressable, StyleSheet, Text, View } from 'react-native';

export const colors = {
  background: '#ffffff',
  surface: '#f1f3f5',
  text: '#111418',
  muted: '#5c6670',
  accent: '#2f5bea',
  error: '#b3261e',
  user: '#dde6ff',
};

interface ButtonProps {
  readonly title: string;
  /** Accessibility name, when the title alone is ambiguous on screen. */
  readonly label?: string;
  readonly disabled?: boolean;
  readonly selected?: boolean;
  readonly small?: boolean;
  onPress(): void;
}

export function Button({ title, label, disabled = false, selected, small = false, onPress }: ButtonProps) {
  return (
    <Pressable
      accessibilityRole="button"
      accessibilityLabel={label ?? title}
      accessibilityState={{ disabled, ...(selected === undefined ? {} : { selected }) }}
      disabled={disabled}
      onPress={onPress}
      style={[
        styles.button,
        small && styles.small,
        selected && styles.selected,
        disabled && styles.disabled,
      ]}
    >
      <Text style={[styles.title, selected && styles.selectedTitle]}>{title}</Text>
    </Pressable>
  );
}

/** A horizontal bar filled to `progress` (0..1). */
export function ProgressBar({ progress, label }: { readonly progress: number; readonly label: string }) {
  const now = Math.round(progress * 100);
  return (
    <View
      style={styles.track}
      accessible
      accessibilityRole="progressbar"
      accessibilityLabel={label}
      accessibilityValue={{ min: 0, max: 100, now }}
    >
      <View style={[styles.fill, { width: `${now}%` }]} />
    </View>
  );
}

const styles = StyleSheet.create({
  button: {
    paddingHorizontal: 14,
    paddingVertical: 10,
    borderRadius: 8,
    borderWidth: 1,
    borderColor: colors.accent,
    alignItems: 'center',
  },
  small: { paddingHorizontal: 10, paddingVertical: 6 },
  selected: { backgroundColor: colors.accent },
  disabled: { opacity: 0.4 },
  title: { color: colors.accent, fontWeight: '600' },
  selectedTitle: { color: '#ffffff' },
  track: { height: 8, borderRadius: 4, backgroundColor: colors.surface, overflow: 'hidden' },
  fill: { height: 8, backgroundColor: colors.accent },
});
