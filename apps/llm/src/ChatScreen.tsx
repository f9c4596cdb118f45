import { useEffect, useRef, useState } from 'react';
import { KeyboardAvoidingView, Platform, ScrollView, StyleSheet, Text, TextInput, View } from 'react-native';
import { ExecutorchError, useLLM, type Message, type ResourceFetcher } from 'react-native-executorch';

import { MessageMedia, PendingAttachments } from './attachments';
import { backendLabel, describeError, formatPercent, formatSeconds, formatStats } from './format';
import { MAX_AUDIO_SECONDS, pickImage, VoiceRecorder, type PickedImage } from './media';
import type { Selection } from './ModelPicker';
import { Button, colors, ProgressBar } from './ui';

/** What one Send sends: the text and the attachments it carries. */
interface Outgoing {
  readonly text: string;
  readonly image: PickedImage | null;
  readonly audio: Float32Array | null;
}

interface ChatScreenProps {
  readonly selection: Selection;
  readonly resources: ResourceFetcher;
  /** Back to the picker; unmounting cancels a download and releases the model. */
  onBack(): void;
  /** Load again from scratch (the parent remounts this screen). */
  onRetry(): void;
}

export function ChatScreen({ selection, resources, onBack, onRetry }: ChatScreenProps) {
  const { model, backend, localFiles, assistant = false } = selection;
  const llm = useLLM({
    model,
    resources,
    ...(backend ? { backend } : {}),
    ...(localFiles ? { localFiles } : {}),
    assistant,
  });
  const [draft, setDraft] = useState('');
  // Off by default, as the chat templates default; a template without thinking ignores it.
  const [thinking, setThinking] = useState(false);
  // Speculative decoding, off by default as in the SDK: by the assistant drafter when its program
  // was loaded, else by prompt lookup (which needs no other file).
  const drafter = assistant ? 'assistant' : 'promptLookup';
  const drafterName = assistant ? 'Assistant drafter' : 'Prompt lookup';
  const [speculative, setSpeculative] = useState(false);
  // The message of a failed generation, so that Retry can send it again.
  const [failedMessage, setFailedMessage] = useState<Outgoing | null>(null);
  // The last send's failure: a generation's (also in llm.error), or one refused before
  // generating (media the model cannot take), which the hook does not keep.
  const [sendError, setSendError] = useState<ExecutorchError | null>(null);
  // A generation error stays in llm.error until the next generation; clearing the conversation
  // dismisses it.
  const [dismissed, setDismissed] = useState<ExecutorchError | null>(null);
  const scroll = useRef<ScrollView>(null);

  // Attachments of the next message (one photo, one recording), offered only to models whose
  // registry capabilities say they take them.
  const takesImages = model.capabilities.includes('vision');
  const takesAudio = model.capabilities.includes('audio');
  const [image, setImage] = useState<PickedImage | null>(null);
  const [audio, setAudio] = useState<Float32Array | null>(null);
  // Seconds recorded while recording, else null.
  const [recording, setRecording] = useState<number | null>(null);
  // What the attachments want the user to know (a denied permission, the length limit).
  const [notice, setNotice] = useState<string | null>(null);
  const recorder = useRef<VoiceRecorder | null>(null);
  // Leaving the screen stops a recording.
  useEffect(() => () => void recorder.current?.stop(), []);

  const send = (message: Outgoing) => {
    setFailedMessage(null);
    setSendError(null);
    setNotice(null);
    const media = {
      ...(message.image ? { image: message.image.path } : {}),
      ...(message.audio ? { audio: message.audio } : {}),
    };
    // The hook shows a generation's failure in llm.error; keep the message so that the user
    // can send it again.
    llm.sendMessage(message.text, media).catch((error: unknown) => {
      setFailedMessage(message);
      setSendError(error instanceof ExecutorchError ? error : new ExecutorchError('execution_failed', String(error)));
    });
  };

  const attachPhoto = async (source: 'library' | 'camera') => {
    setNotice(null);
    const result = await pickImage(source);
    if (result.status === 'picked') setImage(result.image);
    else if (result.status === 'failed') setNotice(result.message);
  };

  const startRecording = async () => {
    setNotice(null);
    const voice = new VoiceRecorder({
      onProgress: (seconds) => setRecording(seconds),
      onLimit: (clip) => {
        recorder.current = null;
        setRecording(null);
        setAudio(clip);
        setNotice(`Recording stopped at ${MAX_AUDIO_SECONDS} s, the longest clip the model takes.`);
      },
      onError: (message) => {
        recorder.current = null;
        setRecording(null);
        setNotice(message);
      },
    });
    recorder.current = voice;
    setRecording(0);
    const problem = await voice.start();
    if (problem !== null) {
      recorder.current = null;
      setRecording(null);
      setNotice(problem);
    }
  };

  const stopRecording = async () => {
    const voice = recorder.current;
    recorder.current = null;
    setRecording(null);
    const clip = (await voice?.stop()) ?? null;
    if (clip) setAudio(clip);
    else setNotice('Nothing was recorded: record a little longer before stopping.');
  };

  const header = (
    <View style={styles.header}>
      <Button small title="Models" label="Back to models" onPress={onBack} />
      <View style={styles.headerText}>
        <Text style={styles.modelName}>{model.name}</Text>
        <Text style={styles.muted}>
          {llm.backend
            ? `Backend in use: ${backendLabel(llm.backend)}`
            : llm.error
              ? 'No backend'
              : 'Choosing a backend…'}
        </Text>
      </View>
    </View>
  );

  if (!llm.isReady) {
    return (
      <View style={styles.screen}>
        {header}
        <View style={styles.center}>
          {llm.error ? (
            <ErrorPanel error={llm.error} onRetry={onRetry} retryLabel="Retry" />
          ) : (
            <LoadingPanel progress={llm.downloadProgress} sideloaded={localFiles !== undefined} />
          )}
          <Button
            title={llm.error ? 'Choose another model' : 'Cancel'}
            label={llm.error ? 'Choose another model' : localFiles ? 'Cancel loading' : 'Cancel download'}
            onPress={onBack}
          />
        </View>
      </View>
    );
  }

  const toggleThinking = () => {
    llm.configure({ chatConfig: { thinking: !thinking } });
    setThinking(!thinking);
  };

  const toggleSpeculative = () => {
    llm.configure({ generationConfig: { speculative: speculative ? undefined : { drafter } } });
    setSpeculative(!speculative);
  };

  const shownError = sendError ?? (llm.error !== dismissed ? llm.error : null);
  const canSend = recording === null && (draft.trim() !== '' || image !== null || audio !== null);

  const messages: readonly Message[] = llm.isGenerating
    ? [...llm.messageHistory, { role: 'assistant', content: llm.response, ...(llm.thought ? { thought: llm.thought } : {}) }]
    : llm.messageHistory;

  return (
    // Android resizes the window for the keyboard by itself; iOS needs the padding.
    <KeyboardAvoidingView style={styles.screen} behavior={Platform.OS === 'ios' ? 'padding' : undefined}>
      {header}
      <ScrollView
        ref={scroll}
        style={styles.messages}
        contentContainerStyle={styles.messagesContent}
        onContentSizeChange={() => scroll.current?.scrollToEnd({ animated: true })}
      >
        {messages.length === 0 && <Text style={styles.muted}>Ask {model.name} something.</Text>}
        {messages.map((m, i) => (
          <View
            key={i}
            style={[styles.bubble, m.role === 'user' ? styles.userBubble : styles.assistantBubble]}
            accessibilityLabel={m.role === 'user' ? 'Your message' : 'Answer'}
          >
            {m.parts && <MessageMedia parts={m.parts} />}
            {(m.content !== '' || !m.parts) && <Text style={styles.text}>{m.content}</Text>}
            {m.role === 'assistant' && m.thought ? (
              <Thought text={m.thought} streaming={llm.isGenerating && i === messages.length - 1} />
            ) : null}
          </View>
        ))}
      </ScrollView>
      {shownError && (
        <ErrorPanel
          error={shownError}
          retryLabel="Send again"
          onRetry={failedMessage === null ? undefined : () => send(failedMessage)}
        />
      )}
      <Text style={styles.stats} accessibilityLabel="Stats">
        {llm.stats ? formatStats(llm.stats) : llm.isGenerating ? 'Generating…' : 'No answer yet'}
      </Text>
      {notice && (
        <Text style={styles.notice} accessibilityLabel="Attachment notice">
          {notice}
        </Text>
      )}
      <PendingAttachments
        imagePath={image?.path ?? null}
        audio={audio}
        onRemoveImage={() => setImage(null)}
        onRemoveAudio={() => setAudio(null)}
      />
      {(takesImages || takesAudio) && (
        <View style={styles.attachRow}>
          {takesImages && (
            <>
              <Button small title="Photo" label="Attach a photo" onPress={() => void attachPhoto('library')} />
              <Button small title="Camera" label="Take a photo" onPress={() => void attachPhoto('camera')} />
            </>
          )}
          {takesAudio &&
            (recording === null ? (
              <Button small title="Record" label="Record audio" onPress={() => void startRecording()} />
            ) : (
              <Button
                small
                selected
                title={`Stop ${formatSeconds(recording)} / ${MAX_AUDIO_SECONDS} s`}
                label="Stop recording"
                onPress={() => void stopRecording()}
              />
            ))}
        </View>
      )}
      <View style={styles.inputRow}>
        <TextInput
          style={styles.input}
          value={draft}
          onChangeText={setDraft}
          placeholder="Message"
          accessibilityLabel="Message"
          multiline
        />
        {llm.isGenerating ? (
          <Button title="Stop" onPress={llm.interrupt} />
        ) : (
          <Button
            title="Send"
            disabled={!canSend}
            onPress={() => {
              send({ text: draft.trim(), image, audio });
              setDraft('');
              setImage(null);
              setAudio(null);
            }}
          />
        )}
      </View>
      <Button
        small
        title={thinking ? 'Thinking: on' : 'Thinking: off'}
        label="Think before answering"
        selected={thinking}
        disabled={llm.isGenerating}
        onPress={toggleThinking}
      />
      <Button
        small
        title={`${drafterName}: ${speculative ? 'on' : 'off'}`}
        label={assistant ? 'Draft tokens by the assistant' : 'Draft tokens by prompt lookup'}
        selected={speculative}
        disabled={llm.isGenerating}
        onPress={toggleSpeculative}
      />
      <Button
        small
        title="Clear conversation"
        disabled={llm.isGenerating || llm.messageHistory.length === 0}
        onPress={() => {
          setFailedMessage(null);
          setSendError(null);
          setDismissed(llm.error);
          llm.clearHistory();
        }}
      />
    </KeyboardAvoidingView>
  );
}

