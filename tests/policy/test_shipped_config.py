import hashlib

from policy import Policy, gates_for_checklist, load_checklist, load_policy, parse_checklist, parse_policy
from tests.policy.conftest import CHECKLIST_PATH, RISK_PATH

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


def test_shipped_checklist_has_the_seven_close_tasks(policy: Policy) -> None:
    checklist = load_checklist(CHECKLIST_PATH, policy)
    assert checklist.task_ids == EXPECTED_TASKS


def test_default_close_needs_at_least_five_gates(policy: Policy) -> None:
    gates = gates_for_checklist(policy, load_checklist(CHECKLIST_PATH, policy))
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
    checklist = load_checklist(CHECKLIST_PATH, policy)
    assert checklist.digest == hashlib.sha256(CHECKLIST_PATH.read_bytes()).hexdigest()


def test_parsed_digest_is_stable_under_key_order_and_changes_with_content(
    policy_data: dict[str, object],
) -> None:
    reordered = dict(reversed(list(policy_data.items())))
    assert parse_policy(policy_data, "a").digest == parse_policy(reordered, "b").digest
    changed = {**policy_data, "currency": "EUR"}
    assert parse_policy(changed, "c").digest != parse_policy(policy_data, "a").digest


def test_parsing_data_yields_the_same_tasks_as_loading_the_file(
    policy: Policy, checklist_data: dict[str, object]
) -> None:
    parsed = parse_checklist(checklist_data, "data", policy)
    assert parsed.tasks == load_checklist(CHECKLIST_PATH, policy).tasks
    assert len(parsed.digest) == 64
