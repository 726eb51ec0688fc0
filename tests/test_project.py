"""Projects on disk: loopwright.toml, .env, agent.yaml / agent.py, tools.py, rules.yaml, and
discovery errors that name the file and line."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from conftest import drive
from loopwright import ConfigError, Session
from loopwright.project import load_project

SCRIPT = """replies:
  - tool_calls: [{name: lookup, args: {order: A-1}}]
  - text: "Order A-1 shipped."
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


GOOD = {
    "loopwright.toml": '[defaults]\nmodel = "scripted:script.yaml"\nmax_turns = 5\n',
    ".env": "LOOPWRIGHT_TEST_SECRET=from-dotenv\n",
    "agents/support/agent.yaml": """\
        description: Answers order questions.
        instructions: You are a support agent.
        on_deny: continue
        compaction: {keep_last: 8}
        retry: {attempts: 1}
        """,
    "agents/support/script.yaml": SCRIPT,
    "agents/support/tools.py": """\
        import os
        from loopwright import tool

        @tool
        def lookup(order: str) -> str:
            \"\"\"Look an order up.\"\"\"
            return f"{order}: shipped ({os.environ['LOOPWRIGHT_TEST_SECRET']})"
        """,
    "agents/support/rules.yaml": "rules:\n  - {name: lookups, tool: lookup, decision: allow}\n",
    "agents/billing/agent.py": """\
        from loopwright import Agent
        from loopwright.testing import ScriptedModel

        agent = Agent(name="billing", model=ScriptedModel.from_script(["Paid."]))
        """,
}


