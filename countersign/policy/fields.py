"""Typed field readers that turn plain YAML data into values or a PolicyError naming the field."""

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation

from countersign.policy.errors import PolicyError


class Fields:
    """A mapping being read at a known field path inside a known source file."""

    def __init__(
        self,
        data: object,
        source: str,
        path: str,
        required: Sequence[str],
        optional: Sequence[str] = (),
    ) -> None:
        if not isinstance(data, Mapping):
            raise PolicyError(source, path, f"expected a mapping, got {describe(data)}")
        allowed = (*required, *optional)
        for key in data:
            if not isinstance(key, str):
                raise PolicyError(source, path, f"keys must be strings, got {describe(key)}")
            if key not in allowed:
                raise PolicyError(source, self._join(path, key), f"unknown key (allowed: {', '.join(allowed)})")
        for key in required:
            if key not in data:
                raise PolicyError(source, self._join(path, key), "missing required key")
        self._data: Mapping[str, object] = data
        self.source = source
        self.path = path

    @staticmethod
    def _join(path: str, key: str) -> str:
        return key if path in ("", "<document>") else f"{path}.{key}"

    def field(self, key: str) -> str:
        return self._join(self.path, key)

    def has(self, key: str) -> bool:
        return key in self._data

    def raw(self, key: str) -> object:
        return self._data[key]

    def error(self, key: str, reason: str) -> PolicyError:
        return PolicyError(self.source, self.field(key), reason)

    def text(self, key: str) -> str:
        value = self._data[key]
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {describe(value)}")
        if not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def optional_text(self, key: str) -> str | None:
        if self._data.get(key) is None:
            return None
        return self.text(key)

    def flag(self, key: str) -> bool:
        value = self._data[key]
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {describe(value)}")
        return value

    def integer(self, key: str, minimum: int) -> int:
        value = self._data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {describe(value)}")
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        return value

    def decimal(self, key: str, minimum: Decimal = Decimal(0)) -> Decimal:
        value = self._data[key]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            hint = ' (write money and rates as quoted strings, e.g. "1.00")' if isinstance(value, float) else ""
            raise self.error(key, f"expected a decimal string, got {describe(value)}{hint}")
        try:
            amount = Decimal(str(value).strip())
        except InvalidOperation:
            raise self.error(key, f"not a decimal number: {value!r}") from None
        if not amount.is_finite():
            raise self.error(key, f"must be a finite decimal, got {value!r}")
        if amount < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value!r}")
        return amount

    def items(self, key: str) -> list[object]:
        value = self._data[key]
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {describe(value)}")
        return value


def describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float, str)):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__
