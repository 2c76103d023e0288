"""The New-session dialog's "Where to measure": this machine, or the servers of a TVM RPC tracker.

Remote: the tracker's host and port, a key and how many candidates are in flight at once
(`tunelab tune --rpc HOST:PORT --rpc-key KEY --rpc-workers N`). The keys come from the tracker
itself: "Query tracker" asks it for its summary in a thread (the GUI never waits on the network)
and lists each key with its server count. A remote session can start only with a key chosen from
the answer of the tracker the fields name now, so a tracker that is down, or holds no server, is
one message in the dialog rather than a session that fails.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QRadioButton,
    QSpinBox,
    QWidget,
)

from tunelab.app.widgets.combo import combo_item
from tunelab.app.widgets.fields import int_spin, line_edit, push_button
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.records import MeasureOptions
from tunelab.core.usecases.targets import RemoteError, TrackerAddress, TrackerSummary

DEFAULT_PORT = 9190  # TVM's own default tracker port (python -m tvm.exec.rpc_tracker)
MAX_WORKERS = 256  # as tunelab.core.session.loop.check_spec allows
REMOTE_FIELDS = ("rpc_tracker", "rpc_key", "rpc_workers")  # the MeasureOptions fields this box sets
QUERY_TIMEOUT_S = 5.0


def _servers(n: int) -> str:
    return f"{n} server{'s' if n != 1 else ''}"


def _query(tracker: TrackerAddress, timeout_s: float) -> TrackerSummary:
    from tunelab.core.usecases.targets import tracker_summary  # its call imports TVM

    return tracker_summary(tracker, timeout_s=timeout_s)


class TrackerQuery(CallWorker):
    """The summary of one tracker in a thread (no store); `succeeded` carries the TrackerSummary,
    `failed` the RemoteError's sentence."""

    def __init__(self, tracker: TrackerAddress, timeout_s: float) -> None:
        super().__init__(None, _query, tracker, timeout_s)
        self.tracker = tracker


