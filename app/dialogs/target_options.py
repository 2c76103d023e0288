"""The New-session dialog's target options: this host's CPU as the OS reports it, and the fields of the
target a session's kernels are built for, prefilled with what tunelab detects.

For a CPU target they are LLVM's `mcpu`, `mattr` and the threads (`num-cores`); for CUDA the `arch`, so
kernels can be built for another GPU than this machine's (or for one where there is none). Fields that
hold what was detected leave the spec's target as chosen ("auto", "llvm", "cuda"); an edited one makes it
the JSON target dict the fields spell, the form `tunelab tune --target` takes. What was detected is found
out in workers (tunelab.app.workers.target_facts): the fields are disabled until it is known (set_detected).

The checks run from cheap to costly. The spelling of an `mattr` or an `arch` is checked as the person
types, and features LLVM does not know as soon as a worker has said which it knows (asked once per feature;
unchecked until then); whether this CPU has what an `mcpu` / `mattr` implies is tunelab.core.target.info's
check, made when the dialog has the target resolved as the CLI does (in a worker); the proof, the self-check
(tunelab.core.target.selfcheck: a small kernel built and run in a child process, seconds), runs in a thread
once typing pauses, one check at a time, and its verdict is kept per target.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QWidget

from tunelab.app.widgets.fields import captioned_fields, int_spin, line_edit, push_button
from tunelab.app.widgets.timers import single_shot
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.app.workers.target_facts import facts, known_cpu_names, known_feature
from tunelab.core.errors import TargetError, shown
from tunelab.core.usecases.targets import HostCPU, TargetInfo

# sm_ and a compute capability: sm_80, sm_90, sm_120; "a"/"f" mark the arch-specific feature sets (sm_90a).
# TVM itself only checks the "sm_" prefix and would pass "sm_8" on to nvcc.
ARCH_FORMAT = re.compile(r"sm_\d{2,3}[af]?")
MATTR_ENTRY = re.compile(r"[+-][0-9a-z][0-9a-z._-]*")
# A self-check costs seconds (a child imports TVM): wait for a pause in typing so "+avx" is not checked
# on the way to "+avx2".
SELF_CHECK_DEBOUNCE_MS = 600
# The x86 flags that decide which vector code a kernel gets (and which kills it with SIGILL); every
# avx512* flag the OS reports is shown after them.
X86_SHOWN_FLAGS = ("avx", "avx2", "fma")
AARCH64_SHOWN_FLAGS = ("asimd", "asimddp", "i8mm", "bf16", "sve", "sve2")


def isa_flags(host: HostCPU) -> list[str]:
    """The feature flags that matter for kernels, as the OS reports them ("avx2", "fma", "no AVX-512")."""
    if host.arch == "x86_64":
        shown_flags = [f for f in X86_SHOWN_FLAGS if f in host.flags]
        shown_flags += sorted(f for f in host.flags if f.startswith("avx512"))
        if "avx512f" not in host.flags:
            shown_flags.append("no AVX-512")
        return shown_flags
    if host.arch == "aarch64":
        return [f for f in AARCH64_SHOWN_FLAGS if f in host.flags]
    return []


def cpu_text(host: HostCPU, cpu: TargetInfo) -> str:
    """This host's CPU in one line: its model, the flags that matter, the mcpu tunelab picks."""
    mcpu = str(cpu.json.get("mcpu", "generic"))
    mattr = ",".join(cpu.json.get("mattr") or ())
    picked = f"{mcpu} {mattr}" if mattr else mcpu
    parts = [host.model_name or "unknown CPU", ", ".join(isa_flags(host)) or "no feature flags reported"]
    naming = f"tunelab picks mcpu {picked}"
    if host.llvm_name != mcpu:
        naming += f" (LLVM calls it {host.llvm_name})"
    return " · ".join([p for p in parts if p] + [naming])


