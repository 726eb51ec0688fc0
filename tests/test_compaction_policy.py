"""Compaction policies (docs/compaction.md): a custom summary prompt, the cumulative per-session
turn trigger, and pinned messages (the `compactable` predicate, `keep_tools`) — live, through
prompt-too-long recovery, in the log and the trace export, and from agent.yaml."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, Session, tool
from loopwright.errors import ConfigError
from loopwright.messages import Message, ToolResultMessage, UserMessage
from loopwright.project.agent_yaml import from_yaml
from loopwright.runtime import Runtime, open_session
from loopwright.state.compaction import SUMMARY_HEADER, Compaction
from loopwright.store import SessionKey, open_log
from loopwright.store.export import export_traces
from loopwright.store.log import Store
from loopwright.store.sqlite_log import SQLiteLog
from loopwright.testing import types
from runtime_fixtures import ended


@tool
def look(n: int) -> str:
    """Look."""
    return f"looked {n}"


def seen(messages: list[Message]) -> list[str]:
    """A history as short strings: what each message says."""
    out = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(f"user: {m.content}")
        elif isinstance(m, ToolResultMessage):
            out.append(f"result: {m.content}")
        else:
            calls = "".join(f" {c.name}({c.args})" for c in m.tool_calls)
            out.append(f"assistant: {m.text}{calls}")
    return out


async def test_the_summary_is_asked_with_the_policy_prompt():
    model = scripted("a", "b", "the summary")
    prompt = "Summarise as three bullet points."
    session = Session(Agent(model=model, compaction=Compaction(keep_last=2, prompt=prompt)))
    await drive(session.run("one"))
    await drive(session.run("two"))
    result = await drive(session.compact())
    assert "compaction:finished" in types(result.events)
    asked = model.requests[2]
    assert asked.system == prompt
    assert seen(list(asked.messages)) == ["user: user: one\nassistant: a"]
    assert seen(session.messages) == [
        f"user: {SUMMARY_HEADER}\nthe summary",
        "user: two",
        "assistant: b",
    ]


SCRIPT = (
    {"tool_calls": [call("look", "l1", n=1)]},
    "done one",
    {"tool_calls": [call("look", "l2", n=2)]},
    "the summary",
    "done two",
    {"tool_calls": [call("look", "l3", n=3)]},
    "done three",
)


@pytest.mark.parametrize("restart", [False, True])
async def test_every_turns_counts_the_session_s_replies_across_runs(tmp_path, restart):
    """Two runs of two replies each with `every_turns=3`: the second run compacts before its
    second request — in the same runtime, and in a new one reading the session from the store
    (the count comes from the log, not from the run)."""

    async def sqlite() -> Store:
        return SQLiteLog(tmp_path / "db.sqlite")

    await every_turns_case(sqlite, restart)


@pytest.mark.parametrize("restart", [False, True])
async def test_every_turns_on_postgres(pg_url, restart):
    from loopwright.store.pg_log import PostgresLog

    async def postgres() -> Store:
        return await PostgresLog(pg_url).open()

    await every_turns_case(postgres, restart)


async def every_turns_case(open_store: Callable[[], Awaitable[Store]], restart: bool) -> None:
    agent = Agent(
        name="desk",
        model=scripted(*SCRIPT),
        tools=[look],
        compaction=Compaction(keep_last=2, every_turns=3),
    )
    log = await open_store()
    runtime = Runtime({"desk": agent}, log)
    first = await ended(await runtime.send("acme", "desk", "s1", "go"))
    assert first.text == "done one"
    if restart:
        await runtime.close()
        await log.close()
        log = await open_store()
        runtime = Runtime({"desk": agent}, log)
    live = await runtime.send("acme", "desk", "s1", "again")
    assert (await ended(live)).text == "done two"
    events = [e for e in live.items if not e.type.endswith(":delta")]
    names = [e.type for e in events]
    assert names.count("compaction:started") == 1
    at = names.index("compaction:started")
    assert names[at - 3 : at] == ["step:finished", "step:started", "budget:check"]
    assert [e.step for e in events if e.type == "step:started"] == [1, 2]
    assert events[at].reason == "turns"
    finished = events[at + 1]
    assert (finished.from_, finished.dropped, finished.to, finished.pinned) == (7, 5, 3, None)
    last = agent.model.requests[-1]
    assert seen(list(last.messages)) == [
        f"user: {SUMMARY_HEADER}\nthe summary",
        "assistant:  look({'n': 2})",
        "result: looked 2",
    ]
    third = await runtime.send("acme", "desk", "s1", "once more")  # (2 replies since: none)
    assert (await ended(third)).text == "done three"
    assert "compaction:started" not in [e.type for e in third.items]
    key = SessionKey("acme", "desk", "s1")
    await runtime.close()
    await log.close()
    log = await open_store()  # the model view, rebuilt from the store
    reading = Runtime({"desk": agent}, log)
    reread = await reading.open(key)
    assert seen(reread.messages) == [
        *seen(list(last.messages)),
        "assistant: done two",
        "user: once more",
        "assistant:  look({'n': 3})",
        "result: looked 3",
        "assistant: done three",
    ]
    assert reread.history.compacted_at == 3
    await reading.close()
    await log.close()


def pinned_agent(*replies, **policy) -> Agent:
    return Agent(
        name="desk", model=scripted(*replies), tools=[look], compaction=Compaction(**policy)
    )


async def test_pinned_results_stay_in_place_out_of_the_summary_and_durable(tmp_path):
    """`keep_tools`: the result of `look` and the reply that called it are kept verbatim where
    they stood, after the summary of the rest; reloading the log gives the same view, and the
    trace export shows the context before and after."""
    replies = ({"tool_calls": [call("look", "l1", n=1)]}, "a", "b", "summary of one and a", "c")
    agent = pinned_agent(*replies, keep_last=2, keep_tools=("look",))
    log = await open_log(tmp_path / "db.sqlite")
    session = await open_session(agent, log, "s")
    await drive(session.run("one"))
    await drive(session.run("two"))
    result = await drive(session.compact())
    finished = next(e for e in result.events if e.type == "compaction:finished")
    assert (finished.from_, finished.dropped, finished.to, finished.pinned) == (6, 4, 5, (1, 2))
    assert seen(list(agent.model.requests[3].messages)) == ["user: user: one\nassistant: a"]
    view = [
        f"user: {SUMMARY_HEADER}\nsummary of one and a",
        "assistant:  look({'n': 1})",
        "result: looked 1",
        "user: two",
        "assistant: b",
    ]
    assert seen(session.messages) == view
    await drive(session.run("three"))
    assert seen(list(agent.model.requests[-1].messages)) == [*view, "user: three"]
    await log.close()
    log = await open_log(tmp_path / "db.sqlite")  # a restart: the reducer rebuilds it
    again = await open_session(agent, log, "s")
    assert again.messages == session.messages
    traces = await export_traces(log, agent, SessionKey("default", "desk", "s"), tmp_path / "t")
    before, after = (json.loads(p.read_text()) for p in traces)
    assert len(before) == 6 and len(after) == 7
    assert after[1] == before[1] and after[2] == before[2]  # (the pinned call and result)
    await log.close()


async def test_a_predicate_pins_any_message():
    def compactable(message: Message) -> bool:
        return not (isinstance(message, UserMessage) and message.content.startswith("NOTE"))

    agent = pinned_agent("a", "b", "c", "sum", keep_last=2, compactable=compactable)
    session = Session(agent)
    for text in ("one", "NOTE: the budget is 40 EUR", "three"):
        await drive(session.run(text))
    await drive(session.compact())
    assert seen(list(agent.model.requests[3].messages)) == [
        "user: user: one\nassistant: a\nassistant: b"
    ]
    assert seen(session.messages) == [
        f"user: {SUMMARY_HEADER}\nsum",
        "user: NOTE: the budget is 40 EUR",
        "user: three",
        "assistant: c",
    ]


async def test_a_prompt_too_long_is_compacted_around_the_pinned_messages():
    too_long = {"fail": {"error": "prompt is too long", "prompt_too_long": True}}
    agent = pinned_agent(
        {"tool_calls": [call("look", "l1", n=1)]},
        "a",
        too_long,
        "the summary",
        "second",
        keep_last=1,
        keep_tools=["look"],
    )
    session = Session(agent)
    await drive(session.run("one"))
    result = await drive(session.run("two"))
    assert result.text == "second"
    compaction = next(e for e in result.events if e.type == "prompt:compaction")
    assert (compaction.from_, compaction.to) == (5, 4)
    assert seen(list(agent.model.requests[3].messages)) == ["user: user: one\nassistant: a"]
    assert seen(list(agent.model.requests[4].messages)) == [
        f"user: {SUMMARY_HEADER}\nthe summary",
        "assistant:  look({'n': 1})",
        "result: looked 1",
        "user: two",
    ]


async def test_a_fully_pinned_history_is_not_compacted():
    agent = pinned_agent("a", "b", keep_last=1, compactable=lambda m: False)
    session = Session(agent)
    await drive(session.run("one"))
    await drive(session.run("two"))
    result = await drive(session.compact())
    assert "compaction:started" not in types(result.events)
    assert len(agent.model.requests) == 2


AGENT_YAML = """\
name: desk
model: scripted:script.yaml
compaction:
  keep_last: 4
  every_turns: 10
  keep_tools: [look, search]
  prompt_file: summary.md
