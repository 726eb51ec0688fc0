"""Opt-in built-in tools (SPEC §3.6). Nothing here is given to an agent unless you pass it:

agent = Agent(model=..., tools=[*workspace_tools("./work")])
"""

from .files import workspace_tools

__all__ = ["workspace_tools"]
