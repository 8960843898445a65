import hashlib


def seed_from_name(name: str) -> int:
    """A stable seed for an entity name: the first 8 bytes of its sha256, big-endian."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")
