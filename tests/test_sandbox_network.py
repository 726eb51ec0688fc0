"""The sandbox's network allow-list (docs/sandbox.md) with real bubblewrap, through the loop:
two HTTP servers on the host's loopback, one allowed and one not; a sandboxed `curl` reaches
the allowed one through the proxy (plain http and a CONNECT tunnel), gets the proxy's 403 for
the other (which never sees a byte), and has no route out without the proxy. The proxy is
started with the run and closed with its owner."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import call, drive, scripted
from loopwright import Agent, ConfigError, Session
from loopwright.builtins import shell_tool
from loopwright.sandbox import Sandbox
from loopwright.sandbox.network import allows, hosts
from loopwright.sandbox.proxy import NetworkProxy
from sandbox_required import needs
from test_builtin_shell import outputs

pytestmark = needs("bwrap", "curl")


class Origin:
    """An HTTP server on 127.0.0.1 answering `NAME PATH`, recording each request's head."""

    def __init__(self, name: str) -> None:
        self.name, self.heads, self.port = name, list[list[str]](), 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")[:-2]
        except asyncio.IncompleteReadError:  # a tunnel closed without a request
            writer.close()
            return
        self.heads.append(head)
        body = f"{self.name} {head[0].split(' ')[1]}".encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> Origin:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


@pytest.fixture
async def origins() -> AsyncIterator[tuple[Origin, Origin]]:
    async with Origin("allowed") as allowed, Origin("blocked") as blocked:
        yield allowed, blocked


CODE = "-w ' %{http_code}\\n'"


async def test_only_listed_hosts_are_reached_through_the_proxy(
    tmp_path: Path, origins: tuple[Origin, Origin], caplog: pytest.LogCaptureFixture
) -> None:
    allowed, blocked = origins
    a, b = f"127.0.0.1:{allowed.port}", f"127.0.0.1:{blocked.port}"
    command = "; ".join(
        [
            f"curl -s {CODE} http://{a}/plain?q=1",
            f"curl -s {CODE} http://{b}/plain",
            f"curl -s -p -w '%{{http_connect}} %{{http_code}}\\n' http://{a}/tunnel",
            f"curl -s -p -w '%{{http_connect}}\\n' http://{b}/tunnel; echo exit $?",
            f"curl -s --noproxy '*' http://{a}/direct; echo exit $?",
            "curl -s --noproxy '*' http://192.0.2.1/; echo exit $?",
        ]
    )
    sandbox = Sandbox(workspace=tmp_path / "ws", network=[a, "*.example.com"])
    model = scripted({"tool_calls": [call("shell", command=command)]}, "Done.")
    agent = Agent(model=model, tools=[shell_tool("/")], sandbox=sandbox)
    [proxy] = [t for t in agent.tools if isinstance(t, NetworkProxy)]
    session = Session(agent)
    with caplog.at_level(logging.WARNING, logger="loopwright.sandbox"):
        result = await drive(session.run("go"))
    refusal = f"loopwright sandbox: {b} is not in the sandbox's network allow-list\n"
    assert outputs(result.events) == [
        (
            f"allowed /plain?q=1 200\n{refusal} 403\nallowed /tunnel200 200\n"  # (no newline)
            "403\nexit 56\nexit 7\nexit 7\n[exit status 0]",
            False,
        )
    ]
    assert [head[0] for head in allowed.heads] == [
        "GET /plain?q=1 HTTP/1.1",
        "GET /tunnel HTTP/1.1",
    ]
    assert "Connection: close" in allowed.heads[0]  # one request per proxied connection
    assert not any(h.lower().startswith("proxy-") for h in allowed.heads[0])
    assert blocked.heads == []  # not a byte reached it
    assert [r.getMessage() for r in caplog.records] == [
        f"sandbox network: refused GET {b} (not in the allow-list)",
        f"sandbox network: refused CONNECT {b} (not in the allow-list)",
    ]
    assert os.path.exists(proxy.path)  # the session's toolsets own it
    await session.toolsets.exit_all()
    assert not os.path.exists(os.path.dirname(proxy.path))


