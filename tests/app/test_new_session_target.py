"""The New-session dialog's target options: this CPU as detected, an editable mcpu / mattr / threads
(or CUDA arch) that make the spec's target the JSON the CLI takes, refused as soon as a worker has resolved
it when this host cannot run it ("Checking the target…" until then), and proved by the real self-check (a
kernel built and run in a child) before Start is enabled."""

from __future__ import annotations

import json

import pytest
from dialog_ready import choose_random, is_settled, settled, start_accepted

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.dialogs.new_session_target import CHECKING_TARGET, DETECTING
from tunelab.app.dialogs.target_options import check_arch, isa_flags, parse_mattr
from tunelab.core.cli.parser import _parser
from tunelab.core.errors import TargetError
from tunelab.core.records import SessionSpec
from tunelab.core.target.host_cpu import X86_FLAGS, HostCPU, host_cpu, llvm_cpu_names
from tunelab.core.target.info import llvm_target, resolve_target

SELF_CHECK_TIMEOUT_MS = 180_000  # a child imports TVM and runs the kernel: seconds, more on a loaded machine
RESOLVE_TIMEOUT_MS = 30_000  # a worker resolves a typed target (LLVM, milliseconds) on a loaded machine


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    return settled(qtbot, dialog)


def _settled(dialog: NewSessionDialog) -> bool:
    """Nothing left to wait for: the target resolved, no typing debounce, no space being derived, no
    self-check to come."""
    return is_settled(dialog) and not dialog.target_options.is_checking()


def _resolved(qtbot, dialog: NewSessionDialog) -> NewSessionDialog:
    """``dialog`` once a worker has resolved the target its fields spell (and checked their features)."""
    qtbot.waitUntil(lambda: not dialog.is_resolving_target(), timeout=RESOLVE_TIMEOUT_MS)
    return dialog


def _as_the_cli_takes_it(target: str):
    """`tunelab tune gemm --target TARGET` parsed, put in a spec and resolved as the CLI does."""
    args = _parser().parse_args(["tune", "gemm", "--target", target])
    return resolve_target(SessionSpec(workload="gemm", shape={}, target=args.target).target)


def _another_runnable_mcpu() -> str:
    """An mcpu other than the detected one that this host can execute."""
    detected = llvm_target().json["mcpu"]
    for mcpu in ("x86-64-v2", "nehalem", "core2", "neoverse-n1", "cortex-a72", "generic"):
        if mcpu == detected:
            continue
        try:
            resolve_target(json.dumps({"kind": "llvm", "mcpu": mcpu}))
        except TargetError:
            continue
        return mcpu
    pytest.skip("no other mcpu this host can run")


def _a_feature_this_host_lacks() -> str:
    """An x86 instruction-set feature (LLVM's name) the OS does not report here: avx512f where it lacks it."""
    host = host_cpu()
    if host.arch != "x86_64":
        pytest.skip("the refusal is tested with x86 features")
    for feature in ("avx512f", "avx512fp16", "avx512vp2intersect", "amx-tile", "amx-fp16"):
        if X86_FLAGS[feature] not in host.flags:
            return feature
    pytest.skip("this host has every AVX-512 and AMX feature tried")


def test_a_dialog_opened_before_the_targets_are_known_says_so_then_shows_them(qtbot, settings, monkeypatch):
    from tunelab.app.workers import target_facts

    # As right after launch: no worker has said yet what this CPU is or what auto, llvm and cuda mean here.
    monkeypatch.setattr(target_facts, "_answers", {})
    monkeypatch.setattr(target_facts, "_asking", set())
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    options = dialog.target_options
    assert dialog.is_resolving_target() and not dialog.can_start()
    assert dialog.problem_error.text() == CHECKING_TARGET and not dialog.problem_error.isHidden()
    assert dialog.error_label.text() == CHECKING_TARGET
    assert dialog.target_label.text() == DETECTING
    assert not options.is_detected() and not options.mcpu_combo.isEnabled() and not options.is_edited()
    assert dialog.spec().target == dialog.target_combo.currentData()  # the fields stand for the detected

    settled(qtbot, dialog)
    assert dialog.can_start(), dialog.error_label.text()
    assert (
        dialog.problem_error.isHidden() and dialog.target_label.text() == resolve_target("auto").description
    )
    detected = llvm_target()
    assert options.mcpu_combo.isEnabled() and options.mcpu_combo.currentText() == detected.json["mcpu"]
    assert f"mcpu {detected.json['mcpu']}" in options.cpu_label.text()
    assert options.gpu_label.text() == resolve_target("cuda").description
    assert dialog.spec().target == dialog.target_combo.currentData()

    # LLVM's CPU names for this host come from a worker too, into the -mcpu list, the detected mcpu kept.
    combo = options.mcpu_combo
    qtbot.waitUntil(lambda: combo.count() > 0, timeout=RESOLVE_TIMEOUT_MS)
    listed = [combo.itemText(i) for i in range(combo.count())]
    assert listed == list(llvm_cpu_names(host_cpu().arch)) and detected.json["mcpu"] in listed
    assert combo.currentText() == detected.json["mcpu"] and not options.is_edited()


