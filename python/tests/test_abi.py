"""The import-time check of the ctypes mirrors against geist_abi_layout()."""

import ctypes
import json
import os
import subprocess
import sys

import pytest

import geist
from geist import _lib
from geist._core import _LIB


def layout():
    return json.loads(_LIB.geist_abi_layout().decode())


def test_library_matches_mirrors():
    _lib.check_layout(layout(), _LIB.geist_abi_version())  # what import did
    assert geist.abi_version() == _lib.ABI_VERSION
    assert geist.version() == "0.1.0"


def test_every_mirror_field_checked():
    lay = layout()
    for name, mirror in _lib.MIRRORS.items():
        c = lay["structs"][name]
        assert c["size"] == ctypes.sizeof(mirror)
        assert set(c["fields"]) == {f[0] for f in mirror._fields_}


@pytest.mark.parametrize("mutate,needle", [
    (lambda l: l["structs"]["geist_sampler_params"]["fields"].__setitem__("seed", [40, 8]),
     "geist_sampler_params.seed"),
    (lambda l: l["structs"]["geist_session_params"].__setitem__("size", 200),
     "geist_session_params: libgeist's is 200 bytes"),
    (lambda l: l["structs"]["geist_model_params"]["fields"].__setitem__("n_gpu", [48, 4]),
     "struct geist_model_params: libgeist has fields"),
    (lambda l: l["structs"].pop("geist_sampler_params"), "does not describe struct"),
    (lambda l: l.__setitem__("pointer_size", 4), "4-byte pointers"),
])
def test_drifted_layout_refused(mutate, needle):
    lay = layout()
    mutate(lay)
    with pytest.raises(geist.GeistABIError, match=needle.replace(".", r"\.")):
        _lib.check_layout(lay, _lib.ABI_VERSION)


def test_other_abi_version_refused():
    other = _lib.ABI_VERSION + 1
    with pytest.raises(geist.GeistABIError, match=f"ABI version {other}"):
        _lib.check_layout(layout(), other)
    assert issubclass(geist.GeistABIError, ImportError)


def test_import_without_library_is_a_clear_error(python_env, tmp_path):
    env, py = python_env
    env["GEIST_LIBRARY"] = str(tmp_path / "nowhere" / "libgeist.so")
    r = subprocess.run([py, "-c", "import geist"], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "GeistABIError" in r.stderr and "libgeist.so not found" in r.stderr


def test_library_exports_only_the_c_abi():
    path = _lib.library_path()
    r = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("nm not available")
    names = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
    assert names and all(n.startswith("geist_") for n in names), \
        [n for n in names if not n.startswith("geist_")][:5]


def test_installed_package_uses_its_bundled_library():
    if os.environ.get("GEIST_EXPECT_INSTALLED") != "1":
        pytest.skip("run from the source tree (tests/python/run_pytest.cmake tests the install)")
    assert "site-packages" in geist.__file__
    assert "GEIST_LIBRARY" not in os.environ
    assert _lib.library_path() == os.path.join(os.path.dirname(geist.__file__), "libgeist.so")
