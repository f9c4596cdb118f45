"""Multimodal encoders exported beside the text decoders: Gemma 4's vision encoder
(gemma4_vision, export) and audio path (gemma4_audio, audio_export), checked against the random
reference model of gemma4_reference (docs/multimodal.md)."""
