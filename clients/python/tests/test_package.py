"""Tests of the package: its metadata and what the in-tree build backend
(backend/gaffer_build.py) puts in the wheel and the sdist. Installing
with pip is tested from Go (clients/packaging_test.go), in a fresh venv.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import tarfile
import tempfile
import unittest
import zipfile
from contextlib import contextmanager
from typing import Dict, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "backend"))

import gaffer_build  # noqa: E402
import gaffer_worker  # noqa: E402


@contextmanager
def in_project() -> Iterator[None]:
    # PEP 517 runs the hooks with the project directory as the working one.
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(old)


def pyproject() -> Dict[str, object]:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        return gaffer_build.read_toml(f.read())


class MetadataTest(unittest.TestCase):
    def test_the_module_and_pyproject_carry_one_version(self) -> None:
        project = pyproject()["project"]
        assert isinstance(project, dict)
        self.assertEqual(gaffer_worker.__version__, project["version"])

    def test_the_backend_needs_nothing_to_download(self) -> None:
        system = pyproject()["build-system"]
        self.assertEqual(system, {"requires": [], "build-backend": "gaffer_build", "backend-path": ["backend"]})

    @unittest.skipIf(sys.version_info < (3, 11), "tomllib is Python 3.11+")
    def test_read_toml_reads_pyproject_as_tomllib_does(self) -> None:
        import tomllib

        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            raw = f.read()
        self.assertEqual(gaffer_build.read_toml(raw.decode()), tomllib.loads(raw.decode()))

    def test_read_toml_refuses_what_it_does_not_know(self) -> None:
        for bad in ['[project]\nlicense = {text = "MIT"}', '[project]\nname = "a\\"b"', "[project]\nx = 1",
                    '[project]\nclassifiers = ["a",\n', "[project\n"]:
            with self.assertRaises(ValueError, msg=bad):
                gaffer_build.read_toml(bad)
        self.assertEqual(gaffer_build.read_toml('[a.b] # c\nk = "v # not a comment" # comment\nl = [\n "x", # one\n]\n'),
                         {"a": {"b": {"k": "v # not a comment", "l": ["x"]}}})


class BuildTest(unittest.TestCase):
    def test_the_wheel_installs_a_typed_package_with_its_licence(self) -> None:
        with tempfile.TemporaryDirectory() as out, in_project():
            self.assertEqual(gaffer_build.get_requires_for_build_wheel(), [])
            name = gaffer_build.build_wheel(out)
            self.assertEqual(name, "gaffer_worker-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(out, name)) as z:
                names = sorted(z.namelist())
                self.assertEqual(names, sorted([
                    "gaffer_worker/__init__.py", "gaffer_worker/py.typed",
                    "gaffer_worker-0.1.0.dist-info/METADATA", "gaffer_worker-0.1.0.dist-info/WHEEL",
                    "gaffer_worker-0.1.0.dist-info/LICENSE", "gaffer_worker-0.1.0.dist-info/RECORD",
                ]))
                with open(os.path.join(ROOT, "gaffer_worker.py"), "rb") as f:
                    self.assertEqual(z.read("gaffer_worker/__init__.py"), f.read())
                self.assertIn(b"Apache License", z.read("gaffer_worker-0.1.0.dist-info/LICENSE"))
                meta = z.read("gaffer_worker-0.1.0.dist-info/METADATA").decode()
                for line in ["Metadata-Version: 2.1", "Name: gaffer-worker", "Version: 0.1.0", "License: Apache-2.0",
                             "Requires-Python: >=3.9", "Classifier: Typing :: Typed"]:
                    self.assertIn(line + "\n", meta)
                self.assertNotIn("Requires-Dist", meta)
                # RECORD names every other file with its hash and size.
                record = z.read("gaffer_worker-0.1.0.dist-info/RECORD").decode().splitlines()
                self.assertEqual(len(record), len(names))
                for line in record:
                    path, digest, size = line.rsplit(",", 2)
                    if path.endswith("/RECORD"):
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, size), ("sha256=" + want, str(len(data))), path)
            # Built twice, the wheel is the same bytes.
            with tempfile.TemporaryDirectory() as again:
                gaffer_build.build_wheel(again)
                self.assertEqual(open(os.path.join(out, name), "rb").read(), open(os.path.join(again, name), "rb").read())

    def test_the_sdist_builds_again_on_its_own(self) -> None:
        with tempfile.TemporaryDirectory() as work:
            with in_project():
                name = gaffer_build.build_sdist(work)
            self.assertEqual(name, "gaffer_worker-0.1.0.tar.gz")
            with tarfile.open(os.path.join(work, name)) as tar:
                names = tar.getnames()
                for want in ["PKG-INFO", "LICENSE", "pyproject.toml", "README.md", "gaffer_worker.py",
                             "backend/gaffer_build.py", "tests/test_worker.py", "tests/fake_node.py"]:
                    self.assertIn("gaffer_worker-0.1.0/" + want, names)
                tar.extractall(work, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
            # Unpacked away from the repository (no ../../LICENSE), the
            # sdist builds a wheel from what it holds.
            old = os.getcwd()
            os.chdir(os.path.join(work, "gaffer_worker-0.1.0"))
            try:
                wheel = gaffer_build.build_wheel(work)
            finally:
                os.chdir(old)
            with zipfile.ZipFile(os.path.join(work, wheel)) as z:
                self.assertIn(b"Apache License", z.read("gaffer_worker-0.1.0.dist-info/LICENSE"))

    def test_an_unknown_project_key_is_refused(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "pyproject.toml"), "w") as f:
                f.write('[project]\nname = "x"\nversion = "1"\nscripts = "nope"\n')
            old = os.getcwd()
            os.chdir(d)
            try:
                with self.assertRaisesRegex(ValueError, "scripts"):
                    gaffer_build.build_wheel(d)
            finally:
                os.chdir(old)


if __name__ == "__main__":
    unittest.main()
