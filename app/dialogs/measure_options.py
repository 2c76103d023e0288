"""The New-session dialog's measurement options and its early-stop row.

Every option `tunelab tune` has for measuring (number, repeat, min repeat, warm-up, timeout, target
CV, max repeat, cool-down, confirmation runs / top / max seconds, fail-fast, cache flush, correctness
check) as one group box that reads and writes a `MeasureOptions`; and the early-stop row, whose hint
and limits follow the trial budget.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.widgets.fields import float_spin, int_spin
from tunelab.core.records import MeasureOptions


class MeasureOptionsBox(QGroupBox):
    """The measurement options as the CLI names them; `options()` and `set_options()` convert."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Measurement", parent)
        d = MeasureOptions()
        self._build_timing(d)
        self._build_hygiene(d)
        self._build_confirmation(d)
        self._build_checks(d)
        self.confirm_spin.valueChanged.connect(self._on_confirm_changed)
        self._build_form()
        from tunelab.app.workers.telemetry_source import ask_gpu_status

        self._show_gpu_options()
        ask_gpu_status().known.connect(
            self._show_gpu_options
        )  # this machine's GPU: asked of NVML in a worker
        self._on_confirm_changed(self.confirm_spin.value())

    def _build_timing(self, d: MeasureOptions) -> None:
        """How each sample is timed: number, repeat, min repeat, warm-up, timeout."""
        self.number_spin = int_spin(1, 100_000, d.number, "Runs averaged into one sample (--number)")
        self.repeat_spin = int_spin(1, 1000, d.repeat, "Samples kept per trial (--repeat)")
        self.min_repeat_spin = int_spin(
            0, 100_000, d.min_repeat_ms, "Grow 'number' until one sample takes at least this long", " ms"
        )
        self.warmup_spin = int_spin(0, 1000, d.warmup, "Untimed runs before timing (--warmup)")
        self.timeout_spin = float_spin(
            0.5,
            3600.0,
            d.timeout_s,
            1,
            "Per build and per run; a kernel that takes longer is a failed trial",
            " s",
        )

    def _build_hygiene(self, d: MeasureOptions) -> None:
        """Sampling hygiene: sample on until the spread is small, wait while the machine is busy."""
        self.target_cv_spin = float_spin(
            0.0,
            100.0,
            100 * d.target_cv,
            1,
            "Keep sampling, in steps of 'repeat', until the samples' spread (CV) is this small "
            "(--target-cv); 0 takes 'repeat' samples only",
            " %",
        )
        self.max_repeat_spin = int_spin(1, 100_000, d.max_repeat, "Cap on samples per trial (--max-repeat)")
        self.leader_band_spin = float_spin(
            0.0,
            100.0,
            d.leader_band,
            2,
            "No further repeats for a candidate whose fastest sample is already this many times the best "
            "so far, and a two-sample probe for one twice as slow (--leader-band); 0 times every "
            "candidate fully",
            " ×",
        )
        self.cooldown_spin = float_spin(
            0.0,
            3600.0,
            d.cooldown_s,
            1,
            "Before a batch, wait up to this long while the machine is hot or another process is busy "
            "(--cooldown); the trials are marked when it stays so",
            " s",
        )
        self.cooldown_spin.setSpecialValueText("no wait")
        self.cooldown_tip = self.cooldown_spin.toolTip()  # restored when measuring here again

    def _build_confirmation(self, d: MeasureOptions) -> None:
        """The winners confirmed in fresh processes when tuning finishes, and fail-fast."""
        self.confirm_spin = int_spin(
            0,
            32,
            d.confirm_runs,
            "When tuning finishes, re-measure the fastest trials in this many fresh processes: "
            "the fastest of many noisy figures is biased low (the winner's curse), so exports "
            "state the confirmed figure. Measured on RPC servers, each is a fresh session on a server "
            "under the key. 0 turns it off (--confirm-runs).",
            " processes",
        )
        self.confirm_spin.setSpecialValueText("off")
        self.confirm_top_spin = int_spin(
            1, 100, d.confirm_top, "How many of the fastest trials to confirm (--confirm-top)", " fastest"
        )
        self.confirm_cap_spin = float_spin(
            0.0,
            86400.0,
            d.confirm_max_s,
            0,
            "A confirmation taken while another process is busy, or whose processes disagree, is not "
            "evidence: it is measured again, for up to this long in all (--confirm-max-s)",
            " s",
        )
        self.confirm_cap_spin.setSpecialValueText("one attempt")
        self.fail_fast_spin = int_spin(
            0,
            100_000,
            d.fail_fast,
            "Stop the session when its first N trials all fail the same way, as a wrong target does "
            "(--fail-fast); 0 turns it off",
            " trials",
        )
        self.fail_fast_spin.setSpecialValueText("off")

    def _build_checks(self, d: MeasureOptions) -> None:
        """Cache flushes, the correctness check and the GPU's L2 flush and locked clocks."""
        self.flush_check = QCheckBox("Flush CPU caches between samples")
        self.flush_check.setChecked(d.cache_flush)
        self.check_check = QCheckBox("Check each kernel's result against NumPy")
        self.check_check.setChecked(d.check_correctness)
        self.l2_combo = QComboBox()
        for mode, words in (
            ("auto", "auto: where the data fits in L2"),
            ("on", "before every sample"),
            ("off", "never"),
        ):
            self.l2_combo.addItem(words, mode)
        self.l2_combo.setToolTip(
            "GPU: flush the L2 cache before each timed sample, as Triton's do_bench does, so a kernel whose "
            "data fits in L2 is not timed on the previous run's cached data (--l2-flush)"
        )
        self.l2_combo.setCurrentIndex(self.l2_combo.findData(d.l2_flush))
        self.lock_check = QCheckBox("Lock the GPU's SM and memory clocks (NVML; needs root)")
        self.lock_check.setToolTip(
            "Locked clocks stop timings drifting with temperature and power; reset when the session ends. "
            "Where NVML refuses, the session says so (--lock-clocks)"
        )
        self.lock_check.setChecked(d.lock_clocks)

    def _build_form(self) -> None:
        """Every option in one form, the note on the GPU options last."""

        form = QFormLayout(self)
        rows: tuple[tuple[str, QWidget], ...] = (
            ("Number", self.number_spin),
            ("Repeat", self.repeat_spin),
            ("Min repeat", self.min_repeat_spin),
            ("Warm-up runs", self.warmup_spin),
            ("Timeout", self.timeout_spin),
            ("Target CV", self.target_cv_spin),
            ("Max repeat", self.max_repeat_spin),
            ("Leaders' band", self.leader_band_spin),
            ("Cool-down", self.cooldown_spin),
            ("Confirm best in", self.confirm_spin),
            ("Confirm the", self.confirm_top_spin),
            ("Confirm for up to", self.confirm_cap_spin),
            ("Fail fast after", self.fail_fast_spin),
            ("", self.flush_check),
            ("", self.check_check),
            ("GPU L2 flush", self.l2_combo),
            ("", self.lock_check),
        )
        for caption, field in rows:  # a check box carries its own words and takes the whole row
            if caption:
                form.addRow(caption, field)
            else:
                form.addRow(field)
        self.gpu_note = QLabel()
        self.gpu_note.setObjectName("gpu_options_note")
        self.gpu_note.setProperty("role", "hint")
        self.gpu_note.setWordWrap(True)
        form.addRow(self.gpu_note)

    def _on_confirm_changed(self, runs: int) -> None:
        for w in (self.confirm_top_spin, self.confirm_cap_spin):
            w.setEnabled(runs > 0)

    def _spins(self) -> dict[str, QSpinBox | QDoubleSpinBox]:
        """The options shown as a number as they are (target CV is shown in %, the switches as boxes)."""
        return {
            "number": self.number_spin,
            "repeat": self.repeat_spin,
            "min_repeat_ms": self.min_repeat_spin,
            "warmup": self.warmup_spin,
            "timeout_s": self.timeout_spin,
            "max_repeat": self.max_repeat_spin,
            "leader_band": self.leader_band_spin,
            "cooldown_s": self.cooldown_spin,
            "confirm_runs": self.confirm_spin,
            "confirm_top": self.confirm_top_spin,
            "confirm_max_s": self.confirm_cap_spin,
            "fail_fast": self.fail_fast_spin,
        }

    def _show_gpu_options(self) -> None:
        """The L2 flush and the locked clocks act on a GPU of this machine (a remote session's kernels are
        timed without them): without one they are shown disabled, and a line says why."""
        from tunelab.app.workers.telemetry_source import gpu_status_known, machine_gpu_status

        has_gpu, _status = machine_gpu_status()
        for widget in (self.l2_combo, self.lock_check):
            widget.setEnabled(has_gpu)
        if not gpu_status_known():
            self.gpu_note.setText("Checking for an NVIDIA GPU on this machine…")
            return
        self.gpu_note.setText(
            ""
            if has_gpu
            else "No NVIDIA GPU on this machine: the GPU options apply only to kernels timed on one here."
        )
        self.gpu_note.setVisible(not has_gpu)

    def options(self) -> MeasureOptions:
        values: dict[str, Any] = {
            key: float(spin.value()) if isinstance(spin, QDoubleSpinBox) else spin.value()
            for key, spin in self._spins().items()
        }
        return MeasureOptions(
            **values,
            cache_flush=self.flush_check.isChecked(),
            check_correctness=self.check_check.isChecked(),
            target_cv=float(self.target_cv_spin.value()) / 100,
            l2_flush=str(self.l2_combo.currentData()),
            lock_clocks=self.lock_check.isChecked(),
        )

    def set_options(self, data: dict[str, Any]) -> None:
        """Show the options of a saved spec's ``measure`` (unknown or mistyped keys are skipped)."""
        known = {f.name for f in fields(MeasureOptions)}
        spins = self._spins()
        for key, value in data.items():
            if key not in known:
                continue
            if key in ("cache_flush", "check_correctness") and isinstance(value, bool):
                (self.flush_check if key == "cache_flush" else self.check_check).setChecked(value)
            elif key == "l2_flush" and self.l2_combo.findData(value) >= 0:
                self.l2_combo.setCurrentIndex(self.l2_combo.findData(value))
            elif key == "lock_clocks" and isinstance(value, bool):
                self.lock_check.setChecked(value)
            elif key == "target_cv" and isinstance(value, int | float):
                self.target_cv_spin.setValue(100 * float(value))
            elif key in spins and isinstance(value, int | float) and not isinstance(value, bool):
                spin = spins[key]
                if isinstance(spin, QDoubleSpinBox):
                    spin.setValue(float(value))
                else:
                    spin.setValue(int(value))


