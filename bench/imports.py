"""What starting loopwright costs, in instructions (valgrind's callgrind): `import loopwright`
and `loopwright --version` against the interpreter's own start (`python -c pass`), all in one
run (issue 32 goal 5: ≤ 300 M and ≤ 350 M instructions).

    python bench/imports.py            # the table and the verdicts
    python bench/imports.py --write    # and bench/RESULTS.md ("## Start-up")

Each command runs in a fresh process under `valgrind --tool=callgrind` with `PYTHONHASHSEED=0`,
so a figure repeats to within a few thousand instructions; `--runs N` runs each N times and
reports the smallest and the largest. Bytecode is what a user's install has: compiled once,
before any measured run, into a cache of this script's own (`PYTHONPYCACHEPREFIX`, so neither
the tree nor `$PYTHONDONTWRITEBYTECODE` decides whether a run pays for compiling). The console
script is run as its wrapper does (`from loopwright.cli.main import main; sys.exit(main())`).
Reported beside the targets, not judged: `loopwright --help`, and importing the names a program
uses (`from loopwright import Agent, Session, tool`), which loads the runtime.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import write_section
from run import git_rev

BENCH = Path(__file__).resolve().parent
CLI = "import re, sys; from loopwright.cli.main import main; sys.exit(main())"
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import loopwright": ["-c", "import loopwright"],
    "loopwright --version": ["-c", CLI, "--version"],
    "loopwright --help": ["-c", CLI, "--help"],
    "from loopwright import Agent, Session, tool": [
        "-c",
        "from loopwright import Agent, Session, tool",
    ],
}
TARGETS = {"import loopwright": 300e6, "loopwright --version": 350e6}
"""Issue 32 goal 5, in instructions (the whole process, the interpreter's start included)."""


def environment(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    path = [str(BENCH.parent / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(PYTHONHASHSEED="0", PYTHONPYCACHEPREFIX=str(cache), PYTHONPATH=os.pathsep.join(path))
    return env


def instructions(argv: list[str], env: dict[str, str], out: Path) -> int:
    """One run of `python ARGV` under callgrind: its total instruction count."""
    command = ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}"]
    subprocess.run(
        [*command, sys.executable, *argv],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    found = re.search(r"^(?:totals|summary): (\d+)", out.read_text(), re.M)
    assert found is not None, f"no totals in {out}"
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=1, help="runs of each command (default 1)")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    lines = ["| command | instructions | over `python -c pass` |", "|---|--:|--:|"]
    verdicts = ["| target | measured | limit | result |", "|---|--:|--:|---|"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory(prefix="loopwright-imports-") as tmp:
        env = environment(Path(tmp) / "pycache")
        for argv in COMMANDS.values():  # compile every module once, unmeasured
            subprocess.run([sys.executable, *argv], env=env, check=True, capture_output=True)
        floor = 0
        for name, argv in COMMANDS.items():
            counts = [instructions(argv, env, Path(tmp) / "cg.out") for _ in range(args.runs)]
            low, high = min(counts), max(counts)
            floor = floor or low
            spread = f" – {high / 1e6:,.1f}" if high != low else ""
            lines.append(
                f"| `{name}` | {low / 1e6:,.1f}{spread} M | {(low - floor) / 1e6:,.1f} M |"
            )
            print(lines[-1], flush=True)
            if name in TARGETS:
                ok = high <= TARGETS[name]
                verdicts.append(
                    f"| `{name}` | {high / 1e6:,.1f} M | ≤ {TARGETS[name] / 1e6:,.0f} M "
                    f"| {'pass' if ok else '**FAIL**'} |"
                )
    print("\n" + "\n".join(verdicts))
    if args.write:
        head = [
            "## Start-up (callgrind)",
            "",
            f"Date: {time.strftime('%Y-%m-%d %H:%M %Z')}  ",
            f"loopwright git {git_rev()}; `python bench/imports.py {' '.join(sys.argv[1:])}`: "
            f"instructions of the whole process under valgrind's callgrind, {args.runs} run(s) "
            "each, bytecode compiled beforehand. See bench/README.md.",
            "",
        ]
        write_section(head[0], "\n".join([*head, *lines, "", *verdicts]))


if __name__ == "__main__":
    main()
