"""Evals: a folder of cases run against an agent, each stored as a session and checked.

    from loopwright.evals import load_dataset, run_eval
    result = await run_eval("evals/support", log, project.agents, concurrency=4)
    print(table(result)); result.passed

`dataset` reads and checks the cases, `runner` runs them (bounded, concurrently) through a
`Runtime` over the store, `expectations` and `judge` check what each session did, `report`
gathers the results, and `capture` turns a stored session into a case (`loopwright eval add`).
The command line is `loopwright eval` (cli/evals.py); docs/evals.md walks through an example.
"""

from .capture import case_from_events
from .dataset import Case, Dataset, DatasetError, Expect, load_dataset
from .expectations import Check
from .report import CaseResult, EvalResult, table
from .runner import run_eval, run_eval_sync

__all__ = [
    "Case",
    "CaseResult",
    "Check",
    "Dataset",
    "DatasetError",
    "EvalResult",
    "Expect",
    "case_from_events",
    "load_dataset",
    "run_eval",
    "run_eval_sync",
    "table",
]