def parse_mattr(text: str, arch: str, unchecked: list[str] | None = None) -> tuple[str, ...]:
    """An mattr as typed ("+avx2, +fma") as its entries; TargetError naming the first bad one. Whether LLVM
    knows a feature is a worker's answer (target_facts): one not known yet is asked, left unchecked and
    named in ``unchecked``."""
    entries = split_mattr(text)
    for entry in entries:
        if not MATTR_ENTRY.fullmatch(entry):
            raise TargetError(f"mattr entry {shown(entry)} is not +feature or -feature (e.g. +avx2,+fma)")
        known = known_feature(entry[1:], arch)
        if known is None and unchecked is not None:
            unchecked.append(entry)
        elif known is False:
            raise TargetError(
                f"LLVM knows no feature {shown(entry[1:])} for this {arch} host (mattr {entry})"
            )
    return entries


def split_mattr(text: str) -> tuple[str, ...]:
    return tuple(entry.strip() for entry in text.split(",") if entry.strip())


def check_arch(text: str) -> str:
    """A CUDA arch as typed, stripped; TargetError unless it reads sm_NN."""
    arch = text.strip()
    if not ARCH_FORMAT.fullmatch(arch):
        raise TargetError(
            f"arch {shown(arch)} is not a CUDA architecture: sm_ and the compute capability, e.g. sm_80 or sm_90"
        )
    return arch


def target_key(target: TargetInfo) -> str:
    """The self-check's verdicts are kept by the full target (after the CLI's merge with the detected one)."""
    return json.dumps(target.json, sort_keys=True)


class TargetCheckWorker(CallWorker):
    """The self-check of one target in a thread (it reads no store); `succeeded` carries the target's
    key, `failed` the check's message."""

    def __init__(self, key: str, target: TargetInfo) -> None:
        super().__init__(None, _self_check, key, target)
        self.key = key


def _self_check(key: str, target: TargetInfo) -> str:
    from tunelab.core.usecases.targets import self_check  # (its module imports TVM lazily, in the check)

    self_check(target)
    return key


