"""The alert rules and the dashboard in deploy/: promtool checks the rules and runs their unit tests, and every metric
name the rules and the dashboard use is one the code exposes, so renaming a metric breaks this test, not an alert.

promtool comes with Debian's `prometheus` package (`make test` installs it); without it these tests fail, saying so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from countersign.bootstrap.metrics import ServeMetrics, WorkerMetrics
from countersign.bootstrap.settings import PROJECT_ROOT

PROMETHEUS = PROJECT_ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "alerts.yml"
RULE_TESTS = PROMETHEUS / "alerts.test.yml"
DASHBOARD = PROJECT_ROOT / "deploy" / "grafana" / "countersign.json"
INSTALL = (
    "promtool is missing: install it with `apt-get install -y prometheus` (Debian's package brings /usr/bin/promtool)"
)

# What the issue asks the rules to watch, by the metric each rule reads.
WATCHED = {
    "countersign_outbox_backlog",
    "countersign_outbox_oldest_pending_age_seconds",
    "countersign_outbox_over_budget",
    "countersign_outbox_failed",
    "countersign_dispatch_dead_letters",
    "countersign_gates_overdue",
    "countersign_trace_checkpoint_age_seconds",
    "countersign_worker_last_pass_timestamp_seconds",
    "countersign_database_up",
    "countersign_jobs_oldest_ready_age_seconds",
    "countersign_jobs_failed",
}
PROMETHEUS_OWN = {"up"}  # written by Prometheus for each target, not by the code
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS |= {"inf", "nan"}


def promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("promtool")
    if executable is None:
        pytest.fail(INSTALL, pytrace=False)
    return subprocess.run([executable, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers outside label matchers, ranges and label lists that
    are neither a function (followed by a parenthesis) nor a keyword."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group()
        if text[match.end() :].lstrip().startswith("(") or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def exposed_names() -> set[str]:
    """Every sample name `serve`'s /metrics and the worker's /metrics can carry, read from their registries."""
    names = set(PROMETHEUS_OWN)
    for registry in (ServeMetrics().registry, WorkerMetrics().registry):
        for family in registry.collect():
            if family.type == "counter":
                names.add(f"{family.name}_total")
            elif family.type == "histogram":
                names |= {f"{family.name}{suffix}" for suffix in ("_bucket", "_count", "_sum")}
            else:
                names.add(family.name)
            names |= {sample.name for sample in family.samples}
    return names


def rule_expressions(rules: dict[str, Any]) -> dict[str, str]:
    return {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}


def dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def unknown_names(expressions: list[str], exposed: set[str]) -> dict[str, set[str]]:
    return {expr: missing for expr in expressions if (missing := metric_names(expr) - exposed)}


# --- promtool --------------------------------------------------------------------------------------------------


def test_promtool_checks_the_rules_and_their_unit_tests_pass() -> None:
    checked = promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    tested = promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    alerts = set(rule_expressions(yaml.safe_load(RULES.read_text())))
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case["exp_alerts"]}
    quiet = {case["alertname"] for test in tests for case in test["alert_rule_test"] if not case["exp_alerts"]}
    assert fired == alerts == quiet, (alerts - fired, alerts - quiet)


def test_the_example_prometheus_configuration_is_valid() -> None:
    checked = promtool("check", "config", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_negative_control_a_changed_threshold_fails_the_rule_unit_tests(tmp_path: Path) -> None:
    rules = RULES.read_text()
    changed = rules.replace("expr: max(countersign_gates_overdue) > 0", "expr: max(countersign_gates_overdue) > 1")
    assert changed != rules
    (tmp_path / RULES.name).write_text(changed)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert tested.returncode != 0
    assert "CountersignGatesOverdue" in tested.stdout + tested.stderr


def test_negative_control_a_broken_rule_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / RULES.name).write_text(RULES.read_text().replace("max(countersign_gates_overdue) > 0", "max(( > 0"))
    checked = promtool("check", "rules", RULES.name, cwd=tmp_path)
    assert checked.returncode != 0


def test_without_promtool_the_test_fails_and_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install -y prometheus"):
        promtool("--version")


# --- metric names ----------------------------------------------------------------------------------------------


def test_every_metric_the_rules_read_is_one_the_code_exposes() -> None:
    expressions = rule_expressions(yaml.safe_load(RULES.read_text()))
    exposed = exposed_names()
    assert unknown_names(list(expressions.values()), exposed) == {}
    read = set().union(*(metric_names(expr) for expr in expressions.values()))
    assert read >= WATCHED, WATCHED - read


def test_every_metric_the_dashboard_reads_is_exposed_and_every_metric_of_ours_has_a_panel() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = dashboard_expressions(dashboard)
    exposed = exposed_names()
    assert unknown_names(expressions, exposed) == {}
    shown = set().union(*(metric_names(expr) for expr in expressions))
    ours = {name for name in exposed if name.startswith("countersign_") and not name.endswith("_created")}
    histograms = {name.removesuffix("_bucket") for name in ours if name.endswith("_bucket")}
    # A histogram is shown by its buckets; its _count and _sum are optional.
    needed = {name for name in ours if not any(name in (f"{h}_count", f"{h}_sum") for h in histograms)}
    assert needed <= shown, sorted(needed - shown)
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= shown


def test_negative_control_a_renamed_metric_is_caught() -> None:
    exposed = exposed_names()
    assert unknown_names(["max(countersign_outbox_backlogs) > 100"], exposed) == {
        "max(countersign_outbox_backlogs) > 100": {"countersign_outbox_backlogs"}
    }
    assert metric_names(
        'sum by (le, door) (rate(countersign_decision_seconds_bucket{door="slack"}[5m])) offset 5m > bool 0.5'
    ) == {"countersign_decision_seconds_bucket"}


def test_the_dashboard_takes_its_data_source_from_a_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus" and variable["name"] == "datasource"
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert panels and len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and all(t["datasource"] == panel["datasource"] for t in panel["targets"])
        assert panel["description"], panel["title"]
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
