import hashlib


def seed_from_name(name: str) -> int:
    """A stable seed for an entity name: the first 6 bytes of its sha256, big-endian.

    Six bytes keep the seed below 2**53, so it survives JSON (and the canonical trace) as an exact integer.
    """
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:6], "big")
