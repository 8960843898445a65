"""C2SP checkpoints and signed notes: Go's sumdb/note vectors, strict parsing, and tamper rejection."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.audit.checkpoint import (
    MAX_NOTE_SIGNATURES,
    Checkpoint,
    CheckpointError,
    NoteError,
    NoteKeyError,
    encode_signer_key,
    encode_verifier_key,
    generate_signer,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_signer_key,
    parse_verifier_key,
    sign_checkpoint,
    sign_note,
)

GO: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "note" / "go_sumdb_note_vectors.json").read_text("utf-8")
)
TEXT: bytes = GO["text"].encode("utf-8")
SIGNED: bytes = GO["signed_note"].encode("utf-8")
PETER_LINE: str = GO["peter_signature_line"]
ENOCH_LINE: str = GO["enoch_signature_line"]

# The example body in C2SP tlog-checkpoint.md (github.com/C2SP/C2SP).
C2SP_EXAMPLE_BODY = b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def _note(*lines: str) -> bytes:
    return TEXT + b"\n" + "".join(lines).encode("utf-8")


def test_go_keys_parse_and_encode_back_unchanged() -> None:
    signer = parse_signer_key(GO["signer_key"])
    verifier = parse_verifier_key(GO["verifier_key"])
    assert (signer.name, f"{signer.key_id:08x}") == (GO["key_name"], GO["key_id"])
    assert (verifier.name, f"{verifier.key_id:08x}") == (GO["key_name"], GO["key_id"])
    assert encode_signer_key(signer) == GO["signer_key"]
    assert encode_verifier_key(verifier) == GO["verifier_key"]
    assert encode_verifier_key(signer.verifier()) == GO["verifier_key"]


def test_signature_over_the_go_text_equals_the_go_vector() -> None:
    assert sign_note(TEXT, parse_signer_key(GO["signer_key"])) == SIGNED


def test_go_signed_note_opens_to_its_text() -> None:
    assert open_note(SIGNED, parse_verifier_key(GO["verifier_key"])) == TEXT


def test_every_single_byte_change_to_the_go_note_is_rejected() -> None:
    verifier = parse_verifier_key(GO["verifier_key"])
    for position in range(len(SIGNED)):
        for replacement in ((SIGNED[position] + 1) % 256, SIGNED[position] ^ 0x40):
            tampered = bytearray(SIGNED)
            tampered[position] = replacement
            with pytest.raises(NoteError):
                open_note(bytes(tampered), verifier)


def test_each_key_of_a_doubly_signed_go_note_opens_it() -> None:
    note = _note(PETER_LINE, ENOCH_LINE)
    assert open_note(note, parse_verifier_key(GO["verifier_key"])) == TEXT
    assert open_note(note, parse_verifier_key(GO["enoch_verifier_key"])) == TEXT


def test_note_without_a_signature_by_the_key_is_rejected() -> None:
    with pytest.raises(NoteError, match="no signature by key PeterNeumann"):
        open_note(_note(ENOCH_LINE), parse_verifier_key(GO["verifier_key"]))
    with pytest.raises(NoteError, match="no signature by key"):
        open_note(SIGNED, generate_signer(GO["key_name"]).verifier())


def test_corrupted_signature_by_the_known_key_is_rejected_even_next_to_a_good_one() -> None:
    corrupted = PETER_LINE[:60] + "ABCD" + PETER_LINE[60:]
    verifier = parse_verifier_key(GO["verifier_key"])
    with pytest.raises(NoteError, match="invalid signature for key PeterNeumann\\+c74f20a3"):
        open_note(_note(corrupted), verifier)
    with pytest.raises(NoteError, match="invalid signature"):
        open_note(_note(PETER_LINE, corrupted), verifier)


@pytest.mark.parametrize(
    "note",
    [
        GO["text"],
        GO["text"] + "\n",
        GO["text"] + "\n" + PETER_LINE[:-1],
        "\x01" + GO["text"] + "\n" + PETER_LINE,
        GO["text"]
        + "\n"
        + "— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
        GO["text"] + "\n" + PETER_LINE + "Unexpected line.\n",
        GO["text"] + "\n" + PETER_LINE * (MAX_NOTE_SIGNATURES + 1),
        GO["text"] + "\n" + "— PeterNeumann \n",
        GO["text"] + "\n" + "— PeterNeumann AAAA\n",
    ],
    ids=[
        "no-signatures",
        "blank-only",
        "no-final-newline",
        "control",
        "bad-name",
        "trailing",
        "too-many",
        "empty",
        "short",
    ],
)
def test_malformed_notes_from_go_open_are_rejected(note: str) -> None:
    with pytest.raises(NoteError):
        open_note(note.encode("utf-8"), parse_verifier_key(GO["verifier_key"]))


def test_invalid_utf8_note_is_rejected() -> None:
    with pytest.raises(NoteError, match="UTF-8"):
        open_note(b"\xff" + SIGNED, parse_verifier_key(GO["verifier_key"]))


def test_sign_note_refuses_text_without_final_newline_or_with_control_characters() -> None:
    signer = parse_signer_key(GO["signer_key"])
    for text in (b"abc", b"a\rb\n", b"\xff\n"):
        with pytest.raises(NoteError):
            sign_note(text, signer)


@pytest.mark.parametrize("key", ["verifier_key", "signer_key"])
def test_every_truncation_and_single_character_change_of_a_go_key_is_rejected(key: str) -> None:
    encoded = GO[key]
    parse = parse_verifier_key if key == "verifier_key" else parse_signer_key
    for start in range(len(encoded) + 1):
        for end in range(start + 1, len(encoded) + 1):
            if (start, end) != (0, len(encoded)):
                with pytest.raises(NoteKeyError):
                    parse(encoded[start:end])
    for position in range(len(encoded)):
        changed = encoded[:position] + chr(ord(encoded[position]) + 1) + encoded[position + 1 :]
        with pytest.raises(NoteKeyError):
            parse(changed)


def test_go_bad_verifier_keys_are_rejected() -> None:
    for encoded in GO["bad_verifier_keys"]:
        with pytest.raises(NoteKeyError):
            parse_verifier_key(encoded)


def test_generated_keys_round_trip_and_sign() -> None:
    signer = generate_signer("countersign.example/close-trace")
    again = parse_signer_key(encode_signer_key(signer))
    verifier = parse_verifier_key(encode_verifier_key(signer.verifier()))
    assert again.key_id == signer.key_id == verifier.key_id
    note = sign_note(b"hello\n", again)
    assert note == sign_note(b"hello\n", signer)
    assert open_note(note, verifier) == b"hello\n"
    assert "PRIVATE" not in repr(signer)


@pytest.mark.parametrize("name", ["", "a b", "a+b", "a\u00a0b", "a\nb", "a\x01b", "a\ud800b"])
def test_key_names_with_spaces_pluses_or_nothing_are_refused(name: str) -> None:
    with pytest.raises(NoteKeyError):
        generate_signer(name)


def test_c2sp_example_checkpoint_body_parses_and_formats_back() -> None:
    checkpoint = parse_checkpoint(C2SP_EXAMPLE_BODY)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert checkpoint.extensions == ()
    assert checkpoint.body() == C2SP_EXAMPLE_BODY


def test_signed_checkpoint_opens_and_a_changed_size_does_not() -> None:
    signer = generate_signer("countersign.example/close-trace")
    checkpoint = Checkpoint("countersign.example/close-trace", 8, bytes(range(32)), ("extra",))
    note = sign_checkpoint(checkpoint, signer)
    assert open_checkpoint(note, signer.verifier()) == checkpoint
    with pytest.raises(NoteError):
        open_checkpoint(note.replace(b"\n8\n", b"\n9\n", 1), signer.verifier())


def test_checkpoint_note_that_is_not_a_checkpoint_raises_checkpoint_error() -> None:
    signer = generate_signer("log")
    with pytest.raises(CheckpointError):
        open_checkpoint(sign_note(b"just one line\n", signer), signer.verifier())


@pytest.mark.parametrize(
    "fields",
    [
        {"origin": ""},
        {"origin": "a\nb"},
        {"origin": "a\ud800"},
        {"size": -1},
        {"size": 2**64},
        {"size": True},
        {"root": bytes(31)},
        {"extensions": ("",)},
        {"extensions": ("a\tb",)},
    ],
)
def test_checkpoint_fields_that_cannot_be_written_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint(**{"origin": "log", "size": 1, "root": bytes(32), **fields})


ROOT_B64 = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"origin\n1\n",
        f"origin\n1\n{ROOT_B64}".encode(),
        f"\n1\n{ROOT_B64}\n".encode(),
        f"origin\n01\n{ROOT_B64}\n".encode(),
        f"origin\n+1\n{ROOT_B64}\n".encode(),
        f"origin\n 1\n{ROOT_B64}\n".encode(),
        f"origin\n1_0\n{ROOT_B64}\n".encode(),
        f"origin\n\u0661\n{ROOT_B64}\n".encode(),
        f"origin\n-1\n{ROOT_B64}\n".encode(),
        f"origin\n{2**64}\n{ROOT_B64}\n".encode(),
        f"origin\n1\n{ROOT_B64[:-1]}\n".encode(),
        f"origin\n1\n{ROOT_B64[:-2]}J=\n".encode(),
        f"origin\n1\n{ROOT_B64.replace('/', '_')}\n".encode(),
        b"origin\n1\nAAAA\n",
        f"origin\r\n1\n{ROOT_B64}\n".encode(),
        f"origin\n1\n{ROOT_B64}\n\n".encode(),
        f"origin\n1\n{ROOT_B64}\nextension".encode(),
        b"\xff\n1\n" + ROOT_B64.encode() + b"\n",
    ],
)
def test_malformed_checkpoint_bodies_are_rejected(body: bytes) -> None:
    with pytest.raises(CheckpointError):
        parse_checkpoint(body)


checkpoints = st.builds(
    Checkpoint,
    origin=st.text(
        st.characters(min_codepoint=0x20, exclude_characters="\n", exclude_categories=["Cs"]), min_size=1, max_size=30
    ),
    size=st.integers(0, 2**64 - 1),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(
        st.text(st.characters(min_codepoint=0x20, exclude_categories=["Cs"]), min_size=1, max_size=10), max_size=3
    ).map(tuple),
)


@given(checkpoints)
def test_checkpoint_body_round_trips(checkpoint: Checkpoint) -> None:
    assert parse_checkpoint(checkpoint.body()) == checkpoint


def _one_byte_changed(body: bytes) -> st.SearchStrategy[bytes]:
    return st.builds(
        lambda position, value: body[:position] + bytes([value]) + body[position + 1 :],
        st.integers(0, len(body) - 1),
        st.integers(0, 255),
    )


@settings(max_examples=300)
@given(st.one_of(st.binary(max_size=80), checkpoints.map(Checkpoint.body).flatmap(_one_byte_changed)))
def test_parser_accepts_only_bodies_it_would_write(body: bytes) -> None:
    try:
        checkpoint = parse_checkpoint(body)
    except CheckpointError:
        return
    assert checkpoint.body() == body
