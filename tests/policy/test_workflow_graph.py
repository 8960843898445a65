import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.policy import Policy, PolicyError, UnknownTaskError, Workflow, WorkflowTask, load_workflow
from tests.policy.conftest import CLOSE_WORKFLOW_PATH


def task(task_id: str, *depends_on: str) -> WorkflowTask:
    return WorkflowTask(
        id=task_id,
        title=task_id.upper(),
        handler=f"test.{task_id}",
        specialist=None,
        depends_on=depends_on,
        risk_tier="low",
        requires_gate=False,
    )


def workflow(tasks: tuple[WorkflowTask, ...]) -> Workflow:
    return Workflow(name="test", title="Test", tasks=tasks, digest="x")


def test_shipped_order_puts_dependencies_first_and_signoff_last(policy: Policy) -> None:
    close = load_workflow(CLOSE_WORKFLOW_PATH, policy)
    order = close.topological_order()
    assert order[-2:] == ("variance_analysis", "close_signoff")
    assert order.index("ap_reconciliation") < order.index("accruals")


def test_ties_among_ready_tasks_are_broken_by_file_order() -> None:
    ordered = workflow((task("d", "c"), task("c"), task("a", "c"), task("b")))
    # c and b are ready first; c is earlier. Then d, a, b are ready and go in file order.
    assert ordered.topological_order() == ("c", "d", "a", "b")


def test_dependents_are_direct_and_downstream_is_transitive(policy: Policy) -> None:
    close = load_workflow(CLOSE_WORKFLOW_PATH, policy)
    assert close.dependents("ap_reconciliation") == ("accruals", "variance_analysis")
    assert close.dependents("close_signoff") == ()
    assert close.downstream("ap_reconciliation") == ("accruals", "variance_analysis", "close_signoff")


def test_unknown_task_lookup_is_refused() -> None:
    with pytest.raises(UnknownTaskError):
        workflow((task("a"),)).task("b")


def test_directly_built_workflow_with_a_cycle_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"dependency cycle: a -> b -> a"):
        workflow((task("a", "b"), task("b", "a")))


@st.composite
def dags(draw: st.DrawFn) -> tuple[WorkflowTask, ...]:
    count = draw(st.integers(min_value=1, max_value=12))
    names = [f"t{index}" for index in range(count)]
    built = []
    for index, name in enumerate(names):
        earlier = draw(st.lists(st.sampled_from(names[:index]), unique=True)) if index else []
        built.append(task(name, *earlier))
    return tuple(draw(st.permutations(built)))


@given(tasks=dags())
def test_topological_order_respects_every_dependency(tasks: tuple[WorkflowTask, ...]) -> None:
    order = workflow(tasks).topological_order()
    assert sorted(order) == sorted(item.id for item in tasks)
    position = {task_id: index for index, task_id in enumerate(order)}
    for item in tasks:
        assert all(position[dependency] < position[item.id] for dependency in item.depends_on)


def test_title_of_reads_the_title_from_the_workflow(policy: Policy) -> None:
    close = load_workflow(CLOSE_WORKFLOW_PATH, policy)
    assert close.title_of("ap_reconciliation") == "Accounts payable subledger reconciliation"
    assert workflow((task("a"),)).title_of("a") == "A"
    with pytest.raises(UnknownTaskError):
        close.title_of("payroll")
