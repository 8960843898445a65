"""One wheel for the packaging tests: the one the image would build, from exactly what the Dockerfile copies."""

from __future__ import annotations

import pytest

from countersign.bootstrap.settings import PROJECT_ROOT
from tests.packaging.docker_context import Built, build_wheel_as_the_image_does


@pytest.fixture(scope="session")
def image_build(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The Dockerfile's wheel stage replayed in an empty folder from the checkout as build context (not failing here:
    the tests say what went wrong)."""
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text(encoding="utf-8")
    return build_wheel_as_the_image_does(dockerfile, PROJECT_ROOT, tmp_path_factory.mktemp("image"))
