"""`loopwright eval DATASET`: run a folder of cases against the project's agents, concurrently,
each stored as a session (`eval-<run>-<case>`) in the project's store; a table on stdout (or
`--json`), the JSON results in `--out DIR`, exit 1 when a case failed. `loopwright eval add
SESSION` turns a stored session into a case that passes against today's agent (docs/evals.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import CliError, Place, add_place_options, config_error, place_of, shown

if TYPE_CHECKING:
    from .. import events as ev
    from ..evals import CaseResult
    from ..runtime import Runtime
    from ..store.log import SessionKey

CASE_FAILED = 1
EVAL_EPILOG = """\
exit status:
  0    every case passed
  1    a case failed (an expectation did not hold, or its run could not start)
  2    usage or configuration error (a bad dataset, case or option; an unknown agent or session)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "eval",
        help="run a dataset of cases against an agent (or `eval add SESSION`)",
        description="Run every case of DATASET (a folder of YAML cases) against the project's "
        "agents, at most --concurrency at once. Each case is stored as the session "
        "eval-<run>-<case> of its agent, so it can be replayed, forked and opened in the "
        "playground. Prints a table (or --json) and writes the JSON results to --out. "
        "`loopwright eval add SESSION [--to DATASET] [--name CASE]` writes a stored session "
        "as a case instead.",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("dataset", metavar="DATASET", help="the dataset folder (or `add`)")
    command.add_argument("session", metavar="SESSION", nargs="?", help="with `add`: the session")
    command.add_argument("--agent", metavar="NAME", help="the cases' agent (over dataset.yaml's)")
    command.add_argument(
        "--concurrency", metavar="N", type=int, default=4, help="cases run at once (default 4)"
    )
    command.add_argument(
        "--out", metavar="DIR", help="where the JSON results go (default .loopwright/evals)"
    )
    command.add_argument("--run", metavar="ID", help="the run's id (default: time and random)")
    command.add_argument("--json", action="store_true", help="print the results as JSON")
    command.add_argument("--to", metavar="DATASET", help="with `add`: the dataset folder")
    command.add_argument("--name", metavar="CASE", help="with `add`: the case's name")
    add_place_options(command)
    command.set_defaults(handler=eval_command)


def eval_command(args: argparse.Namespace) -> int:
    import asyncio

    if args.dataset == "add":
        if not args.session:
            raise CliError("eval add needs SESSION", hint="`loopwright sessions` lists them")
        return asyncio.run(_add(place_of(args), args))
    if args.session is not None:
        raise CliError(f"unexpected {args.session!r} after DATASET", hint="loopwright eval DATASET")
    if args.concurrency < 1:
        raise CliError("--concurrency must be at least 1")
    return asyncio.run(_eval(place_of(args), args))


async def _eval(place: Place, args: argparse.Namespace) -> int:
    from ..evals import DatasetError, load_dataset, run_eval, table

    hint = "docs/evals.md lists a case's keys"
    try:
        dataset = load_dataset(args.dataset)
    except DatasetError as exc:
        raise config_error(exc, hint) from None
    if args.run is not None and (not re.fullmatch(r"[A-Za-z0-9._-]+", args.run)):
        raise CliError(f"--run {args.run!r}: letters, digits, '.', '_' and '-' only")
    agents = place.agents()
    progress = Progress(len(dataset.cases))
    log = await place.log()
    try:
        result = await run_eval(
            dataset,
            log,
            agents,
            agent=args.agent,
            concurrency=args.concurrency,
            run=args.run,
            tenant=place.tenant,
            on_case=progress.done,
        )
    except DatasetError as exc:
        raise config_error(exc, hint) from None
    finally:
        await log.close()
    out = Path(args.out) if args.out else place.root / ".loopwright" / "evals"
    out.mkdir(parents=True, exist_ok=True)
    written = out / f"eval-{result.run}.json"
    written.write_text(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) + "\n")
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print(table(result))
    print(f"results: {shown(written)}", file=sys.stderr)
    return 0 if result.passed else CASE_FAILED


class Progress:
    """Cases done so far, on stderr: a bar redrawn in place at a terminal, else a line each."""

    def __init__(self, total: int) -> None:
        self.total, self.count = total, 0
        self.terminal = sys.stderr.isatty()

    def done(self, case: CaseResult) -> None:
        self.count += 1
        verdict = "pass" if case.passed else "FAIL"
        if not self.terminal:
            print(f"[{self.count}/{self.total}] {case.case}: {verdict}", file=sys.stderr)
            return
        width = 30
        filled = width * self.count // self.total
        bar = "#" * filled + "-" * (width - filled)
        end = "\n" if self.count == self.total else ""
        sys.stderr.write(f"\r[{bar}] {self.count}/{self.total} {case.case}: {verdict}\x1b[K{end}")
        sys.stderr.flush()


async def _add(place: Place, args: argparse.Namespace) -> int:
    import yaml

    from ..evals import case_from_events
    from .runner import opened
    from .sessions import find

    async with opened(place, {}) as runtime:
        key = (await find(runtime, place, args.session, args.agent)).key
        events = await _events(runtime, key)
    try:
        case = case_from_events(events, key.agent)
    except ValueError as exc:
        raise CliError(f"session {args.session!r}: {exc}", hint="run it to its end first") from None
    folder = Path(args.to) if args.to else place.root / "evals" / key.agent
    name = args.name or "case-" + re.sub(r"[^a-z0-9]+", "-", key.id.lower()).strip("-")[:40]
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise CliError(f"--name {name!r}: letters, digits, '.', '_' and '-' only")
    path = folder / f"{name}.yaml"
    if path.exists():
        raise CliError(f"{shown(path)} exists already", hint="choose another --name")
    folder.mkdir(parents=True, exist_ok=True)
    head = f"# From session {key.id} of agent {key.agent} (`loopwright eval add`).\n"
    plain = json.loads(json.dumps(case))  # (no value shared: no YAML anchors)
    path.write_text(head + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=100))
    print(f"wrote {shown(path)} (run it: loopwright eval {shown(folder)})", file=sys.stderr)
    return 0


async def _events(runtime: Runtime, key: SessionKey) -> list[ev.Event]:
    found: list[Any] = []
    async for _, event in runtime.events(key):
        if event.type != "message:partial":
            found.append(event)
    return found
