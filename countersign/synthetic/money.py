"""Money in the generator's hot path: integer minor units (pence), formatted once at the CSV boundary."""


def format_minor(minor: int) -> str:
    """Format integer minor units as a decimal string with exactly two places ("-1234.50")."""
    if minor < 0:
        magnitude = -minor
        return f"-{magnitude // 100}.{magnitude % 100:02d}"
    return f"{minor // 100}.{minor % 100:02d}"
