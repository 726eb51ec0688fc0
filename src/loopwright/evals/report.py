"""An eval's results: one `CaseResult` per case (its checks and the session it is stored as),
gathered in an `EvalResult`, shown as a table or written as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .expectations import Check


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: str
    agent: str
    session_id: str
    """The case's session in the store: replay it, fork it, open it in the playground."""
    stop_reason: str | None
    answer: str
    checks: tuple[Check, ...]
    error: str | None = None
    """Why the case could not run to its end (a bad model, a run that failed to start)."""

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "passed": self.passed,
            "agent": self.agent,
            "session_id": self.session_id,
            "stop_reason": self.stop_reason,
            "answer": self.answer,
            "checks": [c.to_dict() for c in self.checks],
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class EvalResult:
    run: str
    """The run's id: every case's session is `eval-<run>-<case>`."""
    dataset: str
    tenant: str
    cases: tuple[CaseResult, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases)

    @property
    def failed(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "dataset": self.dataset,
            "tenant": self.tenant,
            "passed": len(self.cases) - len(self.failed),
            "failed": len(self.failed),
            "cases": [c.to_dict() for c in self.cases],
        }


def table(result: EvalResult) -> str:
    """The results as a person reads them: one row per case, then every failed check."""
    rows = [["case", "result", "checks", "stop", "session"]]
    for case in result.cases:
        held = sum(1 for c in case.checks if c.passed)
        verdict = "pass" if case.passed else ("ERROR" if case.error else "FAIL")
        rows.append(
            [
                case.case,
                verdict,
                f"{held}/{len(case.checks)}",
                case.stop_reason or "-",
                case.session_id,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for case in result.failed:
        lines.append("")
        lines.append(f"{case.case}:")
        if case.error:
            lines.append(f"  error: {case.error}")
        lines += [f"  FAIL {c.check}: {c.reason}" for c in case.checks if not c.passed]
    failed = len(result.failed)
    lines.append("")
    lines.append(f"{len(result.cases) - failed} passed, {failed} failed (run {result.run})")
    return "\n".join(lines)
