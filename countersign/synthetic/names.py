import random

_FIRST = (
    "Aldgate", "Bluebell", "Brightwater", "Cobalt", "Dunmore", "Evergreen", "Fenwick", "Harbour",
    "Kestrel", "Meridian", "Northwind", "Oakridge", "Pennine", "Solent", "Thistle", "Wessex",
)  # fmt: skip
_SECOND = (
    "Consulting", "Engineering", "Foods", "Holdings", "Logistics", "Media", "Retail", "Supplies",
    "Systems", "Trading",
)  # fmt: skip
_SUFFIX = ("Ltd", "plc", "LLP")


def company_names(rng: random.Random, count: int) -> list[str]:
    """`count` distinct company names in a seed-determined order."""
    pool = [f"{first} {second} {suffix}" for first in _FIRST for second in _SECOND for suffix in _SUFFIX]
    rng.shuffle(pool)
    names = pool[:count]
    index = 0
    while len(names) < count:
        names.append(f"{pool[index % len(pool)]} ({index // len(pool) + 2})")
        index += 1
    return names