class TargetOptions(QGroupBox):
    """The target's fields, prefilled with what tunelab detects (disabled until set_detected). `edited` when
    the person changes one (or restores the detected values); `checked` when a self-check has a verdict."""

    edited = Signal()
    checked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Target options", parent)
        # What was detected (set_detected): this CPU, resolve_target("llvm") and resolve_target("cuda").
        self._host: HostCPU | None = None
        self._cpu: TargetInfo | None = None
        self._gpu: TargetInfo | None = None  # this GPU's arch, or tunelab's default without one
        self._restored: Any = None  # a remembered target (set_target_text) to fill in once detected
        self._kind = "llvm"
        self._verdicts: dict[str, str | None] = {}  # target_key -> the self-check's error; None: it passed
        self._wanted: tuple[str, TargetInfo] | None = None  # the target the dialog shows, still to be checked
        self._worker: TargetCheckWorker | None = None  # the check running now (one at a time)

        self._build_fields()
        self._build_form()

        self._check_timer = single_shot(self, SELF_CHECK_DEBOUNCE_MS, self._start_check)

        self.mcpu_combo.currentTextChanged.connect(self._on_edited)
        self.mattr_edit.textChanged.connect(self._on_edited)
        self.threads_spin.valueChanged.connect(self._on_edited)
        self.arch_edit.textChanged.connect(self._on_edited)
        self._set_fields_enabled(False)
        self.show_kind(self._kind)

    def set_detected(self, host: HostCPU, cpu: TargetInfo, gpu: TargetInfo) -> None:
        """What workers detected here: shown, filled in (a remembered target over it), the fields enabled."""
        self._host, self._cpu, self._gpu = host, cpu, gpu
        self.cpu_label.setText(cpu_text(host, cpu))
        self.cpu_label.setToolTip(
            cpu.note or "The most specific CPU name whose instruction sets this host can all execute"
        )
        self.gpu_label.setText(gpu.description)
        if not self._list_cpu_names():  # LLVM's list, asked of a worker once per process: any name meanwhile
            facts().answered.connect(self._on_facts_answered)
        self._fill(self._detected_fields_all())
        self.set_target_text(self._restored)
        self._set_fields_enabled(True)
        self.show_kind(self._kind)

    def is_detected(self) -> bool:
        return self._cpu is not None

    def _set_fields_enabled(self, enabled: bool) -> None:
        for field in (self.mcpu_combo, self.mattr_edit, self.threads_spin, self.arch_edit):
            field.setEnabled(enabled)

    def _build_fields(self) -> None:
        """What was detected, the CPU's mcpu / mattr / threads, the CUDA arch, and Use detected."""
        self.cpu_label = QLabel("checking this machine's CPU…")
        self.cpu_label.setObjectName("detected_cpu")
        self.cpu_label.setWordWrap(True)
        self.gpu_label = QLabel("checking this machine's GPU…")
        self.gpu_label.setObjectName("detected_gpu")

        self.mcpu_combo = QComboBox()
        self.mcpu_combo.setObjectName("mcpu")
        self.mcpu_combo.setEditable(True)
        self.mcpu_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.mcpu_combo.setMinimumContentsLength(14)
        self.mcpu_combo.setToolTip(
            "LLVM's CPU name: the instruction sets and the tuning kernels are built for"
        )
        self.mattr_edit = line_edit(
            "mattr", "LLVM features turned on (+) or off (-) on top of the mcpu's", "+avx2,+fma"
        )
        self.threads_spin = int_spin(
            1,
            os.cpu_count() or 1,
            1,
            "num-cores: the threads a kernel's parallel loops use (detected: physical cores)",
        )
        self.threads_spin.setObjectName("num_cores")
        self.arch_edit = line_edit(
            "cuda_arch", "The GPU the kernels are built for: sm_ and its compute capability", "sm_80"
        )
        self.reset_button = push_button(
            "Use detected", "Put back what tunelab detected for this machine", self.reset
        )
        self.status_label = QLabel()
        self.status_label.setProperty("role", "hint")
        self.status_label.setWordWrap(True)
        self.status_label.hide()

    def _build_form(self) -> None:
        """CPU, its fields in one row, GPU, arch, and the self-check's status beside Use detected."""
        self._cpu_row = QWidget()
        cpu_fields = QHBoxLayout(self._cpu_row)
        cpu_fields.setContentsMargins(0, 0, 0, 0)
        fields = (("mcpu", self.mcpu_combo), ("mattr", self.mattr_edit), ("threads", self.threads_spin))
        captioned_fields(fields, stretch=self.mattr_edit, layout=cpu_fields)
        status_row = QWidget()
        status_layout = QHBoxLayout(status_row)
        status_layout.setContentsMargins(0, 0, 0, 0)
        status_layout.addWidget(self.status_label, 1)
        status_layout.addWidget(self.reset_button, 0, Qt.AlignmentFlag.AlignRight)
        self._form = QFormLayout(self)
        self._form.addRow("CPU", self.cpu_label)
        self._form.addRow("Build for", self._cpu_row)
        self._form.addRow("GPU", self.gpu_label)
        self._form.addRow("arch", self.arch_edit)
        self._form.addRow(status_row)

    # ---- what the fields hold ------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """The kind of target the fields shown are for: "llvm" or "cuda"."""
        return self._kind

    def show_kind(self, kind: str) -> None:
        """Show the fields of a `kind` target ("llvm" or "cuda"); the other kind's keep their values."""
        self._kind = kind
        cuda = kind == "cuda"
        for widget, visible in (
            (self.cpu_label, not cuda),
            (self._cpu_row, not cuda),
            (self.gpu_label, cuda),
            (self.arch_edit, cuda),
        ):
            self._form.setRowVisible(widget, visible)
        self.reset_button.setEnabled(self.is_edited())
        self._update_status()

    def is_edited(self) -> bool:
        """Whether the shown kind's fields hold anything but what was detected (never before it is known)."""
        return self.is_detected() and self._fields() != self._detected_fields()

    def target_dict(self) -> dict[str, Any]:
        """The JSON target the shown fields spell (whether or not they were edited)."""
        if self._kind == "cuda":
            return {"kind": "cuda", "arch": self.arch_edit.text().strip()}
        target: dict[str, Any] = {
            "kind": "llvm",
            "mcpu": self.mcpu_combo.currentText().strip(),
            "num-cores": self.threads_spin.value(),
        }
        mattr = split_mattr(self.mattr_edit.text())
        if mattr:  # none given: resolve_target drops the detected mattr, which belongs to the detected mcpu
            target["mattr"] = list(mattr)
        return target

    def target_text(self, choice: str) -> str:
        """The spec's target: `choice` while the fields hold what was detected, else the JSON they spell."""
        return json.dumps(self.target_dict()) if self.is_edited() else choice

    def check_spelling(self) -> bool:
        """The cheap checks of the edited fields (mcpu given, mattr and arch spelt right, features LLVM
        knows); TargetError saying what is wrong, with that field marked. False while a feature is left
        unchecked: a worker has not said yet whether LLVM knows it (check again once it has)."""
        bad: QWidget | None = None
        unchecked: list[str] = []
        try:
            if not self.is_edited():
                return True
            if self._kind == "cuda":
                bad = self.arch_edit
                check_arch(self.arch_edit.text())
            else:
                bad = self._mcpu_edit()
                if not self.mcpu_combo.currentText().strip():
                    raise TargetError("mcpu is empty; give an LLVM CPU name or press Use detected")
                bad = self.mattr_edit
                assert self._host is not None  # edited: detected
                parse_mattr(self.mattr_edit.text(), self._host.arch, unchecked)
            bad = None
        finally:
            self._mark(bad)
        return not unchecked

    def mark_refused(self) -> None:
        """Mark the fields the person changed: the target they spell is refused here (the CLI's check)."""
        if not self.is_detected():
            return
        if self._kind == "cuda":
            _set_invalid(self.arch_edit, self.is_edited())
            return
        detected_mcpu, detected_mattr, _ = self._detected_fields()
        mcpu_edit = self._mcpu_edit()
        _set_invalid(mcpu_edit, self.mcpu_combo.currentText().strip() != detected_mcpu)
        _set_invalid(self.mattr_edit, split_mattr(self.mattr_edit.text()) != detected_mattr)

    def set_target_text(self, text: Any) -> None:
        """Fill the fields from a target as the spec holds it (from the settings); a choice ("auto",
        "llvm", "cuda") or anything that is not a JSON target leaves them as they are. Before the detected
        target is known, kept to fill in then."""
        if not self.is_detected():
            self._restored = text
            return
        if not isinstance(text, str) or not text.strip().startswith("{"):
            return
        try:
            data = json.loads(text)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        mcpu, mattr, cores, arch = self._detected_fields_all()
        if data.get("kind") == "llvm":
            mcpu = str(data.get("mcpu") or "generic")
            raw = data.get("mattr") or ()
            mattr = split_mattr(raw if isinstance(raw, str) else ",".join(str(m) for m in raw))
            cores = data["num-cores"] if isinstance(data.get("num-cores"), int) else cores
        elif data.get("kind") == "cuda" and isinstance(data.get("arch"), str):
            arch = data["arch"]
        self._fill((mcpu, mattr, cores, arch))

    def reset(self) -> None:
        """Put back the detected values of every field."""
        if not self.is_detected():
            return
        self._fill(self._detected_fields_all())
        self._on_edited()

    # ---- the self-check ------------------------------------------------------------------------
    def want_check(self, target: TargetInfo | None) -> None:
        """`target` is what the dialog now shows and must pass the self-check before it can start
        (None: nothing to check, e.g. the detected target, or one already refused)."""
        if target is None or target.kind != "llvm" or not self._isa_edited():
            self._wanted = None  # threads alone change no instruction the kernels may use
            self._check_timer.stop()
        else:
            key = target_key(target)
            self._wanted = (key, target)
            if key in self._verdicts:
                self._check_timer.stop()
            else:
                self._check_timer.start()
        self._update_status()

    def is_checking(self) -> bool:
        """Whether the wanted target's self-check is still to come (waiting for typing to pause, or running)."""
        return self._wanted is not None and self._wanted[0] not in self._verdicts

    def check_error(self) -> str | None:
        """The self-check's message for the wanted target when it failed; None when it passed or is to come."""
        if self._wanted is None:
            return None
        return self._verdicts.get(self._wanted[0])

    def _start_check(self) -> None:
        if self._worker is not None or not self.is_checking():
            return  # one check at a time: the next starts when the running one ends
        assert self._wanted is not None
        key, target = self._wanted
        worker = TargetCheckWorker(key, target)
        worker.succeeded.connect(self._on_check_passed)
        worker.failed.connect(self._on_check_failed)
        self._worker = worker
        # Parentless and kept alive: the dialog may close while the child still runs.
        keep_alive(worker).start()
        self._update_status()

    def _on_check_passed(self, key: str) -> None:
        self._verdict(key, None)

    def _on_check_failed(self, message: str, _details: str) -> None:
        if self._worker is not None:
            self._verdict(self._worker.key, message)

    def _verdict(self, key: str, error: str | None) -> None:
        self._verdicts[key] = error
        self._worker = None
        if self.is_checking():  # the person changed the target while this one was checked
            self._check_timer.start()
        self._update_status()
        self.checked.emit()

    def _update_status(self) -> None:
        text = ""
        if self._wanted is not None:
            key, target = self._wanted
            built_for = str(target.json.get("mcpu", "generic"))
            if target.json.get("mattr"):
                built_for += " " + ",".join(target.json["mattr"])
            if key not in self._verdicts:
                text = f"Self-check: building and running a small kernel for {built_for} here…"
            elif self._verdicts[key] is None:
                text = f"Self-check passed: a kernel built for {built_for} ran here."
            else:
                self.mark_refused()  # its message is the dialog's error
        self.status_label.setText(text)
        self.status_label.setVisible(bool(text))

    # ---- helpers -------------------------------------------------------------------------------
    def _on_edited(self) -> None:
        self._mark(None)
        self.reset_button.setEnabled(self.is_edited())
        self.edited.emit()

    def _isa_edited(self) -> bool:
        """Whether the mcpu or the mattr differ from the detected ones (what a kernel may execute)."""
        return self._kind == "llvm" and self.is_edited() and self._fields()[:2] != self._detected_fields()[:2]

    def _fields(self) -> tuple[Any, ...]:
        if self._kind == "cuda":
            return (self.arch_edit.text().strip(),)
        return (
            self.mcpu_combo.currentText().strip(),
            split_mattr(self.mattr_edit.text()),
            self.threads_spin.value(),
        )

    def _detected_fields(self) -> tuple[Any, ...]:
        mcpu, mattr, cores, arch = self._detected_fields_all()
        return (arch,) if self._kind == "cuda" else (mcpu, mattr, cores)

    def _detected_fields_all(self) -> tuple[str, tuple[str, ...], int, str]:
        assert self._cpu is not None and self._gpu is not None, "set_detected first"
        cpu = self._cpu.json
        return (
            str(cpu.get("mcpu", "generic")),
            tuple(cpu.get("mattr") or ()),
            int(cpu.get("num-cores", 1)),
            str(self._gpu.json["arch"]),
        )

    def _fill(self, values: tuple[str, tuple[str, ...], int, str]) -> None:
        mcpu, mattr, cores, arch = values
        fields = (self.mcpu_combo, self.mattr_edit, self.threads_spin, self.arch_edit)
        for field in fields:
            field.blockSignals(True)
        self.mcpu_combo.setCurrentText(mcpu)
        self.mattr_edit.setText(",".join(mattr))
        self.threads_spin.setValue(cores)
        self.arch_edit.setText(arch)
        for field in fields:
            field.blockSignals(False)
        self._mark(None)
        self.reset_button.setEnabled(self.is_edited())

    def _list_cpu_names(self) -> bool:
        """Offer the CPU names LLVM knows for this host in the -mcpu combo; False while they are not known."""
        assert self._host is not None
        listed = known_cpu_names(self._host.arch)
        if listed is None:
            return False
        text = self.mcpu_combo.currentText()
        self.mcpu_combo.blockSignals(True)  # the list changes, not the mcpu chosen
        self.mcpu_combo.addItems(list(listed))
        self.mcpu_combo.setCurrentText(text)
        self.mcpu_combo.blockSignals(False)
        return True

    def _on_facts_answered(self) -> None:
        if self._list_cpu_names():
            facts().answered.disconnect(self._on_facts_answered)

    def _mcpu_edit(self) -> QLineEdit | None:
        """The -mcpu combo's line edit (it is editable; None only before that is set)."""
        return self.mcpu_combo.lineEdit()

    def _mark(self, bad: QWidget | None) -> None:
        for field in (self._mcpu_edit(), self.mattr_edit, self.arch_edit):
            _set_invalid(field, field is bad)


def _set_invalid(widget: QWidget | None, invalid: bool) -> None:
    if widget is None:
        return
    if bool(widget.property("invalid")) == invalid:
        return
    widget.setProperty("invalid", invalid)
    widget.style().unpolish(widget)
    widget.style().polish(widget)
