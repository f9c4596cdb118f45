"""Multimodal encoders exported beside the text decoders: Gemma 4's vision encoder (gemma4_vision,
export; docs/multimodal.md)."""
