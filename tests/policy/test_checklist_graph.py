import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy import Checklist, ChecklistTask, Policy, PolicyError, UnknownTaskError, load_checklist
from tests.policy.conftest import CHECKLIST_PATH


def task(task_id: str, *depends_on: str) -> ChecklistTask:
    return ChecklistTask(
        id=task_id,
        title=task_id,
        specialist=None,
        depends_on=depends_on,
        risk_tier="low",
        requires_gate=False,
    )


def test_shipped_order_puts_dependencies_first_and_signoff_last(policy: Policy) -> None:
    checklist = load_checklist(CHECKLIST_PATH, policy)
    order = checklist.topological_order()
    assert order[-2:] == ("variance_analysis", "close_signoff")
    assert order.index("ap_reconciliation") < order.index("accruals")


def test_ties_among_ready_tasks_are_broken_by_file_order() -> None:
    checklist = Checklist(tasks=(task("d", "c"), task("c"), task("a", "c"), task("b")), digest="x")
    # c and b are ready first; c is earlier. Then d, a, b are ready and go in file order.
    assert checklist.topological_order() == ("c", "d", "a", "b")


def test_dependents_are_direct_and_downstream_is_transitive(policy: Policy) -> None:
    checklist = load_checklist(CHECKLIST_PATH, policy)
    assert checklist.dependents("ap_reconciliation") == ("accruals", "variance_analysis")
    assert checklist.dependents("close_signoff") == ()
    assert checklist.downstream("ap_reconciliation") == ("accruals", "variance_analysis", "close_signoff")


def test_unknown_task_lookup_is_refused() -> None:
    with pytest.raises(UnknownTaskError):
        Checklist(tasks=(task("a"),), digest="x").task("b")


def test_directly_built_checklist_with_a_cycle_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"dependency cycle: a -> b -> a"):
        Checklist(tasks=(task("a", "b"), task("b", "a")), digest="x")


@st.composite
def dags(draw: st.DrawFn) -> tuple[ChecklistTask, ...]:
    count = draw(st.integers(min_value=1, max_value=12))
    names = [f"t{index}" for index in range(count)]
    built = []
    for index, name in enumerate(names):
        earlier = draw(st.lists(st.sampled_from(names[:index]), unique=True)) if index else []
        built.append(task(name, *earlier))
    return tuple(draw(st.permutations(built)))


@given(tasks=dags())
def test_topological_order_respects_every_dependency(tasks: tuple[ChecklistTask, ...]) -> None:
    order = Checklist(tasks=tasks, digest="x").topological_order()
    assert sorted(order) == sorted(item.id for item in tasks)
    position = {task_id: index for index, task_id in enumerate(order)}
    for item in tasks:
        assert all(position[dependency] < position[item.id] for dependency in item.depends_on)
