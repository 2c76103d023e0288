"""Driving the New-session dialog as a person does: waiting for its target (resolved in a worker) and its
space editor (it derives the space in a worker thread), asking for a small session, and starting it."""

from __future__ import annotations

import time
from typing import Any

SPACE_WAIT_MS = 120_000  # an auto space's sketches on a loaded 2-core machine
TARGET_WAIT_S = 120.0  # a worker resolving a target waits for the app's TVM import first


def is_settled(dialog: Any) -> bool:
    """Nothing left for the dialog's workers to say about the problem: its target is resolved (not
    "Checking the target…"), no typing debounce is running, and the space editor has derived the space
    (or said why it cannot)."""
    return not (
        dialog.is_resolving_target() or dialog._problem_timer.isActive() or dialog.space_editor.is_pending()
    )


def settled(qtbot: Any, dialog: Any, timeout_ms: int = SPACE_WAIT_MS) -> Any:
    """``dialog`` once its target is known and its space editor has derived the space (is_settled)."""
    qtbot.waitUntil(lambda: is_settled(dialog), timeout=timeout_ms)
    return dialog


def target_known(dialog: Any, timeout_s: float = TARGET_WAIT_S) -> Any:
    """``dialog`` once a worker has resolved the target it shows (Qt's events turned meanwhile): for
    callers without qtbot (a child app, ask_small_gemm)."""
    from PySide6.QtCore import QCoreApplication

    deadline = time.monotonic() + timeout_s
    while dialog.is_resolving_target():
        assert time.monotonic() < deadline, "the dialog's target was not resolved in time"
        QCoreApplication.processEvents()
        time.sleep(0.01)
    return dialog


def ask_small_gemm(dialog: Any) -> None:
    """GEMM 32^3 on this machine's CPU (llvm), asked at once (no typing debounce) once its target is
    resolved; the space follows."""
    for name, value in {"M": 32, "N": 32, "K": 32}.items():
        dialog._shape_spins[name].setValue(value)
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    dialog._on_problem_changed()
    target_known(dialog)


def choose_random(dialog: Any) -> None:
    """Random search, chosen by the person: a space's recommendation no longer replaces it."""
    dialog.tuner_combo.setCurrentIndex(dialog.tuner_combo.findData("random"))
    dialog._on_tuner_chosen()


def small_random_budget(dialog: Any, trials: int, batch: int) -> None:
    """Random search over ``trials`` in batches of ``batch``, each measured quickly (two samples of one run)."""
    choose_random(dialog)
    dialog.trials_spin.setValue(trials)
    dialog.batch_spin.setValue(batch)
    dialog.number_spin.setValue(1)
    dialog.repeat_spin.setValue(2)
    dialog.min_repeat_spin.setValue(1)


def start_accepted(qtbot: Any, dialog: Any) -> None:
    """Click Start and wait until the dialog accepts: the spec is checked in a worker first."""
    dialog.start_button.click()
    qtbot.waitUntil(lambda: dialog.result() == dialog.DialogCode.Accepted, timeout=60_000)