def test_untouched_fields_show_the_detected_cpu_and_keep_todays_target(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    options = dialog.target_options
    detected = llvm_target()
    host = host_cpu()
    assert options.mcpu_combo.currentText() == detected.json["mcpu"]
    assert options.threads_spin.value() == detected.json["num-cores"]
    assert options.mattr_edit.text() == ",".join(detected.json.get("mattr", ()))
    shown_cpu = options.cpu_label.text()
    assert host.model_name in shown_cpu and f"mcpu {detected.json['mcpu']}" in shown_cpu
    for flag in isa_flags(host):
        assert flag in shown_cpu
    assert settled(qtbot, dialog).can_start()
    for choice in ("auto", "llvm", "cuda"):
        dialog.target_combo.setCurrentIndex(dialog.target_combo.findData(choice))
        assert dialog.spec().target == choice
        assert not options.is_checking()  # the detected target is not self-checked again here
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    options.threads_spin.setValue(options.threads_spin.value() % options.threads_spin.maximum() + 1)
    options.reset_button.click()
    assert dialog.spec().target == "llvm"


def test_a_valid_mcpu_passes_the_self_check_and_is_the_spec_target_and_remembered(qtbot, settings):
    mcpu = _another_runnable_mcpu()
    dialog = _dialog(qtbot, settings)
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    options = dialog.target_options
    options.mcpu_combo.setCurrentText(mcpu)
    options.threads_spin.setValue(1)
    assert not dialog.can_start()  # the self-check is still to come
    qtbot.waitUntil(lambda: _settled(dialog), timeout=SELF_CHECK_TIMEOUT_MS)
    assert settled(qtbot, dialog).can_start(), dialog.error_label.text()
    assert f"passed: a kernel built for {mcpu} ran here" in options.status_label.text()
    assert dialog.problem_error.isHidden()

    target = json.loads(dialog.spec().target)
    assert target["kind"] == "llvm" and target["mcpu"] == mcpu and target["num-cores"] == 1
    resolved = _as_the_cli_takes_it(dialog.spec().target)
    assert resolved.json["mcpu"] == mcpu and resolved.json["num-cores"] == 1 and resolved.can_run
    assert dialog._target is not None and dialog._target.json == resolved.json

    choose_random(dialog)
    start_accepted(qtbot, dialog)
    again = _dialog(qtbot, settings)  # the fields come back, and their target with them
    assert again.target_combo.currentData() == "llvm"
    assert again.target_options.mcpu_combo.currentText() == mcpu
    assert again.target_options.threads_spin.value() == 1
    assert json.loads(again.spec().target) == target
    qtbot.waitUntil(lambda: _settled(again), timeout=SELF_CHECK_TIMEOUT_MS)
    assert settled(qtbot, again).can_start(), again.error_label.text()


def test_threads_alone_change_the_target_without_a_self_check(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    options = dialog.target_options
    options.threads_spin.setValue(1 if options.threads_spin.value() != 1 else options.threads_spin.maximum())
    if options.threads_spin.value() == llvm_target().json["num-cores"]:
        pytest.skip("this host allows one thread only")
    assert not options.is_checking()
    qtbot.waitUntil(dialog.can_start, timeout=RESOLVE_TIMEOUT_MS)
    target = json.loads(dialog.spec().target)
    assert target["num-cores"] == options.threads_spin.value()
    assert target["mcpu"] == llvm_target().json["mcpu"]
    assert _as_the_cli_takes_it(dialog.spec().target).json["num-cores"] == target["num-cores"]


def test_an_isa_this_cpu_lacks_is_refused_at_once_naming_the_feature(qtbot, settings):
    feature = _a_feature_this_host_lacks()
    dialog = _dialog(qtbot, settings)
    options = dialog.target_options
    assert settled(qtbot, dialog).can_start()
    options.mattr_edit.setText(f"+{feature}")
    assert not dialog.can_start()
    # once a worker has resolved it: no debounce, no self-check (the flags already say no)
    message = _resolved(qtbot, dialog).problem_error.text()
    assert not dialog.problem_error.isHidden() and feature in message and "lacks" in message
    assert "\n" not in message
    assert dialog.error_label.text() == message
    assert not dialog.can_start() and not options.is_checking()
    assert options.mattr_edit.property("invalid") is True
    assert options.mcpu_combo.lineEdit().property("invalid") is not True  # the mcpu is the detected one
    with pytest.raises(TargetError, match=feature):  # the CLI refuses the same target
        _as_the_cli_takes_it(dialog.spec().target)
    qtbot.wait(400)  # past every debounce: it stays refused
    assert not dialog.can_start() and feature in dialog.error_label.text()

    options.reset_button.click()
    assert options.mattr_edit.property("invalid") is not True
    qtbot.waitUntil(dialog.can_start, timeout=RESOLVE_TIMEOUT_MS)
    assert dialog.problem_error.isHidden()


def test_an_mcpu_llvm_does_not_know_or_this_cpu_lacks_is_refused(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    options = dialog.target_options
    options.mcpu_combo.setCurrentText("pentium-9000")
    assert "knows no CPU 'pentium-9000'" in _resolved(qtbot, dialog).problem_error.text()
    assert not dialog.can_start()
    assert options.mcpu_combo.lineEdit().property("invalid") is True
    options.mcpu_combo.setCurrentText("")
    assert "mcpu is empty" in dialog.problem_error.text() and not dialog.can_start()
    feature = _a_feature_this_host_lacks()
    if feature == "avx512f":
        options.mcpu_combo.setCurrentText("skylake-avx512")
        assert "avx512f" in _resolved(qtbot, dialog).problem_error.text()
        assert "lacks" in dialog.problem_error.text()
        assert not dialog.can_start() and not options.is_checking()


def test_mattr_spelling_is_checked_as_it_is_typed(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    options = dialog.target_options
    options.mattr_edit.setText("avx2")
    assert "is not +feature or -feature" in dialog.problem_error.text() and not dialog.can_start()
    assert options.mattr_edit.property("invalid") is True
    options.mattr_edit.setText("+avx2,+avx3000")
    # which features LLVM knows is a worker's answer: the spelling check names the unknown one once it is in
    assert "LLVM knows no feature 'avx3000'" in _resolved(qtbot, dialog).problem_error.text()
    assert not dialog.can_start()
    assert parse_mattr(" +avx2 , -fma ,", "x86_64") == ("+avx2", "-fma")
    options.mattr_edit.setText("")
    assert dialog.problem_error.isHidden()


def test_a_target_whose_kernel_dies_here_is_refused_with_the_self_checks_message(
    qtbot, settings, monkeypatch
):
    from tunelab.core.faults import PLANT_ENV

    # The self-check's child commits a real SIGILL (the project's fault plant): what a kernel for an
    # mcpu the flags wrongly allowed would do.
    monkeypatch.setenv(PLANT_ENV, "sigill@selfcheck")
    mcpu = _another_runnable_mcpu()
    dialog = _dialog(qtbot, settings)
    options = dialog.target_options
    options.mcpu_combo.setCurrentText(mcpu)
    assert "Self-check: building and running" in options.status_label.text()
    qtbot.waitUntil(lambda: _settled(dialog), timeout=SELF_CHECK_TIMEOUT_MS)
    message = dialog.problem_error.text()
    assert "SIGILL" in message and mcpu in message and "\n" not in message
    assert dialog.error_label.text() == message
    assert not dialog.can_start()
    assert options.mcpu_combo.lineEdit().property("invalid") is True
    options.reset_button.click()  # the detected target needs no check here: Start comes back
    qtbot.waitUntil(dialog.can_start, timeout=RESOLVE_TIMEOUT_MS)


def test_cuda_arch_is_checked_and_spells_a_target_for_another_gpu(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("cuda"))
    options = dialog.target_options
    assert options.kind == "cuda"
    assert options.arch_edit.isVisibleTo(options) and not options.mcpu_combo.isVisibleTo(options)
    assert options.arch_edit.text() == resolve_target("cuda").json["arch"]
    for bad in ("80", "sm80", "SM_80", "sm_8", "compute_80"):
        options.arch_edit.setText(bad)
        assert "is not a CUDA architecture" in dialog.problem_error.text(), bad
        assert not dialog.can_start() and options.arch_edit.property("invalid") is True
    other = "sm_80" if resolve_target("cuda").json["arch"] != "sm_80" else "sm_86"
    options.arch_edit.setText(other)
    assert _resolved(qtbot, dialog).target_options.arch_edit.property("invalid") is not True
    assert json.loads(dialog.spec().target) == {"kind": "cuda", "arch": other}
    resolved = _as_the_cli_takes_it(dialog.spec().target)
    assert resolved.kind == "cuda" and resolved.json["arch"] == other and other in resolved.description
    if not resolved.can_run:  # no GPU here: built, not measured, said with the arch typed
        assert "kernels can be built here but not measured" in dialog.problem_error.text()
        assert other in dialog.problem_error.text() and not dialog.can_start()
    options.arch_edit.setText(resolve_target("cuda").json["arch"])
    assert dialog.spec().target == "cuda"


def test_isa_flags_and_arch_spelling_on_recorded_hosts():
    zen2 = HostCPU(
        "x86_64", "AuthenticAMD", "AMD EPYC 7B12", frozenset("sse2 avx avx2 fma bmi2".split()), "znver2"
    )
    assert isa_flags(zen2) == ["avx", "avx2", "fma", "no AVX-512"]
    spr = HostCPU(
        "x86_64", "GenuineIntel", "Xeon", frozenset("avx avx2 fma avx512f avx512bw avx512_vnni".split()), "x"
    )
    assert isa_flags(spr) == ["avx", "avx2", "fma", "avx512_vnni", "avx512bw", "avx512f"]
    arm = HostCPU("aarch64", "ARM", "", frozenset("fp asimd asimddp sve".split()), "neoverse-n1")
    assert isa_flags(arm) == ["asimd", "asimddp", "sve"]
    for good in ("sm_80", "sm_90a", "sm_100a", "sm_120", " sm_75 "):
        assert check_arch(good) == good.strip()
    with pytest.raises(TargetError, match="sm_80 or sm_90"):
        check_arch("ampere")


def test_a_remembered_target_this_host_cannot_run_is_shown_refused(qtbot, settings):
    from tunelab.app.dialogs.new_session import SETTINGS_KEY

    feature = _a_feature_this_host_lacks()
    remembered = {
        "kind": "llvm",
        "mcpu": llvm_target().json["mcpu"],
        "num-cores": 1,
        "mattr": [f"+{feature}"],
    }
    settings.setValue(SETTINGS_KEY, json.dumps({"target": json.dumps(remembered), "target_choice": "llvm"}))
    dialog = _dialog(qtbot, settings)  # as a session started on another machine would leave it
    options = dialog.target_options
    assert dialog.target_combo.currentData() == "llvm"
    assert options.mattr_edit.text() == f"+{feature}" and options.threads_spin.value() == 1
    assert feature in dialog.problem_error.text() and not dialog.can_start()
    assert options.mattr_edit.property("invalid") is True
    options.reset_button.click()
    qtbot.waitUntil(dialog.can_start, timeout=RESOLVE_TIMEOUT_MS)
    assert dialog.spec().target == "llvm"


def test_an_auto_space_is_recommended_the_tuner_of_its_target_kind(qtbot, settings):
    """The auto space's recommendation follows the target: MetaSchedule's search on a CUDA GPU (its
    postprocessors check the device's limits that most uniform draws break), the CPU's choice on a CPU;
    the hint says which target it was chosen for."""
    from dialog_ready import SPACE_WAIT_MS

    from tunelab.core.search.tuners.registry import recommend_tuner

    dialog = _dialog(qtbot, settings)
    for name, value in {"M": 32, "N": 32, "K": 32}.items():
        dialog._shape_spins[name].setValue(value)
    dialog.space_kind_combo.setCurrentIndex(dialog.space_kind_combo.findData("auto"))
    for target, words in (("cuda", "on a CUDA GPU"), ("llvm", "on a CPU")):
        dialog.target_combo.setCurrentIndex(dialog.target_combo.findData(target))
        expected = recommend_tuner("auto", 1, target)
        qtbot.waitUntil(
            lambda: words in dialog.tuner_hint.text() and is_settled(dialog),  # noqa: B023
            timeout=SPACE_WAIT_MS,
        )
        size = dialog.space_editor.space_size()
        assert size and recommend_tuner("auto", size, target) == expected
        assert (
            dialog.tuner_hint.text()
            == f"Recommended for an auto space of {size:,} configs {words}: {expected}."
        )
        assert dialog.tuner_combo.currentData() == expected, target
        assert dialog.tuner_combo.currentText() == f"{expected} (recommended)"
    assert recommend_tuner("auto", 1, "cuda") == "evolutionary" != recommend_tuner("auto", 1, "llvm")
    # The trials do not move the recommendation (issue 28: one tuner on a CPU whatever the budget), nor a
    # tuner the person chose.
    chosen = dialog.tuner_combo.findData("random")
    dialog.tuner_combo.setCurrentIndex(chosen)
    dialog.tuner_combo.activated.emit(chosen)  # as a person's pick in the list emits it
    for trials in (256, 64):
        dialog.trials_spin.setValue(trials)
        assert dialog.tuner_hint.text() == f"Recommended for an auto space of {size:,} configs on a CPU: rl."
        assert dialog.tuner_combo.currentData() == "random"
        assert f" · random · {trials} trials in batches of " in dialog.summary.text()
        assert dialog.tuner_combo.itemText(dialog.tuner_combo.findData("rl")) == "rl (recommended)"
