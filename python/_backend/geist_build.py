"""PEP 517 build backend for the geist package: standard library only, no network.

The wheel holds python/geist/*.py and the libgeist.so a CMake build made, found as
  1. config setting `libgeist=PATH` (pip install --config-settings libgeist=PATH ./python),
  2. $GEIST_LIBRARY,
  3. the newest <repo>/build/*/lib/libgeist.so.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import os
import sysconfig
import tarfile
import zipfile

NAME = "geist"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
DIST_INFO = f"{NAME}-{VERSION}.dist-info"

METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: Python bindings of the geist LLM inference engine (ctypes over libgeist.so)
Requires-Python: >=3.9
Provides-Extra: numpy
Requires-Dist: numpy; extra == "numpy"
"""


def _tag() -> str:
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{plat}"


def _library(config_settings) -> str:
    cs = config_settings or {}
    path = cs.get("libgeist") or os.environ.get("GEIST_LIBRARY")
    if not path:
        # a sanitizer build's library cannot be loaded into a plain interpreter: skip those
        found = [p for p in glob.glob(os.path.join(HERE, "..", "build", "*", "lib", "libgeist.so"))
                 if not _sanitized(p)]
        if not found:
            raise RuntimeError(
                "geist_build: no libgeist.so (of a build without sanitizers) found: build it "
                "first (ninja -C build/<dir> geist_shared), or name it with GEIST_LIBRARY=PATH "
                "or --config-settings libgeist=PATH")
        path = max(found, key=os.path.getmtime)
    if not os.path.isfile(path):
        raise RuntimeError(f"geist_build: {path} is not a file")
    return os.path.abspath(path)


def _sanitized(path: str) -> bool:
    with open(path, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"libasan.so" in data or b"__tsan_init" in data


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _wheel_file() -> str:
    return (f"Wheel-Version: 1.0\nGenerator: geist_build {VERSION}\nRoot-Is-Purelib: false\n"
            f"Tag: {_tag()}\n")


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(METADATA)
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(_wheel_file())
    return DIST_INFO


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    lib = _library(config_settings)
    files: list[tuple[str, bytes, int]] = []  # (name in wheel, bytes, mode)
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                files.append((f"{NAME}/{name}", f.read(), 0o644))
    with open(lib, "rb") as f:
        files.append((f"{NAME}/libgeist.so", f.read(), 0o755))
    files.append((f"{DIST_INFO}/METADATA", METADATA.encode(), 0o644))
    files.append((f"{DIST_INFO}/WHEEL", _wheel_file().encode(), 0o644))
    record = [_record_line(n, d) for n, d, _ in files] + [f"{DIST_INFO}/RECORD,,"]
    files.append((f"{DIST_INFO}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    wheel_name = f"{NAME}-{VERSION}-{_tag()}.whl"
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """The package sources (no library: a wheel built from it needs GEIST_LIBRARY)."""
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_backend/geist_build.py"] + [
                f"{NAME}/{n}" for n in sorted(os.listdir(os.path.join(HERE, NAME)))
                if n.endswith(".py")]:
            src = os.path.join(HERE, rel)
            if os.path.exists(src):
                t.add(src, arcname=f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return name
