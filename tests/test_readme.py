"""Every code block of README.md runs as written, and so do the examples of docs/.

Python blocks run as scripts in a fresh folder holding a copy of `examples/` (the blocks name
paths relative to the clone's root), without any API key; their output is compared with what the
text says they print. Shell blocks run line by line through bash, each line where the previous
one left off (`cd` carries over); an `ID` placeholder is replaced by the id the commands before
it printed (a session's, or a pending item's for `approvals`). Lines that need a terminal, the
network or run until stopped are listed in SKIPPED with the reason, never dropped silently; a
block no test claims fails `test_every_block_is_checked`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conftest import V1, drive
from loopwright import Agent, ConfigError, Rules, Session, get_model
from loopwright.events import Scope
from loopwright.server.settings import ServerSettings
from loopwright.testing import ScriptedModel
from test_cli import LOOPWRIGHT

ROOT = Path(__file__).resolve().parents[1]
SUPPORT_SCRIPT = ROOT / "examples" / "agents" / "support" / "script.yaml"
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.S | re.M)
ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("LOOPWRIGHT_HOME", "LOOPWRIGHT_ENV") and not k.endswith("_API_KEY")
} | {"NO_COLOR": "1", "PATH": f"{Path(LOOPWRIGHT).parent}{os.pathsep}{os.environ['PATH']}"}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int
    """Where the block starts in its file, for messages."""


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [Block(m[1], m[2], text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def block(path: Path, lang: str, needle: str) -> Block:
    """The one block of `path` in `lang` that contains `needle`."""
    found = [b for b in blocks(path) if b.lang == lang and needle in b.code]
    assert len(found) == 1, f"{path.name}: {len(found)} {lang} blocks contain {needle!r}"
    return found[0]


def after(path: Path, first: Block) -> Block:
    """The block right after `first` (the output a text shows for it)."""
    listed = blocks(path)
    return listed[listed.index(first) + 1]


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A folder with what the README's blocks name beside them: a copy of `examples/`."""
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".loopwright")
    )
    return tmp_path


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "block.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def last_reply(script: Path) -> str:
    return str(yaml.safe_load(script.read_text())["replies"][-1]["text"])


# ---- the README's blocks ----------------------------------------------------------------------

README = ROOT / "README.md"
CLAIMS = {  # the needle that picks each README block → the test that runs it
    ("sh", "bash scripts/demo"): "test_shell_blocks",
    ("sh", "pip install -e"): "test_shell_blocks",
    ("sh", "loopwright init myproject"): "test_shell_blocks",
    ("sh", "cd examples"): "test_shell_blocks",
    ("sh", "loopwright serve"): "test_shell_blocks",
    ("python", "async def main():\n    session = Session(agent)"): "test_in_python",
    ("python", 'run_sync(agent, "What is an agent loop?")'): "test_real_models",
    ("python", "open_session"): "test_durable_sessions",
    ("toml", "[server]"): "test_server_settings",
}
OUTPUTS = {"Let me look that up.\n"}  # plain blocks showing a Python block's output (compared)
LISTINGS = {"loopwright.toml            #"}  # plain blocks that are not code (a folder tree)


def test_every_block_is_checked() -> None:
    for found in blocks(README):
        if found.lang in ("", "text"):
            known = OUTPUTS | LISTINGS
            assert any(n in found.code for n in known), f"README.md:{found.line}: unclaimed"
            continue
        claims = [c for c in CLAIMS if c[0] == found.lang and c[1] in found.code]
        assert len(claims) == 1, f"README.md:{found.line}: a {found.lang} block, claimed {claims}"


def test_in_python(clone: Path) -> None:
    code = block(README, "python", "async def main():\n    session = Session(agent)")
    out = python(code.code, clone)
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == after(README, code).code
    assert "[completed]\n" in out.stdout and "refund RF-1001" in out.stdout
    # "Had the refund been above $50, the approver would have denied it"
    larger = code.code.replace('"amount": 24.99}}', '"amount": 80}}')
    assert larger != code.code
    out = python(larger, clone)
    assert out.stdout.splitlines()[-3:] == [
        "[issue_refund: deny by ana]",
        "[issue_refund: deny, matched rule 'refunds-need-approval' — human denied: refunds above "
        "$50 need a manager]",
        "[denied]",
    ]


