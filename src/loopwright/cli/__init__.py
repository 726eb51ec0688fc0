"""The `loopwright` command line: a thin shell over one `loopwright.runtime.Runtime` and the
project's event log. `main.py` parses and dispatches; one module per command group (`run`, `new`
+ `init`, `agents`, `sessions`, `approvals`, `demo`); `runner.py` drives a run, `render.py`
draws it, `prompt.py` asks at the terminal, `common.py` finds projects, agents and event logs."""
