"""loopwright.toml is checked whole by one pydantic model (`project.config`): an unknown key or
table, or a value of the wrong type, is a `ConfigError` naming the file, the line and the closest
valid key — from `load_project`, the command line and `loopwright serve` alike (issue 34 part 4)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from loopwright import ConfigError
from loopwright.project import load_project
from test_cli import LOOPWRIGHT

ENV = {k: v for k, v in os.environ.items() if k != "LOOPWRIGHT_HOME"} | {"NO_COLOR": "1"}
TYPO = '[store]\npath = "x.db"\n\n[server]\nhost = "127.0.0.1"\nprot = 8787\n'


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        (TYPO, "6: [server] unknown key 'prot' (did you mean 'port'?)"),
        (
            "[server]\nmax_conections = 10\n",
            "2: [server] unknown key 'max_conections' (did you mean 'max_connections'?)",
        ),
        ("[sever]\nport = 1\n", "1: unknown table [sever] (did you mean 'server'?)"),
        ("server.prot = 1\n", "1: [server] unknown key 'prot' (did you mean 'port'?)"),
        ('[server]\nport = "eighty"\n', "2: [server] port: input should be a valid integer"),
        (
            "[defaults]\nmax_turn = 3\n",
            "2: [defaults] unknown key 'max_turn' (did you mean 'max_turns'?)",
        ),
        (
            '[defaults]\non_deny = "halt"\n',
            "2: [defaults] on_deny: input should be 'stop' or 'continue'",
        ),
        ("[store]\npool_size = 2.5\n", "2: [store] pool_size: input should be a valid integer"),
        (
            '[providers.mylab]\nbase_url = "http://x"\n\n[providers.mylab.models."q"]\n'
            "context_windw = 8000\n",
            "5: [providers.mylab.models.q] unknown key 'context_windw' (did you mean "
            "'context_window'?)",
        ),
        (
            '[[notify.webhook]]\nurl = "http://a"\nsecret_env = "A"\n\n[[notify.webhook]]\n'
            'url = "http://b"\nsecret = "B"\n',
            "7: [[notify.webhook]] #2 unknown key 'secret' (did you mean 'secret_env'?)",
        ),
        (
            '[[auth.token]]\nenv = "T"\ntenant = "acme"\nnmae = "ops"\n',
            "4: [[auth.token]] #1 unknown key 'nmae' (did you mean 'name'?)",
        ),
        ("[telemetry]\notel = 1\n", "2: [telemetry] otel: input should be a valid boolean"),
        (
            '[auth.tokens]\n"secret-token-0123456789" = 7\n',
            "2: [auth.tokens] a token's tenant: input should be a valid string",
        ),
    ],
)
def test_a_mistake_names_the_file_the_line_and_the_closest_key(
    tmp_path: Path, toml: str, error: str
) -> None:
    (tmp_path / "loopwright.toml").write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_project(tmp_path, dotenv=False)
    assert str(raised.value) == f"{tmp_path / 'loopwright.toml'}:{error}"
    assert raised.value.source == f"{tmp_path / 'loopwright.toml'}:{error.split(':')[0]}"
    assert "secret-token" not in str(raised.value)


def test_every_table_a_project_may_have_loads(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LW_TOKEN", "t" * 20)
    monkeypatch.setenv("HOOK_SECRET", "s" * 20)
    (tmp_path / "loopwright.toml").write_text(
        '[server]\nhost = "127.0.0.1"\nport = 9000\nmax_body_bytes = 1000\nmax_connections = 4\n'
        "request_timeout = 5\nidle_timeout = 2.5\nmax_runs_per_tenant = 2\n"
        'max_streams_per_tenant = 2\nallowed_hosts = ["a.example"]\ncors_origins = []\n'
        'profile = "v1"\n\n[auth.tokens]\n"long-random-token-0001" = "acme"\n\n'
        '[[auth.token]]\nenv = "LW_TOKEN"\ntenant = "globex"\nname = "ops"\n\n'
        '[store]\npath = "x.db"\npool_size = 3\n\n[defaults]\nmodel = "scripted:x"\n'
        'max_turns = 3\non_deny = "continue"\nplugins = []\n\n[telemetry]\notel = false\n'
        'capture_content = false\n\n[notify]\nbase_url = "https://a.example"\nlink_ttl = 60\n'
        'max_attempts = 3\n\n[[notify.webhook]]\nurl = "https://hooks.example/a"\n'
        'secret_env = "HOOK_SECRET"\nevents = ["approval"]\ntimeout = 3\n\n'
        '[providers.mylab]\nbase_url = "http://127.0.0.1:1/v1"\ndialect = "openai-chat"\n'
        'timeout = 30\ncontext_window = 8000\n\n[providers.mylab.models."q"]\n'
        "context_window = 4000\n"
    )
    project = load_project(tmp_path, dotenv=False)
    assert project.settings["server"]["port"] == 9000


def loopwright(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LOOPWRIGHT, *args], env=ENV, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "command", [["agents"], ["sessions"], ["serve", "--port", "0"], ["dev", "--port", "0"]]
)
def test_the_command_line_and_serve_print_it_and_exit_2(tmp_path: Path, command: list[str]):
    (tmp_path / "agents").mkdir()
    (tmp_path / "loopwright.toml").write_text(TYPO)
    out = loopwright(*command, "--project", str(tmp_path))
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"loopwright: error: {tmp_path / 'loopwright.toml'}:6: [server] unknown key 'prot' "
        "(did you mean 'port'?)",
        f"hint: {'fix loopwright.toml' if command == ['sessions'] else 'fix the file and line named above'}",
    ]