class EarlyStopRow(QWidget):
    """'Stop after [N] trials without improvement', with a hint in terms of the budget. N is at most
    the budget, and follows it (a quarter of it) until the person sets it."""

    def __init__(self, trials: QSpinBox, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._trials = trials
        self._edited = False
        self.check = QCheckBox("Stop after")
        self.spin = int_spin(1, 1_000_000, self._suggested(), "Trials in a row without a better one")
        self.spin.setSuffix(" trials without improvement")
        self.spin.setEnabled(False)
        self.hint = QLabel()
        self.hint.setProperty("role", "hint")
        self.hint.setWordWrap(True)
        self.check.toggled.connect(self.spin.setEnabled)
        self.check.toggled.connect(self._update_hint)
        self.spin.valueChanged.connect(self._on_spin_edited)
        trials.valueChanged.connect(self._on_trials_changed)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.check)
        row.addWidget(self.spin, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.hint)
        self._on_trials_changed(trials.value())

    def _suggested(self) -> int:
        return max(1, self._trials.value() // 4)

    def _on_spin_edited(self, _value: int) -> None:
        if not self.spin.signalsBlocked():
            self._edited = True
        self._update_hint()

    def _on_trials_changed(self, trials: int) -> None:
        self.spin.blockSignals(True)
        self.spin.setMaximum(max(1, trials))
        if not self._edited:
            self.spin.setValue(self._suggested())
        self.spin.blockSignals(False)
        self._update_hint()

    def set_value(self, value: int | None) -> None:
        """A saved early stop (None: off)."""
        self.check.setChecked(value is not None)
        if value is not None:
            self.spin.setValue(value)
            self._edited = True

    def value(self) -> int | None:
        return self.spin.value() if self.check.isChecked() else None

    def _update_hint(self) -> None:
        trials = self._trials.value()
        if not self.check.isChecked():
            self.hint.setText(f"Off: all {trials:,} trials are measured.")
            return
        n = self.spin.value()
        self.hint.setText(
            f"Stops once {n:,} trials in a row bring no better one; at most {trials:,} trials "
            f"(the budget), at least {min(n, trials):,}."
        )