class RemoteOptions(QGroupBox):
    """Where the candidates are measured. `changed` whenever `error()` or the fields may differ."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Where to measure", parent)
        self.query_timeout_s = QUERY_TIMEOUT_S
        self._summary: TrackerSummary | None = None  # the answer for the address the fields show
        self._query_error: str | None = None  # why the last query of that address failed
        self._worker: TrackerQuery | None = None  # the query running now (one at a time)
        self._wanted_key = ""  # the key to choose once the tracker answers (a remembered one)

        self.local_radio = QRadioButton("This machine")
        self.local_radio.setToolTip("Build and measure every candidate here")
        self.remote_radio = QRadioButton("Remote (RPC tracker)")
        self.remote_radio.setToolTip(
            "Build here, measure on the servers registered with a TVM RPC tracker under a key "
            "(--rpc, --rpc-key)"
        )
        self.local_radio.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.local_radio)
        group.addButton(self.remote_radio)
        self.host_edit = line_edit("rpc_host", "", "tracker host, e.g. 127.0.0.1")
        self.port_spin = QSpinBox()
        self.port_spin.setObjectName("rpc_port")
        self.port_spin.setRange(1, 65535)
        self.port_spin.setValue(DEFAULT_PORT)
        self.port_spin.setToolTip("The tracker's port (TVM's default: 9190)")
        self.query_button = push_button(
            "Query tracker",
            "Ask the tracker which keys its servers registered under",
            self.query,
            "rpc_query",
        )
        self.key_combo = QComboBox()
        self.key_combo.setObjectName("rpc_key")
        self.key_combo.setToolTip("The key the servers registered under (--rpc-key)")
        self.key_combo.setPlaceholderText("query the tracker for its keys")
        self.workers_spin = int_spin(
            1,
            MAX_WORKERS,
            1,
            "Candidates sent to the servers at once (--rpc-workers); more than the key's servers "
            "only wait in the tracker's queue",
            " candidate",
        )
        self.workers_spin.setObjectName("rpc_workers")
        self.status = QLabel()
        self.status.setObjectName("rpc_status")
        self.status.setProperty("role", "hint")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        choice = QHBoxLayout()
        choice.setContentsMargins(0, 0, 0, 0)
        choice.addWidget(self.local_radio)
        choice.addWidget(self.remote_radio)
        choice.addStretch(1)
        address = QHBoxLayout()
        address.setContentsMargins(0, 0, 0, 0)
        address.addWidget(self.host_edit, 1)
        address.addWidget(QLabel("port"))
        address.addWidget(self.port_spin)
        key_row = QHBoxLayout()
        key_row.setContentsMargins(0, 0, 0, 0)
        key_row.addWidget(self.key_combo, 1)
        key_row.addWidget(self.query_button)
        form = QFormLayout(self)
        form.addRow(choice)
        form.addRow("Tracker", address)
        form.addRow("Key", key_row)
        form.addRow("In flight at once", self.workers_spin)
        form.addRow(self.status)

        self.remote_radio.toggled.connect(self._on_where_changed)
        self.host_edit.textEdited.connect(self._on_address_edited)
        self.host_edit.editingFinished.connect(self._on_host_finished)
        self.port_spin.valueChanged.connect(self._on_address_edited)
        self.key_combo.currentIndexChanged.connect(self._on_key_changed)
        self.workers_spin.valueChanged.connect(self._on_workers_changed)
        self._on_where_changed()

    # ---- what the box holds --------------------------------------------------------------------
    @property
    def is_remote(self) -> bool:
        return self.remote_radio.isChecked()

    def address_text(self) -> str:
        """'HOST:PORT' as the fields spell it ('' without a host)."""
        host = self.host_edit.text().strip()
        return f"{host}:{self.port_spin.value()}" if host else ""

    def key(self) -> str:
        return str(self.key_combo.currentData() or "")

    def options(self) -> dict[str, Any]:
        """The MeasureOptions fields of REMOTE_FIELDS; this machine: their defaults."""
        if not self.is_remote:
            defaults = MeasureOptions()
            return {name: getattr(defaults, name) for name in REMOTE_FIELDS}
        return {
            "rpc_tracker": self.address_text(),
            "rpc_key": self.key(),
            "rpc_workers": self.workers_spin.value(),
        }

    def is_querying(self) -> bool:
        return self._worker is not None

    def error(self) -> str | None:
        """Why a remote session cannot start as the box stands ('' while the tracker is asked; None: it can)."""
        if not self.is_remote:
            return None
        host = self.host_edit.text().strip()
        if not host:
            return "Remote measurement needs the RPC tracker's host (and port)."
        try:
            TrackerAddress.parse(self.address_text())
        except RemoteError as exc:
            return str(exc)
        if self.is_querying():
            return ""
        if self._query_error is not None:
            return self._query_error
        if self._summary is None:
            return (
                f"Query the tracker at {self.address_text()} and choose the key of the servers to measure on."
            )
        if not any(self._summary.servers_for(k) for k in self._summary.keys):
            return (
                f"The tracker at {self._summary.tracker} holds no server; start one with "
                f"`python -m tvm.exec.rpc_server --tracker {self._summary.tracker} --key KEY`."
            )
        if not self.key():
            return f"Choose the key of the servers to measure on (the tracker at {self._summary.tracker} holds them)."
        return None

    def describe(self) -> str:
        """The summary line's words for where it measures."""
        if not self.is_remote:
            return "measured here"
        key = self.key() or "no key"
        return f"measured through {self.address_text() or 'no tracker'} ({key}, {self.workers_spin.value()} at once)"

    def set_options(self, data: dict[str, Any]) -> None:
        """Show remembered choices ({"remote", "host", "port", "key", "workers"}); a remembered remote
        choice asks its tracker again at once (its servers may have changed since)."""
        host, port = data.get("host"), data.get("port")
        if isinstance(host, str):
            self.host_edit.setText(host)
        if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            self.port_spin.blockSignals(True)
            self.port_spin.setValue(port)
            self.port_spin.blockSignals(False)
        workers = data.get("workers")
        if isinstance(workers, int) and not isinstance(workers, bool):
            self.workers_spin.setValue(max(1, min(MAX_WORKERS, workers)))
        key = data.get("key")
        self._wanted_key = key if isinstance(key, str) else ""
        self._forget_answer()
        if data.get("remote") is True:
            self.remote_radio.setChecked(True)
            if self.address_text():
                self.query()
        self.changed.emit()

    def remembered(self) -> dict[str, Any]:
        """What `set_options` takes: kept even while this machine is chosen."""
        return {
            "remote": self.is_remote,
            "host": self.host_edit.text().strip(),
            "port": self.port_spin.value(),
            "key": self.key() or self._wanted_key,
            "workers": self.workers_spin.value(),
        }

    # ---- the query -----------------------------------------------------------------------------
    def query(self) -> TrackerQuery | None:
        """Ask the tracker the fields name for its keys, in a thread; None when there is nothing to ask."""
        if self._worker is not None:
            return None  # one at a time: the button is disabled meanwhile
        try:
            tracker = TrackerAddress.parse(self.address_text())
        except RemoteError:  # no host, or a bad one: error() says so
            self.changed.emit()
            return None
        if self.key():
            self._wanted_key = self.key()
        self._forget_answer()
        worker = TrackerQuery(tracker, self.query_timeout_s)
        worker.succeeded.connect(self._on_answer)
        worker.failed.connect(self._on_query_failed)
        self._worker = worker
        self._update_widgets()
        self._set_status(f"Asking the tracker at {tracker} for its servers…")
        # Parentless and kept alive: the dialog may close while the tracker is asked.
        keep_alive(worker).start()
        self.changed.emit()
        return worker

    def _current(self, worker: TrackerQuery | None) -> bool:
        """Whether the answer of `worker` is about the address the fields show now."""
        return worker is not None and str(worker.tracker) == self.address_text()

    def _on_answer(self, summary: TrackerSummary) -> None:
        worker, self._worker = self._worker, None
        if self._current(worker):
            self._summary = summary
            self._fill_keys(summary)
        self._update_widgets()
        self.changed.emit()

    def _on_query_failed(self, message: str, _details: str) -> None:
        worker, self._worker = self._worker, None
        if self._current(worker):
            self._query_error = message
            self._set_status("")
        self._update_widgets()
        self.changed.emit()

    def _fill_keys(self, summary: TrackerSummary) -> None:
        self.key_combo.blockSignals(True)
        self.key_combo.clear()
        for key in summary.keys:
            n = len(summary.servers_for(key))
            self.key_combo.addItem(f"{key} ({_servers(n)})", key)
            if not n:
                item = combo_item(self.key_combo, self.key_combo.count() - 1)
                item.setEnabled(False)
                item.setToolTip("No server is registered under this key now")
        usable = [k for k in summary.keys if summary.servers_for(k)]
        choice = self._wanted_key if self._wanted_key in usable else usable[0] if len(usable) == 1 else None
        self.key_combo.setCurrentIndex(self.key_combo.findData(choice) if choice else -1)
        self.key_combo.blockSignals(False)
        n_keys, n_servers = len(usable), len(summary.servers)
        self._set_status(
            f"The tracker at {summary.tracker} holds {_servers(n_servers)} under "
            f"{n_keys} key{'s' if n_keys != 1 else ''}."
            if n_servers
            else ""
        )
        self._show_servers()

    def _show_servers(self) -> None:
        """The chosen key's servers as the key box's tooltip."""
        key = self.key()
        servers = self._summary.servers_for(key) if self._summary is not None and key else ()
        self.key_combo.setToolTip(
            f"{key}: " + ", ".join(s.address for s in servers)
            if servers
            else "The key the servers registered under (--rpc-key)"
        )

    def _forget_answer(self) -> None:
        """The fields name another tracker (or it is asked again): the last answer is not about it."""
        self._summary, self._query_error = None, None
        self.key_combo.blockSignals(True)
        self.key_combo.clear()
        self.key_combo.blockSignals(False)
        self._set_status("")
        self._show_servers()

    # ---- slots ---------------------------------------------------------------------------------
    def _on_where_changed(self) -> None:
        self._update_widgets()
        self.changed.emit()

    def _on_address_edited(self) -> None:
        if self.key():
            self._wanted_key = self.key()
        self._forget_answer()
        self._update_widgets()
        self.changed.emit()

    def _on_host_finished(self) -> None:
        """A host typed as HOST:PORT (as --rpc takes it) is split into the two fields."""
        host, sep, port = self.host_edit.text().strip().rpartition(":")
        if sep and host and ":" not in host and port.isdigit() and 0 < int(port) < 65536:
            self.port_spin.blockSignals(True)
            self.port_spin.setValue(int(port))
            self.port_spin.blockSignals(False)
            self.host_edit.setText(host)
            self._on_address_edited()

    def _on_key_changed(self) -> None:
        if self.key():
            self._wanted_key = self.key()
        self._show_servers()
        self.changed.emit()

    def _on_workers_changed(self, n: int) -> None:
        self.workers_spin.setSuffix(" candidate" if n == 1 else " candidates")
        self.changed.emit()

    def _update_widgets(self) -> None:
        remote = self.is_remote
        for w in (self.host_edit, self.port_spin, self.key_combo, self.workers_spin):
            w.setEnabled(remote)
        self.query_button.setEnabled(remote and self._worker is None)
        self._set_status(self.status.text())

    def _set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(self.is_remote and bool(text))
