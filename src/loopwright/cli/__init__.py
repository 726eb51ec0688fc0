"""The `loopwright` command line: a thin shell over sessions and the store. `main.py` parses
and dispatches; one module per command group (`run`, `new` + `init`, `agents`, `sessions`,
`approvals`, `demo`); `runner.py` drives a run, `render.py` draws it, `prompt.py` asks at the
terminal, `common.py` finds projects, agents and stores."""
