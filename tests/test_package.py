"""A package that installs: the wheel, built offline from a copy of the tree as `python -m build`
builds it (the sdist, then the wheel from the unpacked sdist), holds the licence, the examples,
the playground's static files, the price catalog and py.typed, with an SPDX licence expression,
classifiers and URLs; unpacked on its own it answers `python -m loopwright --version` and runs
`loopwright demo`. The command line imports a command's module only when it is chosen. (.ci/run
also installs the wheel into a fresh virtual environment, with its dependencies.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from importlib.metadata import version
from pathlib import Path

import pytest

import loopwright
from loopwright.cli.main import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "src", "examples"]
CACHES = shutil.ignore_patterns("__pycache__", "*.pyc", ".loopwright", "*.egg-info")
ANSWER = (  # the support agent's last scripted reply
    "Done! Your refund of $24.99 for order A-1001 has been issued (refund RF-1001). It should "
    "reach your original payment method within 3–5 business days. Is there anything else I can "
    "help you with?"
)


def build(tree: Path, out: Path, kind: str) -> Path:
    """setuptools' PEP 517 hook `build_{kind}` run in `tree` (no network, no pip)."""
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}({str(out)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("build")
    tree = work / "tree"
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=CACHES)
        else:
            tree.mkdir(exist_ok=True)
            shutil.copy2(source, tree / name)
    sdist = build(tree, work, "sdist")
    with tarfile.open(sdist) as archive:
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # (3.11.4 on)
        archive.extractall(work / "unpacked", **safe)  # (our own sdist, built just above)
    [unpacked] = (work / "unpacked").iterdir()
    return build(unpacked, work, "wheel")


def test_the_wheel_holds_the_license_examples_static_files_and_catalog(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    info = f"loopwright-{version('loopwright')}.dist-info"
    assert f"{info}/licenses/LICENSE" in names
    license_text = zipfile.ZipFile(wheel).read(f"{info}/licenses/LICENSE").decode()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert license_text.lstrip().startswith("Apache License\n") and "Version 2.0" in license_text
    shipped = {n.removeprefix("loopwright/examples/") for n in names if "/examples/" in n}
    tracked = {
        str(p.relative_to(ROOT / "examples"))
        for p in (ROOT / "examples").rglob("*")
        if p.is_file() and not ({"__pycache__", ".loopwright"} & set(p.parts))
    }
    assert shipped == tracked and "agents/support/agent.py" in shipped
    static = {n for n in names if n.startswith("loopwright/server/static/")}
    assert static == {
        f"loopwright/{p.relative_to(ROOT / 'src/loopwright').as_posix()}"
        for p in (ROOT / "src/loopwright/server/static").rglob("*")
        if p.is_file()
    }
    assert {"loopwright/py.typed", "loopwright/models/catalog.json", "loopwright/__main__.py"} <= (
        names
    )
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "loopwright = loopwright.cli.main:main" in entry_points


def test_the_wheel_metadata_has_an_spdx_license_classifiers_and_urls(wheel: Path):
    info = f"loopwright-{version('loopwright')}.dist-info"
    meta = Parser().parsestr(zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode())
    assert meta["Metadata-Version"] == "2.4"
    assert (meta["License-Expression"], meta.get_all("License-File"), meta["License"]) == (
        "Apache-2.0",
        ["LICENSE"],
        None,
    )
    classifiers = meta.get_all("Classifier")
    assert (
        "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    )
    assert not [c for c in classifiers if c.startswith("License ::")]  # (the expression says it)
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL"))
    assert sorted(urls) == ["Documentation", "Homepage", "Issues", "Source"]
    extras = meta.get_all("Provides-Extra")
    assert "prices" in extras and "test" not in extras  # (development tools: a dependency group)
    assert 'genai-prices>=0.2.5; extra == "prices"' in meta.get_all("Requires-Dist")


def test_the_unpacked_wheel_answers_its_version_and_the_demo(wheel: Path, tmp_path: Path):
    """The wheel alone (its dependencies from this environment): `python -m loopwright`, from a
    folder outside any clone, runs the demo from the examples the wheel ships."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "NO_COLOR": "1"}

    def loopwright(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "loopwright", *args],
            cwd=elsewhere,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )

    where = subprocess.run(
        [sys.executable, "-c", "import loopwright; print(loopwright.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(site / "loopwright" / "__init__.py")
    assert loopwright("--version").stdout == f"loopwright {version('loopwright')}\n"
    demo = loopwright("demo")
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout == ANSWER + "\n"
    assert f"from {site / 'loopwright' / 'examples' / 'agents' / 'support'} " in demo.stderr


def test_version_and_python_m_loopwright():
    assert loopwright.__version__ == version("loopwright")
    out = subprocess.run(
        [sys.executable, "-m", "loopwright", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (0, f"loopwright {loopwright.__version__}\n")


def cli_modules(*argv: str) -> list[str]:
    """The modules of `loopwright.cli` a fresh `loopwright ARGV` has loaded when it exits."""
    code = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules"
        " if m.startswith('loopwright.cli'))), file=sys.stderr))\n"
        "from loopwright.cli.main import main\n"
        "sys.exit(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=60,
    )
    return json.loads(out.stderr.strip().splitlines()[-1])


SHELL = ["loopwright.cli", "loopwright.cli.common", "loopwright.cli.logs", "loopwright.cli.main"]
"""What every start of the command line loads of `loopwright.cli`."""


def test_help_and_version_import_no_command_module():
    assert cli_modules("--version") == SHELL
    assert cli_modules("--help") == SHELL
    assert cli_modules("nosuch") == SHELL  # (argparse's "invalid choice")


@pytest.mark.parametrize(
    ("command", "modules"),
    [
        ("run", {"run"}),
        ("init", {"new"}),
        ("sessions", {"sessions"}),
        ("dev", {"serve"}),
        ("eval", {"evals"}),
        ("demo", {"demo", "run"}),  # (the demo takes run's output options)
    ],
)
def test_a_command_imports_its_own_module_only(command: str, modules: set[str]):
    every = {f"loopwright.cli.{m}" for m, _ in COMMANDS.values()}
    loaded = every.intersection(cli_modules(command, "--help"))
    assert loaded == {f"loopwright.cli.{m}" for m in modules}


def listing(parser: object) -> list[tuple[str, str | None]]:
    [commands] = [a for a in parser._subparsers._group_actions]  # type: ignore[attr-defined]
    return [(a.dest, a.help) for a in commands._choices_actions]


def test_the_command_table_is_the_commands_own():
    """`COMMANDS` (what `--help` lists without importing the commands) names every command in
    the order and with the help line its module gives it."""
    built = listing(build_parser())
    assert built == listing(build_parser(()))
    assert [name for name, _ in built] == list(COMMANDS)