/** A model's thought, collapsed under its answer until the user opens it. */
function Thought({ text, streaming }: { readonly text: string; readonly streaming: boolean }) {
  const [open, setOpen] = useState(false);
  return (
    <View style={styles.thought}>
      <Button
        small
        title={open ? 'Hide thought' : streaming ? 'Thinking…' : 'Show thought'}
        label={open ? 'Hide thought' : 'Show thought'}
        onPress={() => setOpen(!open)}
      />
      {open && (
        <Text style={styles.muted} accessibilityLabel="Thought">
          {text}
        </Text>
      )}
    </View>
  );
}

function LoadingPanel({ progress, sideloaded }: { readonly progress: number; readonly sideloaded: boolean }) {
  if (sideloaded || progress >= 1) return <Text style={styles.text}>Loading the model…</Text>;
  return (
    <View style={styles.loading}>
      <Text style={styles.text}>Downloading {formatPercent(progress)}</Text>
      <ProgressBar progress={progress} label="Download progress" />
    </View>
  );
}

interface ErrorPanelProps {
  readonly error: ExecutorchError;
  readonly retryLabel: string;
  /** No retry button when undefined. */
  readonly onRetry: (() => void) | undefined;
}

function ErrorPanel({ error, retryLabel, onRetry }: ErrorPanelProps) {
  const { title, hint } = describeError(error);
  return (
    <View style={styles.error}>
      <Text style={styles.errorTitle} accessibilityRole="alert">
        {title}
      </Text>
      <Text style={styles.text}>{error.message}</Text>
      <Text style={styles.muted}>{hint}</Text>
      {onRetry && <Button title={retryLabel} onPress={onRetry} />}
    </View>
  );
}

