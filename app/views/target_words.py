"""A stored session's target in words (its mcpu and ISA level need LLVM): worked out in a worker, once per
target in this process, and said by its stored mcpu until then."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QObject, Signal

from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.records import SessionRecord

# A stored target's JSON (sorted keys) -> its words, for every target a worker has described.
_described: dict[str, str] = {}


def _key(target: dict[str, Any]) -> str:
    return json.dumps(target, sort_keys=True, default=str)


def target_text(record: SessionRecord) -> str:
    """The session's target as the browser and the status bar say it."""
    t = record.target
    if record.target_kind == "cuda":
        return f"CUDA {t.get('arch', '')}".strip()
    return _described.get(_key(t)) or f"CPU {t.get('mcpu', '')}".strip()


def describe_targets(targets: list[dict[str, Any]]) -> dict[str, str]:
    """Each stored CPU target's words: the mcpu actually used and its ISA level. In a worker (LLVM)."""
    from tunelab.core.usecases.targets import describe_target_json

    words = {}
    for target in targets:
        try:
            words[_key(target)] = describe_target_json(target)
        except Exception:  # noqa: BLE001 - a target this TVM cannot read keeps its stored mcpu
            words[_key(target)] = f"CPU {target.get('mcpu', '')}".strip()
    return words


class TargetWords(QObject):
    """Asks a worker for the words of stored CPU targets not described yet; `described` once they are."""

    described = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._asked: set[str] = set()

    def ask(self, records: list[SessionRecord]) -> None:
        cpu_targets = {_key(r.target): r.target for r in records if r.target_kind != "cuda"}
        wanted = {k: t for k, t in cpu_targets.items() if k not in _described and k not in self._asked}
        if not wanted:
            return
        self._asked |= set(wanted)
        worker = CallWorker(None, describe_targets, list(wanted.values()))
        worker.succeeded.connect(self._on_described)
        keep_alive(worker).start()

    def _on_described(self, words: dict[str, str]) -> None:
        _described.update(words)
        self.described.emit()
