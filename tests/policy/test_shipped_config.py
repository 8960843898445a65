import hashlib

from countersign.policy import Policy, gates_for_workflow, load_policy, load_workflow, parse_policy, parse_workflow
from tests.policy.conftest import CLOSE_WORKFLOW_PATH, RISK_PATH

EXPECTED_TASKS = (
    "bank_reconciliation",
    "ap_reconciliation",
    "ar_reconciliation",
    "accruals",
    "intercompany",
    "variance_analysis",
    "close_signoff",
)


def test_shipped_policy_loads_with_tiers_ordered_low_to_critical() -> None:
    policy = load_policy(RISK_PATH)
    assert [tier.name for tier in policy.tiers] == ["low", "medium", "high", "critical"]
    assert [tier.rank for tier in policy.tiers] == [0, 1, 2, 3]
    assert policy.tier("critical").quorum == 2
    assert policy.currency == "GBP"


def test_shipped_close_workflow_has_the_seven_close_tasks_each_with_its_handler(policy: Policy) -> None:
    close = load_workflow(CLOSE_WORKFLOW_PATH, policy)
    assert close.task_ids == EXPECTED_TASKS
    assert (close.name, close.title) == ("close", "Month-end close")
    assert [task.handler for task in close.tasks] == [f"close.{task_id}" for task_id in EXPECTED_TASKS]


def test_default_close_needs_at_least_five_gates(policy: Policy) -> None:
    gates = gates_for_workflow(policy, load_workflow(CLOSE_WORKFLOW_PATH, policy))
    assert len(gates) >= 5
    assert {gate.task for gate in gates} == {
        "bank_reconciliation",
        "accruals",
        "intercompany",
        "variance_analysis",
        "close_signoff",
    }
    signoff = next(gate for gate in gates if gate.task == "close_signoff")
    assert (signoff.tier, signoff.quorum, signoff.approver_role) == ("critical", 2, "cfo")


def test_loaded_digest_is_sha256_of_file_bytes(policy: Policy) -> None:
    assert policy.digest == hashlib.sha256(RISK_PATH.read_bytes()).hexdigest()
    close = load_workflow(CLOSE_WORKFLOW_PATH, policy)
    assert close.digest == hashlib.sha256(CLOSE_WORKFLOW_PATH.read_bytes()).hexdigest()


def test_parsed_digest_is_stable_under_key_order_and_changes_with_content(
    policy_data: dict[str, object],
) -> None:
    reordered = dict(reversed(list(policy_data.items())))
    assert parse_policy(policy_data, "a").digest == parse_policy(reordered, "b").digest
    changed = {**policy_data, "currency": "EUR"}
    assert parse_policy(changed, "c").digest != parse_policy(policy_data, "a").digest


def test_parsing_data_yields_the_same_tasks_as_loading_the_file(
    policy: Policy, workflow_data: dict[str, object]
) -> None:
    parsed = parse_workflow(workflow_data, "data", policy)
    assert parsed.tasks == load_workflow(CLOSE_WORKFLOW_PATH, policy).tasks
    assert len(parsed.digest) == 64