"""


def test_agent_yaml_reads_the_prompt_file_keep_tools_and_every_turns(tmp_path):
    (tmp_path / "agent.yaml").write_text(AGENT_YAML)
    (tmp_path / "summary.md").write_text("Summarise the ticket: customer, order, promise.\n")
    policy = from_yaml(tmp_path, {}).compaction
    assert policy == Compaction(
        keep_last=4,
        every_turns=10,
        keep_tools=("look", "search"),
        prompt="Summarise the ticket: customer, order, promise.\n",
    )


@pytest.mark.parametrize(
    ("text", "error", "line"),
    [
        (AGENT_YAML, "compaction.prompt_file: no file {folder}/summary.md", 7),
        (
            AGENT_YAML.replace("summary.md", "x.md\n  prompt: hi"),
            "compaction: prompt and prompt_file: keep one",
            7,
        ),
        (
            AGENT_YAML.replace("[look, search]", "look"),
            "compaction.keep_tools: a list of tool names",
            6,
        ),
    ],
)
def test_agent_yaml_compaction_errors_name_the_file_and_line(tmp_path, text, error, line):
    (tmp_path / "agent.yaml").write_text(text)
    with pytest.raises(ConfigError) as raised:
        from_yaml(tmp_path, {})
    message = error.format(folder=tmp_path)
    assert str(raised.value) == f"{tmp_path / 'agent.yaml'}:{line}: {message}"


def test_the_cli_shows_the_policy_and_names_a_missing_prompt_file(tmp_path):
    """The `loopwright` door: `agents --show` shows the policy (the prompt by its size), and a
    prompt_file that is not there is a usage error naming agent.yaml and the line."""
    from test_cli_project import lw, ok, one_error

    root = tmp_path / "shop"
    ok(lw(tmp_path, "init", "shop"))
    ok(lw(root, "new", "desk"))
    folder = root / "agents" / "desk"
    yaml_text = (folder / "agent.yaml").read_text()
    (folder / "agent.yaml").write_text(
        yaml_text + "compaction:\n  every_turns: 10\n  keep_tools: [echo]\n  prompt_file: s.md\n"
    )
    (folder / "s.md").write_text("Summarise the ticket.\n")
    shown = ok(lw(root, "agents", "--show", "desk")).stdout
    line = next(x for x in shown.splitlines() if x.startswith("compaction: "))
    assert "every_turns=10" in line and "keep_tools=('echo',)" in line
    assert line.endswith("prompt=<22 characters>)")
    (folder / "s.md").unlink()
    where = f"agents/desk/agent.yaml:{len(yaml_text.splitlines()) + 4}"
    one_error(lw(root, "agents", "--show", "desk"), where, "compaction.prompt_file: no file")


DESK_FILES = {
    "agents/desk/agent.yaml": """\
        model: scripted:script.yaml
        compaction:
          keep_last: 2
          every_turns: 3
          keep_tools: [look]
          prompt_file: summary.md
        """,
    "agents/desk/summary.md": "Summarise for the order desk.",
    "agents/desk/script.yaml": """\
        replies:
          - tool_calls: [{name: look, args: {n: 1}, id: l1}]
          - a
          - tool_calls: [{name: look, args: {n: 2}, id: l2}]
          - the summary
          - b
        """,
    "agents/desk/tools.py": '''\
        from loopwright import tool


        @tool
        def look(n: int) -> str:
            """Look."""
            return f"looked {n}"
        ''',
    "loopwright.toml": "",
}


def test_http_runs_an_agent_yaml_policy_and_shows_the_compacted_history(tmp_path):
    """The HTTP door, on a real server: an agent.yaml policy (`every_turns`, `keep_tools`,
    `prompt_file`) compacts in the session's second run; the run's events carry
    `compaction:finished` with its `pinned`, and the session's history is the compacted view."""
    from live_server import LiveServer, write
    from loopwright.project import load_project
    from loopwright.server import create_app

    write(tmp_path, DESK_FILES)
    with LiveServer(create_app(load_project(tmp_path))) as live, live.client() as http:
        first = http.post("/agents/desk/messages", json={"message": "one"}).json()
        assert first["text"] == "a"
        sid = first["sessionId"]
        second = http.post("/agents/desk/messages", json={"message": "two", "sessionId": sid})
        assert second.status_code == 200, second.text
        events = [e for e in second.json()["events"] if e["type"].startswith("compaction:")]
        assert events == [
            {"type": "compaction:started", "reason": "turns"},
            {
                "type": "compaction:finished",
                "from": 7,
                "to": 5,
                "mode": "summarize",
                "dropped": 5,
                "summary": "the summary",
                "pinned": [1, 2],
            },
        ]
        history = http.get(f"/agents/desk/sessions/{sid}").json()["history"]
    assert [m["role"] for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert history[0]["content"] == f"{SUMMARY_HEADER}\nthe summary"
    assert [history[2]["content"], history[4]["content"]] == ["looked 1", "looked 2"]


def test_asking_to_compact_a_fully_pinned_history_says_why_nothing_changed(tmp_path):
    """The manual doors ask `compactability` with the whole policy: a history whose every older
    message is pinned is "pinned", and POST .../compact answers `compacted: false` with the
    reason (it ran an empty compaction and said `compacted: true` when only `keep_last` was
    asked)."""
    from dataclasses import replace

    from live_server import LiveServer, write
    from loopwright.project import load_project
    from loopwright.server import create_app

    write(
        tmp_path,
        {
            "agents/note/agent.yaml": "model: scripted:script.yaml\n",
            "agents/note/script.yaml": "replies:\n  - a\n",
            "loopwright.toml": "",
        },
    )
    project = load_project(tmp_path)
    policy = Compaction(keep_last=1, compactable=lambda m: False)
    project.agents["note"] = replace(project.agents["note"], compaction=policy)
    with LiveServer(create_app(project)) as live, live.client() as http:
        sid = http.post("/agents/note/messages", json={"message": "one"}).json()["sessionId"]
        answer = http.post(f"/agents/note/sessions/{sid}/compact")
        history = http.get(f"/agents/note/sessions/{sid}").json()["history"]
    reason = "every message before the kept tail is pinned (compactable, keep_tools)"
    assert answer.json() == {
        "sessionId": sid,
        "compacted": False,
        "reason": f"nothing to compact: {reason}",
    }
    assert [m["role"] for m in history] == ["user", "assistant"]