async def test_the_command_environment_names_the_proxy(tmp_path: Path) -> None:
    sandbox = Sandbox(workspace=tmp_path / "ws", network=["pypi.org", "localhost:8080"])
    model = scripted({"tool_calls": [call("shell", command="env | grep -i proxy | sort")]}, "Ok.")
    session = Session(Agent(model=model, tools=[shell_tool("/")], sandbox=sandbox))
    result = await drive(session.run("go"))
    await session.toolsets.exit_all()
    url = "http://127.0.0.1:3128"
    assert outputs(result.events) == [
        (
            f"HTTPS_PROXY={url}\nHTTP_PROXY={url}\nNO_PROXY=127.0.0.1,::1\n"
            f"http_proxy={url}\nhttps_proxy={url}\nno_proxy=127.0.0.1,::1\n[exit status 0]",
            False,
        )
    ]


async def test_a_name_resolving_to_the_host_itself_is_refused(
    origins: tuple[Origin, Origin], caplog: pytest.LogCaptureFixture
) -> None:
    allowed, _ = origins
    name = socket.gethostname()  # resolves to the loopback here (/etc/hosts)
    if socket.gethostbyname(name) != "127.0.0.1":
        pytest.skip("this host's name does not resolve to 127.0.0.1")
    proxy = NetworkProxy(hosts([name, f"localhost:{allowed.port}"]))
    await proxy.enter()
    try:
        answers = []
        for host in (f"{name}:{allowed.port}", f"localhost:{allowed.port}", "a.b:1"):
            reader, writer = await asyncio.open_unix_connection(proxy.path)
            writer.write(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            answers.append((await reader.readline()).decode().strip())
            writer.close()
    finally:
        await proxy.exit()
    assert answers == [
        "HTTP/1.1 403 Forbidden",  # a name DNS answers for: not the host's loopback
        "HTTP/1.1 200 Connection established",  # `localhost` named: the host's, as asked
        "HTTP/1.1 403 Forbidden",
    ]
    assert caplog.messages[0] == (
        f"sandbox network: refused CONNECT {name}:{allowed.port} (resolves to 127.0.0.1)"
    )


def test_the_allow_list_matches_hosts_ports_and_subdomains() -> None:
    listed = hosts(["Example.com.", "*.Pypi.org", "api.test:8443", "[::1]:80", "10.0.0.1"])
    assert listed == ("example.com", "*.pypi.org", "api.test:8443", "[::1]:80", "10.0.0.1")
    assert allows(listed, "EXAMPLE.com", 443) == "example.com"
    assert allows(listed, "files.pypi.org", 443) == "*.pypi.org"
    assert allows(listed, "a.b.pypi.org", 80) == "*.pypi.org"
    assert allows(listed, "pypi.org", 443) is None  # a wildcard is its subdomains only
    assert allows(listed, "evilpypi.org", 443) is None
    assert allows(listed, "api.test", 8443) == "api.test:8443"
    assert allows(listed, "api.test", 443) is None
    assert allows(listed, "::1", 80) == "[::1]:80"
    assert allows(listed, "10.0.0.1", 22) == "10.0.0.1"
    assert allows(listed, "sub.example.com", 443) is None


@pytest.mark.parametrize(
    ("network", "message"),
    [
        ([], "sandbox network: the list of hosts is empty (use 'none')"),
        (["a b"], "sandbox network: 'a b' is not host, host:port or *.domain[:port]"),
        (["x.com:0"], "sandbox network: 'x.com:0' is not host, host:port or *.domain[:port]"),
        (["*"], "sandbox network: '*' is not host, host:port or *.domain[:port]"),
        (
            ["http://x.com"],
            "sandbox network: 'http://x.com' is not host, host:port or *.domain[:port]",
        ),
        (["[1:2:3:4:5:6:7:8:9]"], "sandbox network: '[1:2:3:4:5:6:7:8:9]' is not an IPv6 address"),
    ],
)
def test_bad_allow_lists_are_errors(network: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as bad:
        Sandbox(network=network)  # type: ignore[arg-type]
    assert str(bad.value) == message
