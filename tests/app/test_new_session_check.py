"""Start checks the spec off the GUI thread: building the space and drawing configs until one schedules
takes seconds on CUDA spaces (more with tensor intrinsics), and the dialog stays responsive meanwhile.

The real check_spec runs (wrapped to record its thread and, in the first test, held until the test lets
it go, so the in-between state can be seen)."""

from __future__ import annotations

import threading

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.core.errors import SpaceError
from tunelab.core.usecases import tuning as loop  # the use case the dialog checks a spec through


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    dialog.show()
    for name, value in {"M": 32, "N": 32, "K": 32}.items():
        dialog._shape_spins[name].setValue(value)
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    dialog._on_problem_changed()
    qtbot.waitUntil(dialog.can_start, timeout=30_000)
    return dialog


def test_start_checks_the_spec_in_a_worker_then_accepts(qtbot, settings, monkeypatch):
    real = loop.check_spec
    threads: list[threading.Thread] = []
    release = threading.Event()

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread())
        assert release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "check_spec", recorded)
    dialog = _dialog(qtbot, settings)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: len(threads) == 1, timeout=10_000)
    # checking: the GUI thread returned at once, Start is off and says so, nothing accepted yet
    assert threads[0] is not threading.main_thread()
    assert dialog.is_checking_spec() and not dialog.can_start()
    assert dialog.start_button.text() == "Checking…"
    assert dialog.error_label.text().startswith("Checking that the space schedules")
    assert dialog.result() != dialog.DialogCode.Accepted
    dialog.start_button.click()  # a second click while it checks starts no second check
    release.set()
    qtbot.waitUntil(lambda: dialog.result() == dialog.DialogCode.Accepted, timeout=60_000)
    assert len(threads) == 1 and not dialog.is_checking_spec()
    assert dialog.spec().shape == {"M": 32, "N": 32, "K": 32}


def test_a_refused_spec_is_shown_in_place_and_start_is_offered_again(qtbot, settings, monkeypatch):
    def refused(*_args, **_kwargs):
        raise SpaceError("the auto space cannot schedule this compute: none of 9 configs drawn in 2.0 s")

    monkeypatch.setattr(loop, "check_spec", refused)
    dialog = _dialog(qtbot, settings)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: not dialog.is_checking_spec(), timeout=30_000)
    assert dialog.result() != dialog.DialogCode.Accepted
    assert dialog.error_label.text().startswith("the auto space cannot schedule this compute")
    assert dialog.error_label.property("role") == "error"
    assert dialog.start_button.text() == "Start"
