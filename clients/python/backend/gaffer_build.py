"""The build backend of gaffer-worker (PEP 517), standard library only.

pip builds a package in an isolated environment into which it first
installs the backend named in pyproject.toml, from PyPI. setuptools,
flit or hatchling would make `pip install ./clients/python` fail on a
machine that cannot reach PyPI. This backend has no requirements
(`requires = []`) and lives in the tree (`backend-path`), so pip has
nothing to download.

The package is one module, gaffer_worker.py. The wheel installs it as
gaffer_worker/__init__.py beside an empty py.typed, so that type checkers
read its annotations (PEP 561 marks packages, not single modules); it
imports the same either way. The metadata comes from pyproject.toml's
[project] table, read with tomllib where Python has it (3.11+) and
otherwise with read_toml below, which knows only the forms that file
uses; a [project] key this backend does not carry into the metadata is
an error, so that the file cannot promise what the wheel lacks.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

MODULE = "gaffer_worker"

# The [project] keys this backend understands.
KNOWN = {"name", "version", "description", "readme", "requires-python", "license", "dependencies",
         "classifiers", "urls"}

# What the sdist holds, besides PKG-INFO and LICENSE.
SDIST_FILES = ["pyproject.toml", "README.md", MODULE + ".py", "example.py", "backend/gaffer_build.py"]
SDIST_DIRS = ["tests"]

# Archive members get this time, so that a build is reproducible.
EPOCH = (1980, 1, 1, 0, 0, 0)


def _root() -> str:
    # pip runs the hooks with the project directory as the working one.
    return os.getcwd()


def read_toml(text: str) -> Dict[str, Any]:
    """Parse the subset of TOML pyproject.toml uses: [table] and
    [table.sub] headers, comments, and key = "string" or a list of
    strings (over several lines, trailing comma allowed), strings without
    escapes. Anything else raises ValueError naming the line."""
    doc: Dict[str, Any] = {}
    table = doc
    lines = iter(enumerate(text.splitlines(), 1))
    for n, line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", _strip_comment(line))
        if m:
            table = doc
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        m = re.fullmatch(r'([A-Za-z0-9_-]+)\s*=\s*(.*)', line)
        if not m:
            raise ValueError("pyproject.toml:%d: not a key = value line" % n)
        key, value = m.group(1), m.group(2)
        value = _strip_comment(value)
        if value.startswith("["):
            while not value.endswith("]"):
                try:
                    value += " " + _strip_comment(next(lines)[1])
                except StopIteration:
                    raise ValueError("pyproject.toml:%d: unterminated list" % n) from None
            items = value[1:-1].strip()
            if items.endswith(","):
                items = items[:-1]
            table[key] = [_string(item, n) for item in items.split(",")] if items else []
        else:
            table[key] = _string(value, n)
    return doc


def _strip_comment(value: str) -> str:
    out, quoted = [], False
    for c in value:
        if c == '"':
            quoted = not quoted
        if c == "#" and not quoted:
            break
        out.append(c)
    return "".join(out).strip()


def _string(item: str, n: int) -> str:
    m = re.fullmatch(r'"([^"\\]*)"', item.strip())
    if not m:
        raise ValueError("pyproject.toml:%d: expected a string without escapes, found %s" % (n, item.strip()))
    return m.group(1)


def _project() -> Dict[str, Any]:
    with open(os.path.join(_root(), "pyproject.toml"), "rb") as f:
        raw = f.read()
    if sys.version_info >= (3, 11):
        import tomllib

        doc = tomllib.loads(raw.decode("utf-8"))
    else:
        doc = read_toml(raw.decode("utf-8"))
    project: Dict[str, Any] = doc["project"]
    unknown = sorted(set(project) - KNOWN)
    if unknown:
        raise ValueError("pyproject.toml: [project] keys this backend does not support: %s" % ", ".join(unknown))
    if project.get("dependencies"):
        raise ValueError("pyproject.toml: gaffer-worker has no runtime dependencies (standard library only)")
    return project


def _dist_name(project: Dict[str, Any]) -> str:
    """The name as file names spell it (PEP 427, PEP 625)."""
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _license_text() -> bytes:
    # An sdist carries LICENSE; a checkout has it at the repository's root.
    for path in ("LICENSE", os.path.join("..", "..", "LICENSE")):
        full = os.path.join(_root(), path)
        if os.path.isfile(full):
            with open(full, "rb") as f:
                return f.read()
    raise FileNotFoundError("LICENSE: neither in the project directory nor at the repository's root")


def metadata(project: Dict[str, Any]) -> bytes:
    """The core metadata (METADATA, PKG-INFO), version 2.1."""
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + project["name"],
        "Version: " + project["version"],
        "Summary: " + project.get("description", ""),
        "License: " + project.get("license", ""),
        "Requires-Python: " + project.get("requires-python", ""),
    ]
    lines += ["Classifier: " + c for c in project.get("classifiers", [])]
    lines += ["Project-URL: %s, %s" % (k, v) for k, v in project.get("urls", {}).items()]
    body = ""
    readme = project.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(_root(), readme), encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _dist_info(project: Dict[str, Any]) -> Tuple[str, List[Tuple[str, bytes]]]:
    name = "%s-%s.dist-info" % (_dist_name(project), project["version"])
    wheel = "Wheel-Version: 1.0\nGenerator: gaffer_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return name, [
        (name + "/METADATA", metadata(project)),
        (name + "/WHEEL", wheel.encode()),
        (name + "/LICENSE", _license_text()),
    ]


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


# -- PEP 517 hooks --


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    name, files = _dist_info(_project())
    for path, data in files:
        full = os.path.join(metadata_directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    project = _project()
    with open(os.path.join(_root(), MODULE + ".py"), "rb") as f:
        module = f.read()
    name, dist_info = _dist_info(project)
    files = [(MODULE + "/__init__.py", module), (MODULE + "/py.typed", b"")] + dist_info
    record = "".join(_record_line(p, d) + "\n" for p, d in files) + name + "/RECORD,,\n"
    files.append((name + "/RECORD", record.encode()))
    filename = "%s-%s-py3-none-any.whl" % (_dist_name(project), project["version"])
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    files = [("PKG-INFO", metadata(project)), ("LICENSE", _license_text())]
    paths = list(SDIST_FILES)
    for d in SDIST_DIRS:
        for entry in sorted(os.listdir(os.path.join(_root(), d))):
            if entry.endswith(".py"):
                paths.append(d + "/" + entry)
    for path in paths:
        with open(os.path.join(_root(), path), "rb") as f:
            files.append((path, f.read()))
    filename = base + ".tar.gz"
    with open(os.path.join(sdist_directory, filename), "wb") as out, \
            gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[arg-type]
        for path, data in files:
            info = tarfile.TarInfo(base + "/" + path)
            info.size, info.mode, info.mtime = len(data), 0o644, 315532800  # 1980-01-01
            tar.addfile(info, io.BytesIO(data))
    return filename
