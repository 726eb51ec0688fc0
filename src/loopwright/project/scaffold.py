"""What a new agent's folder holds (`agent_files`): agent.yaml, prompt.md when the instructions
are given, tools.py, rules.yaml and script.yaml, as the loader expects them. `loopwright new`
and the admin routes (`server.admin`) write them."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .agent_yaml import PROMPT_FILE

AGENT_YAML = """\
# The {name} agent. Fields: name, description, instructions, model, fallback (models to switch
# to when it fails), settings (temperature, reasoning, ...), tools (extra tools by import path),
# builtins (ask_user, files, files-readonly), max_turns, on_deny, context_budget,
# max_output_tokens, tool_timeout, compaction, retry (docs/models.md: settings and fallback).
description: {description}
{instructions}{model_line}
{builtins}max_turns: 10
"""
INSTRUCTIONS = """\
instructions: |
  You are {name}, a helpful assistant. Answer briefly and use your tools when they help.
"""
PROMPT_LINE = "# The instructions are in prompt.md beside this file.\n"
MODEL_OFFLINE = """\
# A scripted model (script.yaml) runs offline; use a real one, e.g. anthropic:claude-sonnet-4-5
# or openai:gpt-4.1, once its API key is set.
model: scripted:script.yaml"""
MODEL_DEFAULT = """\
# The model is [defaults] model in loopwright.toml ({model}); set one here to override it,
# e.g. `model: scripted:script.yaml` to run offline."""
SCRIPT_YAML = """\
# What the scripted model says: one reply per request, each conversation from the top (a
# conversation continued later goes on where it was). Replies can call tools, think and fail;
# the format is in docs/scripted-models.md of the loopwright repository.
replies:
  - text: "Hello! I am {name}, running on a scripted model. Set `model:` in agent.yaml to talk to a real one."
  - text: "That was my last scripted reply: add replies to script.yaml, or set a real model in agent.yaml."
"""
TOOLS_PY = '''\
"""Tools of the {name} agent: every @tool in this file is the agent's, found automatically."""

from loopwright import tool


@tool
def echo(text: str) -> str:
    """Repeat a text back (an example: replace it with your own tools).

    Args:
        text: What to repeat.
    """
    return text
'''
RULES_YAML = """\
# Who may do what without asking: the first rule that matches a call decides (allow, ask or
# deny); calls no rule matches get default_decision. Rules can match tool-name globs, conditions
# on the arguments and tenant/environment/agent scopes: see docs/rules.md of the loopwright
# repository (this file is re-read when it changes).
default_decision: ask
rules:
  - name: echo-freely
    tool: echo
    decision: allow
"""


@dataclass(frozen=True, slots=True)
class Options:
    """What `new` may be told besides the name; each left out keeps the default."""

    description: str = ""
    model: str | None = None
    prompt: str | None = None
    """The instructions, written to prompt.md (else a line in agent.yaml)."""
    tools: tuple[str, ...] = ()
    """Built-in tools (`builtins:`)."""


def agent_files(name: str, options: Options, settings: dict[str, object]) -> dict[str, str]:
    """The files of a new agent `name`, by file name (`settings`: loopwright.toml's)."""
    defaults = settings.get("defaults")
    model = defaults.get("model") if isinstance(defaults, dict) else None
    model_line = MODEL_DEFAULT.format(model=model) if model else MODEL_OFFLINE
    if options.model:
        model_line = f"model: {_yaml_str(options.model)}"
    what = options.description or f"The {name} agent (describe what it does here)."
    tools = options.tools
    files = {
        "agent.yaml": AGENT_YAML.format(
            name=name,
            description=_yaml_str(what),
            instructions=PROMPT_LINE if options.prompt else INSTRUCTIONS.format(name=name),
            model_line=model_line,
            builtins=f"builtins: [{', '.join(tools)}]\n" if tools else "",
        ),
        "script.yaml": SCRIPT_YAML.format(name=name),
        "tools.py": TOOLS_PY.format(name=name),
        "rules.yaml": RULES_YAML,
    }
    if options.prompt:
        files[PROMPT_FILE] = (
            options.prompt if options.prompt.endswith("\n") else options.prompt + "\n"
        )
    return files


def _yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid YAML scalar
