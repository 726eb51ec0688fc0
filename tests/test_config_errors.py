"""A rules file broken while the server runs: the last good rules stay in force (as documented)
and the error is not silent — logged once under `loopwright.rules`, shown in the agent's
configuration (`GET /agents/NAME/config` → `configError`, `loopwright agents --show`) until the
file loads again."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from live_server import SHOP_RULES, serving
from loopwright.cli.agents import describe, render
from test_cli_project import lw, ok

BROKEN = """\
default_decision: ask
rules:
  - {name: questions, tool: ask_user, decision: allow}
  - {name: refunds, tool: refund, decision: maybe}
"""
FIXED = SHOP_RULES.replace("refunds-need-approval", "refunds-asked")


def replace(path: Path, text: str) -> None:
    """Write the file in one step (a rename): a reader never sees half of it."""
    part = path.with_name(path.name + "~")
    part.write_text(text)
    os.replace(part, path)


def rule_names(config: dict[str, object]) -> list[str]:
    permissions = config["permissions"]
    assert isinstance(permissions, dict)
    return [r["name"] for r in permissions["rules"]]


def test_a_broken_rules_file_is_logged_and_shown_until_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="loopwright.rules")
    with serving(tmp_path / "shop") as live, live.client() as http:
        rules = live.root / "agents" / "shop" / "rules.yaml"
        before = http.get("/agents/shop/config").json()
        assert before["configError"] is None
        assert rule_names(before) == ["questions", "refunds-need-approval"]

        replace(rules, BROKEN)
        broken = http.get("/agents/shop/config").json()
        error = broken["configError"]
        assert error.startswith(f"{rules}:4: ")
        assert "decision" in error and "maybe" in error
        assert error.endswith("(the last good rules stay in force)")
        assert rule_names(broken) == ["questions", "refunds-need-approval"]  # still in force
        assert http.get("/agents/shop/config").json()["configError"] == error  # until fixed
        records = [r for r in caplog.records if r.name == "loopwright.rules"]
        assert [(r.levelno, r.getMessage()) for r in records] == [
            (
                logging.ERROR,
                f"{error.removesuffix(' (the last good rules stay in force)')}; "
                "the last good rules stay",
            )
        ]  # once per broken version, however often it is looked at

        agent = live.app.state.loopwright.project.agents["shop"]
        shown = render(describe(agent, rules.parent)).splitlines()
        assert f"rules error: {error}" in shown
        assert "  refunds-need-approval: refund → ask" in shown
        # a new process has no last good version: it says what is wrong and stops
        fresh = lw(live.root, "agents", "--show", "shop")
        assert fresh.returncode == 2 and fresh.stdout == ""
        assert "agents/shop/rules.yaml:4: decision must be allow, ask or deny, not 'maybe'" in (
            fresh.stderr
        )

        replace(rules, FIXED)
        fixed = http.get("/agents/shop/config").json()
        assert fixed["configError"] is None
        assert rule_names(fixed) == ["questions", "refunds-asked"]
        assert "rules error" not in render(describe(agent, rules.parent))
        assert "rules error" not in ok(lw(live.root, "agents", "--show", "shop")).stdout
    assert len([r for r in caplog.records if r.name == "loopwright.rules"]) == 1
