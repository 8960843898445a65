"""C2SP tlog-checkpoint bodies inside C2SP signed notes, with Ed25519 keys as in Go's golang.org/x/mod/sumdb/note.

A checkpoint body is three lines (origin, decimal tree size, base64 root hash) plus optional extension lines.
A signed note is the text, a blank line, then lines `— <key name> <base64(key ID || signature)>`. The key ID is
the first 4 bytes of SHA-256(key name || "\\n" || 0x01 || 32-byte Ed25519 public key). Verifier keys are encoded
as `<name>+<hex key ID>+<base64(0x01 || public key)>` and signer keys as
`PRIVATE+KEY+<name>+<hex key ID>+<base64(0x01 || private key seed)>`, byte for byte as Go does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ROOT_HASH_SIZE = 32
MAX_TREE_SIZE = 2**64 - 1
MAX_NOTE_SIGNATURES = 100
ED25519_ALGORITHM = 0x01
ED25519_KEY_SIZE = 32
ED25519_SIGNATURE_SIZE = 64

_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_KEY_ID_HEX = re.compile(r"[0-9a-f]{8}")
_SIGNATURE_PREFIX = "— "


class CheckpointError(ValueError):
    """A checkpoint body or field broke the tlog-checkpoint format; `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"checkpoint: {reason}")
        self.reason = reason


class NoteError(ValueError):
    """A note was malformed, had no signature by the expected key, or a signature did not verify."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"signed note: {reason}")
        self.reason = reason


class NoteKeyError(ValueError):
    """An encoded signer or verifier key string, or a key name, was not acceptable."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"note key: {reason}")
        self.reason = reason


def _strict_b64decode(text: str) -> bytes | None:
    """Standard padded base64 with a single valid spelling; None for anything else."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def _b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _is_one_clean_line(text: str) -> bool:
    """Non-empty, encodable as UTF-8 (no lone surrogates), no newline and no other control character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(text) and _control_character(text) is None and "\n" not in text


def _control_character(text: str) -> str | None:
    for char in text:
        if char < " " and char != "\n":
            return char
    return None


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _is_one_clean_line(self.origin):
            raise CheckpointError(f"origin {self.origin!r} must be one non-empty line without control characters")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"tree size {self.size!r} must be an integer in 0..2**64-1")
        if len(self.root) != ROOT_HASH_SIZE:
            raise CheckpointError(f"root hash is {len(self.root)} bytes, expected {ROOT_HASH_SIZE}")
        for line in self.extensions:
            if not _is_one_clean_line(line):
                raise CheckpointError(f"extension line {line!r} must be one non-empty line without control characters")

    def body(self) -> bytes:
        lines = [self.origin, str(self.size), _b64encode(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines).encode("utf-8")


def parse_checkpoint(body: bytes) -> Checkpoint:
    """Parse a checkpoint note text; accepts exactly what `Checkpoint.body` can produce."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CheckpointError(f"body is not valid UTF-8 (byte {error.start})") from None
    if not text.endswith("\n"):
        raise CheckpointError("body must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError(f"body has {len(lines)} lines, needs origin, tree size and root hash")
    origin, size_text, root_text, *extensions = lines
    if not _DECIMAL.fullmatch(size_text):
        raise CheckpointError(f"tree size {size_text!r} is not a decimal number without leading zeros")
    root = _strict_b64decode(root_text)
    if root is None:
        raise CheckpointError(f"root hash {root_text!r} is not canonical standard base64")
    size = int(size_text)
    if size > MAX_TREE_SIZE:
        raise CheckpointError(f"tree size {size_text} exceeds 2**64-1")
    return Checkpoint(origin=origin, size=size, root=root, extensions=tuple(extensions))


def is_valid_key_name(name: str) -> bool:
    """Non-empty, no Unicode spaces, no plus sign (signed-note); control characters are refused too."""
    return _is_one_clean_line(name) and "+" not in name and not any(char.isspace() for char in name)


def _check_key_name(name: str) -> None:
    if not is_valid_key_name(name):
        raise NoteKeyError(f"key name {name!r} must be non-empty without spaces, plus signs or control characters")


def key_id(name: str, public_key: Ed25519PublicKey) -> int:
    digest = hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([ED25519_ALGORITHM]) + public_key.public_bytes_raw()
    ).digest()
    return int.from_bytes(digest[:4], "big")


class NoteVerifier:
    __slots__ = ("key_id", "name", "public_key")

    def __init__(self, name: str, public_key: Ed25519PublicKey) -> None:
        _check_key_name(name)
        self.name = name
        self.public_key = public_key
        self.key_id = key_id(name, public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        if len(signature) != ED25519_SIGNATURE_SIZE:
            return False
        try:
            self.public_key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def __repr__(self) -> str:
        return f"NoteVerifier({encode_verifier_key(self)!r})"


class NoteSigner:
    __slots__ = ("_private_key", "key_id", "name")

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        _check_key_name(name)
        self.name = name
        self._private_key = private_key
        self.key_id = key_id(name, private_key.public_key())

    def sign(self, message: bytes) -> bytes:
        return self._private_key.sign(message)

    def verifier(self) -> NoteVerifier:
        return NoteVerifier(self.name, self._private_key.public_key())

    def private_seed(self) -> bytes:
        return self._private_key.private_bytes_raw()

    def __repr__(self) -> str:
        return f"NoteSigner(name={self.name!r}, key_id={self.key_id:08x})"


def generate_signer(name: str) -> NoteSigner:
    return NoteSigner(name, Ed25519PrivateKey.generate())


def encode_verifier_key(verifier: NoteVerifier) -> str:
    key = bytes([ED25519_ALGORITHM]) + verifier.public_key.public_bytes_raw()
    return f"{verifier.name}+{verifier.key_id:08x}+{_b64encode(key)}"


def encode_signer_key(signer: NoteSigner) -> str:
    key = bytes([ED25519_ALGORITHM]) + signer.private_seed()
    return f"PRIVATE+KEY+{signer.name}+{signer.key_id:08x}+{_b64encode(key)}"


def _decode_key_fields(name: str, key_id_hex: str, key_text: str) -> tuple[int, bytes]:
    _check_key_name(name)
    if not _KEY_ID_HEX.fullmatch(key_id_hex):
        raise NoteKeyError(f"key ID {key_id_hex!r} must be 8 lowercase hex digits")
    key = _strict_b64decode(key_text)
    if key is None:
        raise NoteKeyError("key data is not canonical standard base64")
    if len(key) != 1 + ED25519_KEY_SIZE:
        raise NoteKeyError(f"key data is {len(key)} bytes, expected {1 + ED25519_KEY_SIZE}")
    if key[0] != ED25519_ALGORITHM:
        raise NoteKeyError(f"key algorithm {key[0]:#04x} is not Ed25519 (0x01)")
    return int(key_id_hex, 16), key[1:]


def parse_verifier_key(encoded: str) -> NoteVerifier:
    name, _, rest = encoded.partition("+")
    key_id_hex, _, key_text = rest.partition("+")
    expected_id, raw = _decode_key_fields(name, key_id_hex, key_text)
    verifier = NoteVerifier(name, Ed25519PublicKey.from_public_bytes(raw))
    if verifier.key_id != expected_id:
        raise NoteKeyError(f"key ID {key_id_hex} does not match the key (computed {verifier.key_id:08x})")
    return verifier


def parse_signer_key(encoded: str) -> NoteSigner:
    marker = "PRIVATE+KEY+"
    if not encoded.startswith(marker):
        raise NoteKeyError("signer key must start with PRIVATE+KEY+")
    name, _, rest = encoded[len(marker) :].partition("+")
    key_id_hex, _, key_text = rest.partition("+")
    expected_id, raw = _decode_key_fields(name, key_id_hex, key_text)
    signer = NoteSigner(name, Ed25519PrivateKey.from_private_bytes(raw))
    if signer.key_id != expected_id:
        raise NoteKeyError(f"key ID {key_id_hex} does not match the key (computed {signer.key_id:08x})")
    return signer


def _check_note_text(text: bytes) -> str:
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NoteError(f"not valid UTF-8 (byte {error.start})") from None
    control = _control_character(decoded)
    if control is not None:
        raise NoteError(f"control character {control!r} is not allowed")
    return decoded


def sign_note(text: bytes, signer: NoteSigner) -> bytes:
    """The signed note: `text`, a blank line, and one signature line by `signer`."""
    _check_note_text(text)
    if not text.endswith(b"\n"):
        raise NoteError("note text must end with a newline")
    signature = signer.key_id.to_bytes(4, "big") + signer.sign(text)
    line = f"{_SIGNATURE_PREFIX}{signer.name} {_b64encode(signature)}\n"
    return text + b"\n" + line.encode("utf-8")


def open_note(note: bytes, verifier: NoteVerifier) -> bytes:
    """Verify `note` and return its text.

    Signatures by other keys (another name or key ID) are ignored, as signed-note requires; every signature by
    the verifier's key must verify (stricter than Go, which checks only the first of duplicates), and at least
    one must be present.
    """
    _check_note_text(note)
    split = note.rfind(b"\n\n")
    if split < 0:
        raise NoteError("no blank line before the signatures")
    text, signature_block = note[: split + 1], note[split + 2 :]
    if not signature_block.endswith(b"\n"):
        raise NoteError("signature block must be non-empty and end with a newline")
    lines = signature_block[:-1].decode("utf-8").split("\n")
    if len(lines) > MAX_NOTE_SIGNATURES:
        raise NoteError(f"{len(lines)} signature lines exceed the limit of {MAX_NOTE_SIGNATURES}")
    verified = 0
    for number, line in enumerate(lines, start=1):
        if not line.startswith(_SIGNATURE_PREFIX):
            raise NoteError(f"signature line {number} does not start with an em dash and a space")
        name, _, encoded = line[len(_SIGNATURE_PREFIX) :].partition(" ")
        signature = _strict_b64decode(encoded)
        if not is_valid_key_name(name) or signature is None or len(signature) < 5:
            raise NoteError(f"signature line {number} is malformed")
        signature_key_id = int.from_bytes(signature[:4], "big")
        if name != verifier.name or signature_key_id != verifier.key_id:
            continue
        if not verifier.verify(text, signature[4:]):
            raise NoteError(f"invalid signature for key {name}+{signature_key_id:08x}")
        verified += 1
    if verified == 0:
        raise NoteError(f"no signature by key {verifier.name}+{verifier.key_id:08x}")
    return text


def sign_checkpoint(checkpoint: Checkpoint, signer: NoteSigner) -> bytes:
    return sign_note(checkpoint.body(), signer)


def open_checkpoint(note: bytes, verifier: NoteVerifier) -> Checkpoint:
    """Verify a signed checkpoint and parse its body; a body that is not a checkpoint raises CheckpointError."""
    return parse_checkpoint(open_note(note, verifier))