def test_real_models(clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a key the block fails before any request, with the error the text quotes; every
    model string it shows resolves, and needs the key its comment names."""
    code = block(README, "python", 'run_sync(agent, "What is an agent loop?")').code
    out = python(code, clone)
    error = (
        "missing API key for 'anthropic': set the environment variable ANTHROPIC_API_KEY "
        "(or put it in the project's .env)"
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines()[-1] == f"loopwright.errors.ConfigError: {error}"
    prose = " ".join(README.read_text().split())
    assert f"(`ConfigError: {error}`)" in prose
    shown = re.findall(
        r'model="([\w.:-]+)",\s*# (?:reads )?(\w+_API_KEY|a local server: no key)', code
    )
    assert [m for m, _ in shown] == [
        "anthropic:claude-haiku-4-5",
        "openai:gpt-5-mini",
        "openai-responses:gpt-5",
        "ollama:qwen3",
    ]
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    # as in a fresh process: a model string another test of this worker resolved (with a key)
    # is kept for the process (`get_model` shares one client per string)
    monkeypatch.setattr("loopwright.models.registry._RESOLVED", {})
    for model, key in shown:
        if key.endswith("_API_KEY"):
            with pytest.raises(ConfigError, match=f"set the environment variable {key} "):
                get_model(model)
        else:
            assert get_model(model).name == model


def test_durable_sessions(clone: Path) -> None:
    out = python(block(README, "python", "open_session").code, clone)
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == f"paused\ncompleted {last_reply(SUPPORT_SCRIPT)}\n"
    assert (clone / ".loopwright" / "loopwright.db").is_file()


def test_server_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWRIGHT_TOKEN_GLOBEX", "globex-token-of-16-chars")
    settings = ServerSettings.from_project(tomllib.loads(block(README, "toml", "[server]").code))
    assert (settings.host, settings.port, settings.max_connections) == ("127.0.0.1", 8787, 100)
    assert (settings.request_timeout, settings.idle_timeout) == (10.0, 5.0)
    assert (settings.max_runs_per_tenant, settings.max_streams_per_tenant) == (50, 50)
    assert settings.tokens == {"a-long-random-token": "acme", "globex-token-of-16-chars": "globex"}


SKIPPED = {  # a shell line the test does not run → why
    "bash scripts/test": "it runs this very suite (and installs packages and Chromium)",
    "bash scripts/demo": "it installs loopwright with pip first (the network); the "
    "`loopwright demo` it then runs is run from the command-line block",
    "python3 -m venv .venv": "the suite already runs in a virtual environment",
    'pip install -e ".[providers]"': "the network; test_install_extras checks the extras",
    "loopwright serve": "it serves until stopped (test_cli_serve.py runs it)",
    "loopwright dev": "it serves until stopped (test_cli_serve.py runs it)",
    "pip install 'loopwright[postgres]'": "the network; the test group installs it",
    "LOOPWRIGHT_STORE_URL=": "it serves until stopped, on a PostgreSQL server "
    "(test_server_postgres.py runs two servers on one)",
}
STATUS = {  # a shell line's exit status when it is not 0
    'loopwright run support "My order A-1001 arrived damaged"': 3,  # no terminal: paused
}


def command(line: str) -> str:
    """A shell line without its trailing comment (none of the README's quotes holds a #)."""
    return line.split(" #", 1)[0].strip()


def test_install_extras() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {"providers", "openai", "anthropic"} <= set(extras["optional-dependencies"])
    assert extras["scripts"]["loopwright"] == "loopwright.cli.main:main"


def run_lines(code: str, cwd: Path, used: set[str]) -> list[tuple[str, str]]:
    """Run each line; return (command, stdout) of those that ran."""
    ids = {"session": "", "pending": ""}
    ran = []
    for line in code.splitlines():
        text = command(line)
        skipped = [s for s in SKIPPED if text.startswith(s)]
        if not text or skipped:
            used.update(skipped)
            continue
        if re.search(r"\bID\b", text):
            kind = "pending" if text.startswith("loopwright approvals") else "session"
            assert ids[kind], f"no {kind} id printed before {text!r}"
            text = re.sub(r"\bID\b", ids[kind], text)
        where = cwd / ".pwd"
        out = subprocess.run(
            ["bash", "-c", f'{text}\nstatus=$?\npwd > "{where}"\nexit $status'],
            cwd=cwd,
            env=ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        expected = STATUS.get(command(line), 0)
        assert out.returncode == expected, (line, out.stdout, out.stderr)
        cwd = Path(where.read_text().strip())
        printed = out.stdout + out.stderr
        for session in re.findall(r'\bsession ([0-9a-f]{32})\b|"sessionId":"(\w+)"', printed):
            ids["session"] = session[0] or session[1]
        for pending in re.findall(r"\b((?:apr|q)_[\w-]{8,})", printed):
            ids["pending"] = pending
        ran.append((command(line), out.stdout))
    return ran


def test_shell_blocks(clone: Path) -> None:
    used: set[str] = set()
    outputs: dict[str, str] = {}
    for found in blocks(README):
        if found.lang == "sh":
            where = clone / f"line{found.line}"
            where.mkdir()
            if "cd examples" in found.code:  # run from the clone's root
                where = clone
            outputs |= dict(run_lines(found.code, where, used))
    assert used == set(SKIPPED), f"SKIPPED lists lines the README no longer has: {SKIPPED}"
    hello = "Hello! I am support, running on a scripted model."
    assert outputs['loopwright run support "Hello"'].startswith(hello)
    assert outputs['loopwright run support --session ID "And then?"'].startswith("That was my")
    events = [
        json.loads(x)
        for x in outputs['loopwright run support --json --profile v1 "Hi"'].splitlines()
    ]
    for event in events:
        V1.validate(event)
    assert events[-1]["type"] == "done" and events[-1]["text"].startswith(hello)
    assert "issue_refund" in outputs["loopwright approvals"]
    assert last_reply(SUPPORT_SCRIPT) in outputs["loopwright approvals approve ID"]
    assert "support" in outputs["loopwright sessions"]
    assert outputs["loopwright sessions export ID"].startswith('{"seq":1,')
    assert last_reply(SUPPORT_SCRIPT) in outputs["loopwright demo"]


# ---- docs/ ------------------------------------------------------------------------------------

DOCS = ROOT / "docs"


def test_every_doc_is_linked_from_the_readme() -> None:
    for doc in sorted(DOCS.glob("*.md")):
        assert f"(docs/{doc.name})" in README.read_text(), doc.name


def test_docs_say_no_spec_section() -> None:
    """Users have no SPEC: nothing they read or get scaffolded points to one."""
    for path in [README, *DOCS.glob("*.md"), ROOT / "src/loopwright/cli/new.py"]:
        assert "SPEC" not in path.read_text(), path
    for path in (ROOT / "examples").rglob("*"):
        if path.suffix in (".yaml", ".yml", ".toml", ".py", ".md"):
            assert "SPEC" not in path.read_text(), path


def test_approvals_doc_runs(clone: Path) -> None:
    doc = DOCS / "approvals.md"
    code = "\n\n".join(b.code for b in blocks(doc) if b.lang == "python")
    out = python(code, clone)
    assert (out.returncode, out.stderr) == (0, "")
    shown = after(doc, block(doc, "python", "def support_agent()")).code
    assert out.stdout == (
        shown + "['A-1002', 'refunded 40.00 on A-1002']\n"
        "paused ['q_']\n"
        "invalid edited arguments are invalid: amount: Input should be a valid number, unable to "
        "parse string as a number\n"
        "denied\n"
        "paused Which floor? ['1', '2']\n"
        "booked a room on floor 2 | Booked.\n"
    )


def test_scripted_models_doc_runs(clone: Path) -> None:
    doc = DOCS / "scripted-models.md"
    code = "\n\n".join(b.code for b in blocks(doc) if b.lang == "python")
    out = python(code, clone)
    assert (out.returncode, out.stderr, out.stdout) == (0, "", "Hello!\n1 1\nYou said: hello\n")


async def test_scripted_models_doc_scripts() -> None:
    scripts = [
        yaml.safe_load(b.code) for b in blocks(DOCS / "scripted-models.md") if b.lang == "yaml"
    ]
    assert len(scripts) == 3
    for script in scripts:
        ScriptedModel.from_script(script)
    result = await drive(Session(Agent(model=ScriptedModel.from_script(scripts[1]))).run("hi"))
    kinds = [e.type for e in result.events if e.type in ("model:retry", "text:delta")]
    assert kinds == ["model:retry", "text:delta", "model:retry", "text:delta", "text:delta"]
    assert (result.stop_reason, result.text) == ("completed", "Answered on the third try.")


def test_rules_doc(clone: Path) -> None:
    doc = DOCS / "rules.md"
    files = [Rules.from_yaml(b.code) for b in blocks(doc) if b.lang == "yaml"]
    assert len(files) == 6

    def decide(rules: Rules, tool: str, args: dict[str, object], **scope: str) -> str:
        where = {"tenant": "default", "environment": "production", "agent": "support"} | scope
        decision = rules.decide(tool, args, Scope(**where))
        return f"{decision.kind}: {decision.reason}"

    first, scopes, support, shell, email, tenants = files
    assert decide(first, "issue_refund", {"amount": 30}) == "allow: matched rule 'small-refunds'"
    assert decide(first, "issue_refund", {"amount": 80}) == "ask: matched rule 'other-refunds'"
    assert [r.name for r in scopes.rules] == [
        "acme-prod",
        "acme-support",
        "staging",
        "billing-agent",
    ]
    assert [decide(support, "issue_refund", {"amount": a})[:4] for a in (30, 200, 900)] == [
        "allo",
        "ask:",
        "deny",
    ]
    commands = {"ls -la": "allow", "ls; sudo rm x": "deny", "cat a > b": "ask", "sudo ls": "deny"}
    for text, kind in commands.items():
        assert decide(shell, "shell", {"command": text}).startswith(kind), text
    assert decide(email, "send_email", {"to": "ana@example.com"}).startswith("allow")
    assert (
        decide(email, "send_email", {"to": "ana@example.com", "attachments": ["x"]})[:4] == "ask:"
    )
    assert decide(email, "delete_all", {}, environment="staging").startswith("allow")
    refund = {"amount": 800}
    assert decide(tenants, "issue_refund", refund, tenant="acme", agent="billing")[:5] == "allow"
    assert decide(tenants, "issue_refund", refund, tenant="globex", agent="billing")[:4] == "deny"
    assert decide(tenants, "issue_refund", {"amount": 5}, tenant="acme")[:4] == "deny"
    assert decide(tenants, "open_ticket", {"priority": "urgent"})[:4] == "ask:"
    shown = [b.code for b in blocks(doc) if b.lang == "" and "unknown key" in b.code]
    path = clone / "agents" / "support" / "rules.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "rules:\n  - name: small\n    tool: t\n    decision: allow\n    when:\n"
        "      field: amount\n      operator: lte\n      value: 50\n"
    )
    with pytest.raises(ConfigError) as error:
        Rules.load(path)
    assert shown == [str(error.value).replace(str(clone) + "/", "") + "\n"]
    out = python(next(b.code for b in blocks(doc) if b.lang == "python"), clone)
    comments = [x.removeprefix("# ") for x in blocks(doc)[-1].code.splitlines() if x[:2] == "# "]
    assert (out.returncode, out.stdout.splitlines()) == (0, comments)
