"""Opt-in built-in tools (SPEC §3.6). Nothing here is given to an agent unless you pass it:

agent = Agent(model=..., tools=[workspace_tools("./work"), shell_tool("./work")])

(`workspace_tools` is a toolset, `toolsets.ToolList`; unpack it to pick some of its tools.)
"""

from .files import workspace_tools
from .results import read_result
from .shell import shell_tool

__all__ = ["read_result", "shell_tool", "workspace_tools"]
