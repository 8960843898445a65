"""Exception types raised while loading or applying the close policy and workflow files."""


class PolicyError(ValueError):
    """A policy or workflow input is invalid. Names the file, the field and the reason."""

    def __init__(self, source: str, field: str, reason: str) -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


class WorkflowPolicyMismatch(PolicyError):
    """A workflow file's own `requires_gate` claim disagrees with the gate the policy derives."""

    def __init__(self, source: str, task: str, workflow_value: bool, policy_value: bool, tier: str) -> None:
        claim = "true" if workflow_value else "false"
        verdict = "requires a gate" if policy_value else "requires no gate"
        super().__init__(
            source,
            f"tasks[{task}].requires_gate",
            f"workflow says {claim} but policy (tier {tier}) {verdict}",
        )
        self.task = task
        self.workflow_value = workflow_value
        self.policy_value = policy_value
        self.tier = tier


class UnknownTierError(LookupError):
    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        super().__init__(f"unknown risk tier {name!r}; known tiers: {', '.join(known)}")
        self.name = name
        self.known = known


class UnknownTaskError(LookupError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"unknown workflow task {task_id!r}")
        self.task_id = task_id


class GateInputError(ValueError):
    """A caller passed gate derivation something it cannot judge (e.g. a float or NaN amount)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
