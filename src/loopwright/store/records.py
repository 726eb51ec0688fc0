"""A session's and a pending item's rows as records, for both backends: their SELECTs give the
same columns in the same order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from . import PendingRecord
from .log import SessionKey, SessionRecord


def pending_record(row: Sequence[Any]) -> PendingRecord:
    record = PendingRecord(*row)
    return replace(
        record,
        args=json.loads(row[7]),
        edited_args=None if row[14] is None else json.loads(row[14]),
    )


def session_record(row: Sequence[Any], now: float) -> SessionRecord:
    tenant, agent, name, status, last_seq, created, updated, owner, expires = row[:9]
    if owner is not None and expires is not None and expires > now:
        status = "running"
    elif status == "running":
        status = "interrupted"  # its run ended without its `done` and let the lease expire
    parent = None if row[9] is None else SessionKey(row[9], row[10], row[11])
    return SessionRecord(
        SessionKey(tenant, agent, name),
        status,
        last_seq,
        created,
        updated,
        parent,
        owner,
        expires if owner is not None else None,
    )
