class SpecialistInputError(ValueError):
    """A specialist payload is malformed; `field` names the offending field, `reason` says why."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid specialist input: {field}: {reason}")
