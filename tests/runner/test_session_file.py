"""Saved sessions through rne_llm (runner/include/rne/runner/session_file.h): a conversation
saved after one turn and loaded in a new process continues exactly as if it had never stopped
(the next turn's logits byte-equal the uninterrupted run's), and every bad file is refused with
a clear error."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

# The multimodal tiny Gemma 4 of tests/runner/test_multimodal_decoder.py, as fixtures here: its decoder
# (and the checkpoint it is exported from), vision encoder, Gemma-4-shaped tokenizer with the
# real template, and a photo.
from test_multimodal_decoder import checkpoint, media_files  # noqa: F401
from test_multimodal_decoder import decoder as mm_decoder  # noqa: F401
from test_multimodal_decoder import encoder as vision_encoder  # noqa: F401
from test_multimodal_decoder import tokenizer_dir as gemma4_tokenizer_dir  # noqa: F401

from rne_tools.export import cached_export


@pytest.fixture(scope="session")
def llm(request) -> Path:
    """The host rne_llm, or RNE_LLM (an engineer's own build)."""
    override = os.environ.get("RNE_LLM")
    return Path(override) if override else request.getfixturevalue("rne_llm")


@pytest.fixture(scope="session")
def tiny_gemma4():
    # The tiny Gemma 4 of the execution tests: sliding window 6 in a 64-position context, so its
    # ring caches wrap many times in a conversation.
    return cached_export("gemma4_e2b", "xnnpack", "fp32", progress=False,
                         random_config="tiny", max_context=64, max_chunk=5)


def run(llm: Path, model: Path, tokenizer: Path, *args) -> dict:
    done = subprocess.run([llm, "--model", model, "--tokenizer", tokenizer, "--json",
                           "--ignore-eos", *map(str, args)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def fail(llm: Path, model: Path, tokenizer: Path, *args) -> str:
    done = subprocess.run([llm, "--model", model, "--tokenizer", tokenizer, "--json",
                           *map(str, args)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout
    return done.stderr


def ids(values) -> str:
    return ",".join(map(str, values))


def split_vs_whole(llm, model, tokenizer, tmp_path, turn1, turn2, new_tokens, *extra):
    """The uninterrupted two-turn run, and the same two turns with a save and a load (in a new
    process) between them. Returns both runs' outputs and logits rows."""
    common = ["--max-new-tokens", new_tokens, *extra]
    whole = run(llm, model, tokenizer, "--prompt-ids", ids(turn1), "--turn-ids", ids(turn2),
                "--logits-out", tmp_path / "whole.f32", *common)
    session = tmp_path / "conversation.session"
    first = run(llm, model, tokenizer, "--prompt-ids", ids(turn1), "--save-session", session,
                "--logits-out", tmp_path / "first.f32", *common)
    second = run(llm, model, tokenizer, "--load-session", session, "--prompt-ids", ids(turn2),
                 "--logits-out", tmp_path / "second.f32", *common)
    logits = {name: np.fromfile(tmp_path / f"{name}.f32", dtype=np.float32)
              for name in ("whole", "first", "second")}
    return whole, first, second, logits


def assert_exact(whole, first, second, logits, restored="cache"):
    assert second["session_loaded"]["restored"] == restored
    assert [t["tokens"] for t in whole["turns"]] == [first["turns"][0]["tokens"],
                                                     second["turns"][0]["tokens"]]
    rows = logits["whole"].reshape(2, -1)
    # Byte-equal, not close: the restored caches are the caches.
    assert np.array_equal(rows[0], logits["first"]) and np.array_equal(rows[1], logits["second"])
    # The restored turn prefilled only its own tokens (and the pending last answer token).
    assert second["stats"]["prompt_tokens"] == whole["turns"][1]["stats"]["prompt_tokens"]


def test_a_saved_gemma4_conversation_continues_exactly_after_its_rings_wrapped(
        llm, tiny_gemma4, byte_tokenizer, tmp_path):
    turn1 = [(i * 7) % 250 + 3 for i in range(27)]
    turn2 = [(i * 11) % 250 + 3 for i in range(9)]
    whole, first, second, logits = split_vs_whole(llm, tiny_gemma4.pte_path, byte_tokenizer,
                                                  tmp_path, turn1, turn2, 10)
    assert_exact(whole, first, second, logits)
    # 36 positions after turn 1, far past the 6-position window: the rings wrapped.
    assert second["session_loaded"]["tokens"] == len(turn1) + 10 > 6 * 4
    assert first["session_saved"]["file_bytes"] == second["session_loaded"]["file_bytes"]


def test_a_tokens_only_session_is_restored_by_prefilling(llm, tiny_gemma4, byte_tokenizer,
                                                         tmp_path):
    turn1 = list(range(3, 30))
    session = tmp_path / "tokens.session"
    full = tmp_path / "full.session"
    base = ["--prompt-ids", ids(turn1), "--max-new-tokens", "6"]
    small = run(llm, tiny_gemma4.pte_path, byte_tokenizer, *base, "--save-session", session,
                "--session-tokens-only")
    big = run(llm, tiny_gemma4.pte_path, byte_tokenizer, *base, "--save-session", full)
    assert small["session_saved"]["restored"] == "prefill"
    assert small["session_saved"]["file_bytes"] < big["session_saved"]["file_bytes"] / 10
    loaded = run(llm, tiny_gemma4.pte_path, byte_tokenizer, "--load-session", session,
                 "--prompt-ids", "40,41", "--max-new-tokens", "4")
    assert loaded["session_loaded"]["restored"] == "prefill"
    assert loaded["session_loaded"]["tokens"] == len(turn1) + 6
    # Only the new turn (and the pending token) is prefilled by the turn itself.
    assert loaded["stats"]["prompt_tokens"] == 3


@pytest.mark.slow
def test_a_saved_smollm2_conversation_continues_exactly(llm, smollm2_fp32, smollm2_checkpoint,
                                                        tmp_path):
    from tokenizers import Tokenizer

    from rne_tools.runtime.text import ChatTokenizer

    tokenizer = smollm2_checkpoint / "tokenizer.json"
    turn1 = ChatTokenizer(smollm2_checkpoint).user_prompt_ids(
        "Tell me about the history of Paris in a few sentences.")
    turn2 = Tokenizer.from_file(str(tokenizer)).encode(
        "<|im_end|>\n<|im_start|>user\nAnd of Rome?<|im_end|>\n<|im_start|>assistant\n",
        add_special_tokens=False).ids
    whole, first, second, logits = split_vs_whole(llm, smollm2_fp32.pte_path, tokenizer,
                                                  tmp_path, turn1, turn2, 40)
    assert_exact(whole, first, second, logits)
    saved = first["session_saved"]
    print(f"\nSMOLLM2 session: {saved['tokens']} tokens, {saved['file_bytes']} bytes, saved in "
          f"{saved['ms']:.1f} ms, loaded in {second['session_loaded']['ms']:.1f} ms")


def test_a_gemma4_conversation_with_an_image_in_it_continues_exactly(
        llm, mm_decoder, vision_encoder, gemma4_tokenizer_dir, media_files, tmp_path):  # noqa: F811
    """Media in the history: the image's soft tokens are in the saved cache with their content
    key, so the next turn reuses them without the encoder (none is given to the second run)."""
    tokenizer = gemma4_tokenizer_dir / "tokenizer.json"
    first = ["--vision-encoder", vision_encoder, "--image", media_files["image"],
             "--max-new-tokens", 6, "What is in the picture?"]
    turn2 = [int(i) for i in range(300, 312)]
    whole = run(llm, mm_decoder, tokenizer, *first, "--turn-ids", ids(turn2),
                "--logits-out", tmp_path / "whole.f32")
    session = tmp_path / "picture.session"
    run(llm, mm_decoder, tokenizer, *first, "--save-session", session,
        "--logits-out", tmp_path / "first.f32")
    second = run(llm, mm_decoder, tokenizer, "--load-session", session, "--prompt-ids",
                 ids(turn2), "--max-new-tokens", 6, "--logits-out", tmp_path / "second.f32")
    assert second["session_loaded"]["restored"] == "cache"
    assert second["turns"][0]["tokens"] == whole["turns"][1]["tokens"]
    rows = np.fromfile(tmp_path / "whole.f32", dtype=np.float32).reshape(2, -1)
    assert np.array_equal(rows[1], np.fromfile(tmp_path / "second.f32", dtype=np.float32))


# --- refusals ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def saved(llm, tiny_gemma4, byte_tokenizer, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("session") / "saved.session"
    run(llm, tiny_gemma4.pte_path, byte_tokenizer, "--prompt-ids", ids(range(3, 20)),
        "--max-new-tokens", "4", "--save-session", path)
    return path


def load_error(llm, model, tokenizer, path) -> str:
    return fail(llm, model, tokenizer, "--load-session", path, "--prompt-ids", "5,6")


def test_a_session_of_another_model_is_refused(llm, saved, tiny_llama_fp32, byte_tokenizer):
    err = load_error(llm, tiny_llama_fp32.pte_path, byte_tokenizer, saved)
    assert "saved with another model" in err and "unchanged" in err


@pytest.mark.parametrize("damage", ["truncated", "altered", "newer", "empty", "junk"])
def test_a_damaged_session_file_is_refused(llm, saved, tiny_gemma4, byte_tokenizer, tmp_path,
                                           damage):
    data = bytearray(saved.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "altered":
        data[len(data) // 2] ^= 0x01  # one bit in the cache bytes
    elif damage == "newer":
        data[8:12] = struct.pack("<I", 2)
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"not a session file at all" * 10)
    bad = tmp_path / "bad.session"
    bad.write_bytes(bytes(data))
    err = load_error(llm, tiny_gemma4.pte_path, byte_tokenizer, bad)
    expected = {"truncated": "checksum does not match", "altered": "checksum does not match",
                "newer": "newer than this build reads", "empty": "not a session file",
                "junk": "not a session file"}[damage]
    assert expected in err, err
    assert "unchanged" in err


def test_a_directory_or_fifo_in_place_of_the_session_file_is_refused(
        llm, tiny_gemma4, byte_tokenizer, tmp_path):
    fifo = tmp_path / "fifo.session"
    os.mkfifo(fifo)
    # Read without blocking on a writer that never comes (the timeout would fail the test).
    assert "not a regular file" in load_error(llm, tiny_gemma4.pte_path, byte_tokenizer, fifo)
    assert "is a directory" in load_error(llm, tiny_gemma4.pte_path, byte_tokenizer, tmp_path)
    assert "no such file" in load_error(llm, tiny_gemma4.pte_path, byte_tokenizer,
                                        tmp_path / "absent.session").lower()
    err = fail(llm, tiny_gemma4.pte_path, byte_tokenizer, "--prompt-ids", "5,6",
               "--max-new-tokens", "2", "--save-session", tmp_path)
    assert "is a directory" in err
    # A failed save replaces nothing and leaves no temporary file behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.session"]
