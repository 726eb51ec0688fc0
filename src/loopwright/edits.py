"""What "edit a call's arguments" means on every door (the command line, HTTP, the playground,
Python, ACP): the edit is a JSON Merge Patch (RFC 7396) of the arguments the call was asked with.
Keys given replace theirs (an object merges into an object, key by key), `null` removes a key,
the others are kept. Arguments given whole are a patch too, one that replaces every key it names.

    merged({"city": "Paris", "days": 3}, {"days": 5})       # {"city": "Paris", "days": 5}
    merged({"city": "Paris", "days": 3}, {"days": None})    # {"city": "Paris"}

`rulebook.applied` puts an approval's edit on the call's arguments where a decision is taken: the live
approver's answer (`approvals.ask_human`, with `merged`), a recorded decision (`runtime.decisions.record`) and
an in-memory session's (`Session.resolve`). Only then are the arguments validated and vetted.
"""

from __future__ import annotations

import copy
from typing import Any


def merged(args: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`patch` applied to `args` (RFC 7396), detached from both (neither is changed)."""
    out = dict(args)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):  # (into an object, or into nothing: nulls go)
            target = out.get(key)
            out[key] = merged(target if isinstance(target, dict) else {}, value)
        else:
            out[key] = _copied(value)
    return {key: _copied(value) for key, value in out.items()}


def _copied(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:  # (what cannot be copied is invalid: validating it says why)
        return value