const styles = StyleSheet.create({
  screen: { flex: 1, padding: 12, gap: 8 },
  header: { flexDirection: 'row', alignItems: 'center', gap: 12 },
  headerText: { flex: 1 },
  modelName: { fontSize: 18, fontWeight: '600', color: colors.text },
  center: { flex: 1, justifyContent: 'center', gap: 16 },
  loading: { gap: 8 },
  messages: { flex: 1 },
  messagesContent: { gap: 8, paddingVertical: 8 },
  bubble: { padding: 10, borderRadius: 10, maxWidth: '90%' },
  userBubble: { alignSelf: 'flex-end', backgroundColor: colors.user },
  assistantBubble: { alignSelf: 'flex-start', backgroundColor: colors.surface },
  text: { color: colors.text, fontSize: 16 },
  thought: { marginTop: 6, gap: 4, alignItems: 'flex-start' },
  muted: { color: colors.muted },
  stats: { color: colors.muted, fontVariant: ['tabular-nums'] },
  inputRow: { flexDirection: 'row', gap: 8, alignItems: 'flex-end' },
  attachRow: { flexDirection: 'row', gap: 8 },
  notice: { color: colors.error },
  input: {
    flex: 1,
    minHeight: 44,
    maxHeight: 120,
    borderWidth: 1,
    borderColor: colors.surface,
    borderRadius: 8,
    padding: 10,
    color: colors.text,
  },
  error: { gap: 6, padding: 12, borderRadius: 8, borderWidth: 1, borderColor: colors.error },
  errorTitle: { color: colors.error, fontWeight: '600', fontSize: 16 },
});