async def test_a_project_loads_its_agents_and_runs_them(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOPWRIGHT_TEST_SECRET", raising=False)
    project = load_project(write(tmp_path, GOOD))
    assert sorted(project.agents) == ["billing", "support"]
    support = project.agent("support")
    assert (support.description, support.instructions, support.max_turns, support.on_deny) == (
        "Answers order questions.",
        "You are a support agent.",
        5,
        "continue",
    )
    assert support.compaction.keep_last == 8 and support.retry.attempts == 1
    assert support.model == f"scripted:{tmp_path.resolve() / 'agents/support/script.yaml'}"
    assert [t.name for t in support.tools] == ["lookup"]
    result = await drive(Session(support).run("where is A-1?"))
    assert result.text == "Order A-1 shipped."
    outputs = [e.content for e in result.events if e.type == "tool:output"]
    assert outputs == ["A-1: shipped (from-dotenv)"]
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert decision.reason == "matched rule 'lookups'"
    assert os.environ["LOOPWRIGHT_TEST_SECRET"] == "from-dotenv"
    with pytest.raises(ConfigError, match="unknown agent 'nope' \\(agents: billing, support\\)"):
        project.agent("nope")


def broken(tmp_path: Path, name: str, text: str) -> ConfigError:
    files = {**GOOD, name: text}
    with pytest.raises(ConfigError) as info:
        load_project(write(tmp_path, files))
    return info.value


def test_a_broken_tools_module_names_its_file_and_line(tmp_path):
    error = broken(tmp_path, "agents/support/tools.py", "x = 1\nraise RuntimeError('boom')\n")
    assert str(error) == f"{tmp_path.resolve()}/agents/support/tools.py:2: RuntimeError: boom"


def test_an_unknown_model_provider_names_the_line(tmp_path):
    error = broken(tmp_path, "agents/support/agent.yaml", "instructions: hi\nmodel: warp:9\n")
    assert str(error).startswith(f"{tmp_path.resolve()}/agents/support/agent.yaml:2: unknown model")


def test_an_unknown_key_in_agent_yaml_names_the_line(tmp_path):
    error = broken(tmp_path, "agents/support/agent.yaml", "instructions: hi\n\nmax_turn: 3\n")
    assert str(error) == (
        f"{tmp_path.resolve()}/agents/support/agent.yaml:3: "
        "max_turn: Extra inputs are not permitted"
    )


def test_an_invalid_rules_file_names_the_line(tmp_path):
    error = broken(
        tmp_path,
        "agents/support/rules.yaml",
        "rules:\n  - {name: a, tool: lookup, decision: maybe}\n",
    )
    assert "agents/support/rules.yaml:2" in str(error)


def test_duplicate_agent_names_are_refused(tmp_path):
    error = broken(tmp_path, "agents/other/agent.yaml", "name: support\n")
    assert "duplicate agent name 'support'" in str(error)


def test_invalid_names_and_missing_models(tmp_path):
    error = broken(tmp_path, "agents/support/agent.yaml", "name: Support_Desk\n")
    assert "invalid agent name 'Support_Desk'" in str(error)
    files = {k: v for k, v in GOOD.items() if k != "loopwright.toml"}
    with pytest.raises(ConfigError, match="no model"):
        load_project(write(tmp_path / "nomodel", files))


def test_an_agent_py_must_export_an_agent(tmp_path):
    error = broken(tmp_path, "agents/billing/agent.py", "agent = 3\n")
    assert "agent.py must export `agent = Agent(...)`" in str(error)


def test_store_path_follows_the_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOPWRIGHT_HOME", raising=False)
    project = load_project(
        write(tmp_path, {"loopwright.toml": '[store]\npath = "data/db.sqlite"\n'})
    )
    assert project.store_path() == tmp_path.resolve() / "data" / "db.sqlite"
    assert project.agents == {}


async def test_skills_are_found_and_loaded_without_the_gate(tmp_path):
    files = {
        "agents/helper/agent.yaml": "model: scripted:script.yaml\ninstructions: Be helpful.\n",
        "agents/helper/script.yaml": """\
            replies:
              - tool_calls: [{name: Skill, args: {skill: "git:commit", args: "fix bug"}}]
              - text: done
            """,
        "agents/helper/rules.yaml": "default_decision: deny\n",
        "agents/helper/skills/git/commit/SKILL.md": """\
            ---
            name: commit
            description: Write a commit message.
            ---
            Commit with the message: $ARGUMENTS
            """,
    }
    agent = load_project(write(tmp_path, files)).agent("helper")
    assert "- git:commit: Write a commit message." in agent.instructions
    result = await drive(Session(agent).run("commit it"))
    names = [e.type for e in result.events]
    assert "skill:loaded" in names and result.text == "done"
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert (decision.decision, decision.reason) == ("allow", "built-in: not gated")
    output = next(e for e in result.events if e.type == "tool:output")
    assert output.content.strip() == "Commit with the message: fix bug"


PAYER_PY = """\
    from pathlib import Path

    from loopwright import Agent, Rules, tool
    from loopwright.testing import ScriptedModel


    @tool
    def pay(amount: int) -> str:
        \"\"\"Pay.\"\"\"
        return f"paid {amount}"


    script = [{"tool_calls": [{"name": "pay", "args": {"amount": 5}, "id": "p1"}]}, "ok"]
    agent = Agent(
        name="payer",
        model=ScriptedModel.from_script(script),
        tools=[pay],
        RULES
    )
    """
PAYER_RULES = "rules:\n  - {name: no-payments, tool: pay, decision: deny}\n"


def payer(tmp_path: Path, rules: str, *, beside: bool = True) -> dict[str, str]:
    files = {"agents/payer/agent.py": PAYER_PY.replace("RULES", rules)}
    return files | ({"agents/payer/rules.yaml": PAYER_RULES} if beside else {})


async def test_the_rules_yaml_beside_an_agent_py_applies_to_it(tmp_path):
    agent = load_project(write(tmp_path, payer(tmp_path, ""))).agent("payer")
    result = await drive(Session(agent).run("pay"))
    decision = next(e for e in result.events if e.type == "actauth:decision")
    assert (decision.decision, decision.reason) == ("deny", "matched rule 'no-payments'")
    assert result.stop_reason == "denied"


def test_an_agent_py_may_name_the_rules_yaml_beside_it(tmp_path):
    same = 'rules=Path(__file__).with_name("rules.yaml"),'
    agent = load_project(write(tmp_path, payer(tmp_path, same))).agent("payer")
    assert agent.gate().rules.rules[0].name == "no-payments"
    # without a rules.yaml beside it, an agent.py's own rules stand alone
    own = 'rules=Rules.from_yaml("rules: []"),'
    assert load_project(write(tmp_path / "own", payer(tmp_path, own, beside=False))).agent("payer")


@pytest.mark.parametrize(
    "rules", ['rules=Rules.from_yaml("rules: []"),', 'rules=Path(__file__).with_name("x.yaml"),']
)
def test_an_agent_py_with_its_own_rules_and_a_rules_yaml_beside_it_is_an_error(tmp_path, rules):
    folder = tmp_path.resolve() / "agents" / "payer"
    folder.mkdir(parents=True)
    (folder / "x.yaml").write_text("rules: []\n")
    with pytest.raises(ConfigError) as error:
        load_project(write(tmp_path, payer(tmp_path, rules)))
    assert str(error.value) == (
        f"{folder}/agent.py:18: agent 'payer' sets `rules=` and {folder}/rules.yaml is beside "
        "it: one of the two would be ignored; keep one (delete rules.yaml, or drop `rules=` so "
        "that rules.yaml applies)"
    )
