"""The gate eval's tests use the policy tests' fixtures (they moved here from tests/policy with the harness)."""

from tests.policy.conftest import policy, policy_data, workflow_data

__all__ = ["policy", "policy_data", "workflow_data"]
