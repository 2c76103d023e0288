"""The New-session dialog's target: the one it shows resolved as the CLI would (in a worker: "Checking the
target…" until it is known), and "Server's CPU" asked of a server under the chosen key, in a thread."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QComboBox, QDialog, QLabel

from tunelab.app.dialogs.remote_options import RemoteOptions
from tunelab.app.dialogs.target_options import TargetOptions
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.app.workers.target_facts import known_host, known_target
from tunelab.core.errors import TargetError, TunelabError
from tunelab.core.usecases.targets import REMOTE_TARGET, HostCPU, TargetInfo

CHECKING_TARGET = "Checking the target…"  # what the dialog says while a worker resolves it
DETECTING = "detecting this machine's target…"  # the Detected row, until a worker has resolved auto


def server_target(address: str, key: str) -> TargetInfo:
    """The CPU target of a server under ``key`` at the tracker ``address``, as ``--target remote`` takes
    it (tunelab.core.measure.remote.remote_target); in a thread: it talks to the tracker and a server."""
    from tunelab.core.usecases.targets import TrackerAddress, remote_target

    return remote_target(TrackerAddress.parse(address), key, timeout_s=30.0)


class TargetChecks(QDialog):
    """The target part of the New-session dialog (NewSessionDialog builds what is declared here)."""

    target_combo: QComboBox
    target_label: QLabel
    target_options: TargetOptions
    remote_options: RemoteOptions
    _problem_timer: QTimer  # the form's typing debounce: the space follows the target when it fires
    _target: TargetInfo | None
    _target_error: str | None  # why the target the dialog shows cannot be used here
    # "Server's CPU": the targets servers reported, by (tracker address, key); the pair being asked now
    # (one question at a time) and the last pair that could not answer, with its message.
    _server_targets: dict[tuple[str, str], TargetInfo]
    _server_query: CallWorker | None
    _server_failure: tuple[tuple[str, str], str] | None
    # Waiting for a worker (tunelab.app.workers.target_facts): the target the dialog shows (or what the
    # target options need) is not resolved yet; an edited mattr's features are not all checked yet; the
    # Detected row's target (auto) is not known yet.
    _target_pending: bool
    _features_pending: bool
    _detected_pending: bool

    def _on_problem_changed(self) -> None:
        """Check the problem again (the form's; a server's answer changes the target)."""
        raise NotImplementedError

    def _update_state(self) -> None:
        """Show what stops Start, if anything (the form's)."""
        raise NotImplementedError

    def _check_target(self) -> None:
        """The target the dialog shows, resolved as the CLI would (by a worker: pending until it has), and
        its self-check asked for when edited."""
        options = self.target_options
        self._target, self._target_error = None, None
        self._target_pending = self._features_pending = False
        choice = self.target_combo.currentData()
        options.setVisible(choice != REMOTE_TARGET)  # a server's CPU is what the server says, not fields
        if choice == REMOTE_TARGET:
            self._check_server_target()
            options.want_check(None)
            return
        # Measured on an RPC tracker's servers, kernels are built here for whatever the fields name (another
        # mtriple cross-compiled); the session checks them on a server before it stores anything.
        remote = self.remote_options.is_remote
        try:
            chosen = self._resolved(choice) if self._detected_known() else None
            if chosen is None:
                options.want_check(None)
                return
            options.show_kind(chosen.kind)
            self._features_pending = not options.check_spelling()
        except TunelabError as exc:
            self._target_error = str(exc)
        else:
            try:
                self._target = self._resolved(options.target_text(choice), remote)
            except TunelabError as exc:
                self._target_error = str(exc)
                options.mark_refused()
        if self._target is not None and not self._target.can_run and not remote:
            self._target_error = f"{self._target.description}: kernels can be built here but not measured"
        wanted = self._target_error is None and options.is_edited() and not remote
        options.want_check(self._target if wanted else None)

    def _resolved(self, text: str, elsewhere: bool = False) -> TargetInfo | None:
        """``text`` resolved as the CLI would, once a worker has; None (pending, asked) until then.
        TargetError with the worker's message when it is refused."""
        answer = known_target(text, elsewhere)
        if answer is None:
            self._target_pending = True
            return None
        if isinstance(answer, str):
            raise TargetError(answer)
        return answer

    def _detected_known(self) -> bool:
        """Hand the target options what was detected here once workers have said it (this CPU, the llvm
        and cuda targets); False (pending, asked) while they have not. TargetError when one failed."""
        options = self.target_options
        if options.is_detected():
            return True
        host, cpu, gpu = known_host(), known_target("llvm"), known_target("cuda")
        for answer in (host, cpu, gpu):
            if isinstance(answer, str):
                raise TargetError(answer)
        if not (isinstance(host, HostCPU) and isinstance(cpu, TargetInfo) and isinstance(gpu, TargetInfo)):
            self._target_pending = True
            return False
        options.set_detected(host, cpu, gpu)
        return True

    def is_resolving_target(self) -> bool:
        """Whether the dialog waits for a worker to resolve its target, check an mattr's features, or
        say what auto means here (the Detected row)."""
        return self._target_pending or self._features_pending or self._detected_pending

    def _on_target_facts(self) -> None:
        """A worker's answers are in: check again what waited for them. The space is derived again only
        when the target itself changed (as for Where to measure), and not while typing pauses."""
        if not (self._target_pending or self._features_pending):
            self._show_detected()
            return
        self._recheck_target()

    def _target_state(self) -> tuple[Any, str | None, bool]:
        """What the space is derived from: the target's JSON, why there is none, whether it is being resolved."""
        return (self._target.json if self._target else None, self._target_error, self._target_pending)

    def _recheck_target(self) -> None:
        """Check the target again. The space is derived again (dropping its edits) only when the target
        itself changed, and not while typing pauses (the debounce derives it when it fires)."""
        before = self._target_state()
        self._check_target()
        if self._target_state() != before and not self._problem_timer.isActive():
            self._on_problem_changed()
        else:
            self._show_detected()
            self._update_state()

    def _target_text(self) -> str:
        choice = self.target_combo.currentData()
        return REMOTE_TARGET if choice == REMOTE_TARGET else self.target_options.target_text(choice)

    # ---- "Server's CPU": the target a server under the chosen key reports --------------------------
    def _server_pair(self) -> tuple[str, str] | None:
        box = self.remote_options
        if not box.is_remote or not box.address_text() or not box.key():
            return None
        return box.address_text(), box.key()

    def _check_server_target(self) -> None:
        """Set the target from the server's answer, or say what it needs; ask a server in a thread when
        the tracker and key are new (Start waits for the answer)."""
        box = self.remote_options
        pair = self._server_pair()
        if pair is None:
            self._target_error = (
                "Server's CPU: choose Remote (RPC tracker) under Where to measure, and a key"
                if not box.is_remote
                else box.error() or "Server's CPU: query the tracker and choose a key"
            )
            return
        if pair in self._server_targets:
            self._target = self._server_targets[pair]
        elif self._server_failure is not None and self._server_failure[0] == pair:
            self._target_error = self._server_failure[1]
        elif self._server_query is None:
            worker = CallWorker(None, server_target, *pair)
            worker.succeeded.connect(lambda target, p=pair: self._on_server_answer(p, target))
            worker.failed.connect(lambda message, _d, p=pair: self._on_server_failed(p, message))
            self._server_query = worker
            keep_alive(worker).start()

    def is_asking_server(self) -> bool:
        return self._server_query is not None

    def _on_server_answer(self, pair: tuple[str, str], target: TargetInfo) -> None:
        self._server_query = None
        self._server_targets[pair] = target
        self._on_problem_changed()

    def _on_server_failed(self, pair: tuple[str, str], message: str) -> None:
        self._server_query = None
        self._server_failure = (pair, message.splitlines()[0] if message else "the server did not answer")
        self._on_problem_changed()

    def _on_remote_changed(self) -> None:
        """Where to measure changed: a server's CPU follows the key, and edited fields are checked for
        there."""
        self._recheck_target()

    def _show_detected(self) -> None:
        """The Detected row: this host's target, or what the server under the key says of its CPU."""
        self._detected_pending = False
        if self.target_combo.currentData() != REMOTE_TARGET:
            auto = known_target("auto")
            self._detected_pending = auto is None
            if not isinstance(auto, TargetInfo):  # asked of a worker, or why it cannot be resolved here
                self.target_label.setText(auto or DETECTING)
                self.target_label.setToolTip("")
                return
            self.target_label.setText(auto.description)
            self.target_label.setToolTip(
                auto.note or "LLVM's host CPU name; this host can execute its instruction sets"
            )
            return
        pair = self._server_pair()
        if self._target is not None:
            self.target_label.setText(self._target.description)
            self.target_label.setToolTip(self._target.note or "")
        elif self._server_query is not None and pair is not None:
            self.target_label.setText(f"asking a server under key {pair[1]} at {pair[0]} for its CPU…")
            self.target_label.setToolTip("")
        else:
            self.target_label.setText("a server's CPU, once a tracker and key are chosen")
            self.target_label.setToolTip("")
