"""Shared fixtures of the geist Python tests.

Environment: GEIST_FIXTURES (default <repo>/../shared/fixtures), GEIST_REQUIRE_FIXTURES=1
(missing fixtures fail instead of skip), GEIST_CLI (the `geist` binary; default
<repo>/build/dev/bin/geist), GEIST_LIBRARY (the libgeist.so to test, when the package is
imported from the source tree rather than installed)."""

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.environ.get("GEIST_FIXTURES") or os.path.join(REPO, "..", "shared", "fixtures")
REQUIRE = os.environ.get("GEIST_REQUIRE_FIXTURES") == "1"

LLAMA = "stories260K.gguf"      # Llama, SentencePiece vocabulary of 512
QWEN35 = "stories-qwen35-f32.gguf"  # Qwen3.5 hybrid: DeltaNet recurrent + gated attention
PROMPT = "Once upon a time"


def _missing(what: str):
    if REQUIRE:
        pytest.fail(f"{what} is missing and GEIST_REQUIRE_FIXTURES=1")
    pytest.skip(f"SKIPPED: fixtures ({what} missing)")


def model_path(name: str) -> str:
    p = os.path.join(FIXTURES, "models", name)
    if not os.path.exists(p):
        _missing(p)
    return p


@pytest.fixture(params=[LLAMA, QWEN35], ids=["llama", "qwen35"])
def any_model_path(request):
    return model_path(request.param)


@pytest.fixture
def llama_path():
    return model_path(LLAMA)


@pytest.fixture
def qwen35_path():
    return model_path(QWEN35)


@pytest.fixture
def cli():
    p = os.environ.get("GEIST_CLI") or os.path.join(REPO, "build", "dev", "bin", "geist")
    if not os.path.exists(p):
        _missing(f"the geist CLI ({p})")
    return p


@pytest.fixture
def python_env():
    """Environment for a fresh interpreter that imports the same geist package."""
    env = dict(os.environ)
    import geist

    pkg_parent = os.path.dirname(os.path.dirname(geist.__file__))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    return env, sys.executable
