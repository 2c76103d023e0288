"""The trials of one session as a Qt table model: NumPy columns from the store, configs decoded on
demand, display text, sort keys and filter matches per column."""

from __future__ import annotations

import json
import math

import numpy as np
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from tunelab.app import theme
from tunelab.app.views.trials.columns import (
    COLUMNS,
    CONFIG_COL,
    CV_COL,
    DEVICE_COL,
    ERROR_COL,
    FAILURE_COL,
    IQR_COL,
    NUMERIC,
    header_data,
)
from tunelab.app.widgets.buffers import TrialColumns, columns_of, concat_columns, n_rows
from tunelab.app.widgets.formatting import config_summary, first_line, fmt_ms
from tunelab.app.widgets.table_model import HeaderedTableModel
from tunelab.core.errors import TunelabError
from tunelab.core.faults import failure_class
from tunelab.core.records import TRIAL_STATUSES, Config, TrialRecord, is_auto_config
from tunelab.core.store import Store

LOCAL_DEVICE = "this machine"  # the Device column's text for a trial measured here
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
_INT_FIELDS = {0: "number", 1: "id", 2: "round"}
_FLOAT_FIELDS = {4: "latency_ms", 5: "mean_ms", 6: "std_ms", 7: "predicted_ms"}
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_FILTER_SEP = "\x1f"  # between the columns of a row's filter text: no typed filter contains it
_RED = QBrush(QColor(theme.ERROR))


def config_of(t: TrialRecord) -> dict:
    """The trial's config as a dict (decoded here when a store hands it over as JSON text)."""
    config = t.config
    if isinstance(config, (str, bytes)):
        config = json.loads(config)
    return config


def _any_device(columns: TrialColumns) -> bool:
    """Whether some row of `columns` was measured on an RPC server."""
    return any(d is not None for d in columns["device"].tolist())


_SCALARS = frozenset((int, str, bool, float))


class _SummaryCache:
    """`config_summary` for many configs: the `key=value` pieces are cached by (key, type, value)
    (lists and the like by their repr), so a row costs a few dict look-ups instead of formatting
    every value again."""

    def __init__(self) -> None:
        self._pieces: dict[tuple, str] = {}

    def __call__(self, config: dict) -> str:
        return self.many([config])[0]

    def many(self, configs) -> list[str]:
        pieces = self._pieces
        get = pieces.get
        out = []
        for config in configs:
            if "decisions" in config and is_auto_config(config):
                out.append(config_summary(config))
                continue
            parts = []
            for k, v in config.items():
                cls = v.__class__
                key = (k, cls, v) if cls in _SCALARS else (k, cls, repr(v))
                piece = get(key)
                if piece is None:
                    piece = pieces[key] = config_summary({k: v})
                parts.append(piece)
            out.append(" ".join(parts))
        return out


class TrialTableModel(HeaderedTableModel):
    """Trials as rows, in id order; `append_columns` adds newly stored ones at the end (no reset,
    selection kept).

    The rows are the columns `Store.trial_columns` reads (NumPy arrays, no record per trial), so a
    100,000-trial session loads in a few milliseconds. A config is decoded only when its row is
    shown (a block of rows at a time, through `Store.trial_configs`), or for every row the first time
    the table is sorted or filtered by config. Sorting and filtering happen on NumPy arrays
    (`sort_order`, `filter_mask`); display text is made only for the rows a view asks for (the config
    summary and the error's first line are cached per row).
    """

    columns = COLUMNS

    CONFIG_BLOCK = 64  # configs read at once for the rows around one asked for by its row number

    def __init__(self, parent=None, store: Store | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._session_id: int | None = None
        self._cols: TrialColumns = columns_of([])
        self._records: list[TrialRecord] = []  # rows 0..len-1 as records, when they were handed over
        self._configs: list[Config | None] = []  # decoded on demand
        self._remote = False  # some row was measured on an RPC server
        self._clear_caches()

    def _clear_caches(self) -> None:
        self._summaries: list[str | None] = [None] * self.rowCount()  # config_summary per row, on demand
        self._str_keys: dict[int, list[str]] = {}  # string sort keys per column
        self._ranks: dict[int, np.ndarray] = {}  # string columns' keys as ranks (argsort-able)
        self._filter_text: list[str] | None = None  # lowercase display text of every column, per row
        self._summary = _SummaryCache()
        self._first_lines: dict[str, str] = {}
        self._cv: np.ndarray | None = None  # cv() of every row, made once per change of the rows
        self._iqr: np.ndarray | None = None  # iqr() of every row, likewise

    def set_columns(
        self, columns: TrialColumns, session_id: int | None = None, records: list[TrialRecord] | None = None
    ) -> None:
        """Show these trials (`Store.trial_columns` of session `session_id`); `records`, when the
        caller has them, are the same trials as TrialRecords (their configs are then not read)."""
        self.beginResetModel()
        self._session_id = session_id
        self._cols = columns
        self._records = list(records) if records is not None else []
        self._configs = [config_of(t) for t in self._records]
        self._configs += [None] * (n_rows(columns) - len(self._records))
        self._remote = _any_device(columns)
        self._clear_caches()
        self.endResetModel()

    def set_trials(self, trials: list[TrialRecord]) -> None:
        self.set_columns(columns_of(trials), trials[0].session_id if trials else None, trials)

    def append_columns(self, columns: TrialColumns, records: list[TrialRecord] | None = None) -> None:
        n = n_rows(columns)
        if not n:
            return
        first = self.rowCount()
        self.beginInsertRows(QModelIndex(), first, first + n - 1)
        self._cols = concat_columns(self._cols, columns)
        if records is not None and len(self._records) == first:
            self._records.extend(records)
            self._configs.extend(config_of(t) for t in records)
        else:
            self._configs.extend([None] * n)
        self._summaries.extend([None] * n)
        self._remote = self._remote or _any_device(columns)
        self._extend_caches(first)
        self.endInsertRows()

    def append(self, trials: list[TrialRecord]) -> None:
        if trials:
            if self._session_id is None:
                self._session_id = trials[0].session_id
            self.append_columns(columns_of(trials), trials)

    def _extend_caches(self, first: int) -> None:
        last = self.rowCount()
        for col, keys in self._str_keys.items():
            keys.extend(self._string_keys(col, first, last))
            self._ranks.pop(col, None)
        if self._filter_text is not None:
            self._filter_text.extend(self._filter_texts(first, last))

    # ---- rows ----------------------------------------------------------------------------------
    def column(self, name: str) -> np.ndarray:
        """One field of every row (a `Store.trial_columns` name)."""
        return self._cols[name]

    def trial_id(self, row: int) -> int:
        return int(self._cols["id"][row])

    def trial(self, row: int) -> TrialRecord:
        """Row `row` as a full record (read from the store, with its samples, unless handed over)."""
        if row < len(self._records):
            return self._records[row]
        if self._store is not None:
            try:
                return self._store.trial(self.trial_id(row))
            except TunelabError:
                pass
        return self._record_of(row)

    def trials(self) -> list[TrialRecord]:
        """Every row as a record (one read of the session when they were not handed over)."""
        n = self.rowCount()
        if len(self._records) == n:
            return list(self._records)
        read: dict[int, TrialRecord] = {}
        if self._store is not None and self._session_id is not None:
            try:
                read = {t.id: t for t in self._store.trials(self._session_id)}
            except TunelabError:
                read = {}
        ids = self._cols["id"].tolist()
        return [
            self._records[r] if r < len(self._records) else read.get(ids[r]) or self._record_of(r)
            for r in range(n)
        ]

    def _record_of(self, row: int) -> TrialRecord:
        """A record made from the columns alone (fields they lack are None)."""
        c = self._cols

        def number(name: str) -> float | None:
            v = float(c[name][row])
            return None if math.isnan(v) else v

        task = int(c["task_id"][row])
        return TrialRecord(
            id=self.trial_id(row),
            session_id=self._session_id or 0,
            index=int(c["index"][row]),
            round=int(c["round"][row]),
            config=self.config(row),
            status=self.status(row),
            error=c["error"][row],
            latency_ms=number("latency_ms"),
            mean_ms=number("mean_ms"),
            std_ms=number("std_ms"),
            min_ms=None,
            max_ms=None,
            predicted_ms=number("predicted_ms"),
            build_s=None,
            run_s=None,
            started_at=float(c["started_at"][row]),
            finished_at=float(c["finished_at"][row]),
            trace_json=None,
            task_id=None if task < 0 else task,
            q1_ms=number("q1_ms"),
            q3_ms=number("q3_ms"),
            device=c["device"][row],
        )

    def row_of(self, trial_id: int) -> int | None:
        ids = self._cols["id"]  # ascending
        row = int(np.searchsorted(ids, trial_id))
        return row if row < len(ids) and ids[row] == trial_id else None

    def status(self, row: int) -> str:
        code = int(self._cols["status"][row])
        return TRIAL_STATUSES[code] if 0 <= code < len(TRIAL_STATUSES) else "?"

    def is_ok(self, row: int) -> bool:
        return bool(self._cols["ok"][row])

    def config(self, row: int) -> Config:
        config = self._configs[row]
        if config is None:
            block = self.CONFIG_BLOCK
            first = row - row % block
            self._load_configs(first, min(first + block, self.rowCount()))
            config = self._configs[row]
        return config if config is not None else {}

    def _load_configs(self, first: int, last: int) -> None:
        """Decode the configs of rows first..last-1 that are not decoded yet (one store read)."""
        self.load_configs(range(first, last))

    def has_config(self, row: int) -> bool:
        return self._configs[row] is not None

    def load_configs(self, rows) -> None:
        """Decode the configs of these rows that are not decoded yet, in one store read (the proxy
        asks for the rows it is about to show, in its sorted order)."""
        missing = [r for r in rows if self._configs[r] is None]
        if not missing or self._store is None or self._session_id is None:
            return
        ids = self._cols["id"]
        try:
            if len(missing) > len(ids) // 2:  # most of the session: one scan beats a list of ids
                read = self._store.trial_configs(self._session_id)
            else:
                read = self._store.trial_configs(self._session_id, ids[missing].tolist())
        except TunelabError:
            return
        for r in missing:
            self._configs[r] = read.get(int(ids[r]))

    def summary(self, row: int) -> str:
        text = self._summaries[row]
        if text is None:
            text = self._summaries[row] = self._summary(self.config(row))
        return text

    def summaries(self, first: int, last: int) -> list[str]:
        """The config summaries of rows first..last-1 (made, in one go, for those not made yet)."""
        cached = self._summaries[first:last]
        missing = [i for i, s in enumerate(cached) if s is None]
        if missing:
            self._load_configs(first + missing[0], first + missing[-1] + 1)
            made = self._summary.many(self._configs[first + i] or {} for i in missing)
            for i, text in zip(missing, made, strict=True):
                cached[i] = self._summaries[first + i] = text
        return [text or "" for text in cached]

    def error(self, row: int) -> str | None:
        return self._cols["error"][row]

    def error_line(self, row: int) -> str:
        error = self._cols["error"][row]
        if not error:
            return ""
        line = self._first_lines.get(error)
        if line is None:
            line = self._first_lines[error] = first_line(error)
        return line

    @property
    def has_remote(self) -> bool:
        """Whether some trial was measured on an RPC server (the Device column is then worth showing)."""
        return self._remote

    def device(self, row: int) -> str | None:
        """The RPC server ("HOST:PORT") that measured row `row`; None: this machine."""
        return self._cols["device"][row]

    def device_text(self, row: int) -> str:
        return self._cols["device"][row] or LOCAL_DEVICE

    def failure(self, row: int) -> str:
        """The failed trial's class ('SIGILL', 'build error', ...; tunelab.core.faults); '' when ok."""
        if self.is_ok(row):
            return ""
        return failure_class(self.status(row), self.error(row))

    def failures(self) -> list[str]:
        """The class of every failed row (for `describe_failures`)."""
        return [self.failure(r) for r in np.flatnonzero(~self._cols["ok"]).tolist()]

    def cv(self) -> np.ndarray:
        """Each row's coefficient of variation (std / mean of its samples), NaN where it has none."""
        if self._cv is None or len(self._cv) != self.rowCount():
            mean, std = self._cols["mean_ms"], self._cols["std_ms"]
            with np.errstate(invalid="ignore", divide="ignore"):
                self._cv = np.where(mean > 0, std / mean, np.nan)
        return self._cv

    def iqr(self) -> np.ndarray:
        """Each row's interquartile range (q3 - q1 of its samples, in ms), NaN where it has none."""
        if self._iqr is None or len(self._iqr) != self.rowCount():
            self._iqr = self._cols["q3_ms"] - self._cols["q1_ms"]
        return self._iqr

    def display_text(self, row: int, col: int) -> str:
        if col == CV_COL:
            value = float(self.cv()[row])
            return "—" if math.isnan(value) else f"{100 * value:.1f}"
        if col == IQR_COL:
            return fmt_ms(float(self.iqr()[row]))
        if col == FAILURE_COL:
            return self.failure(row)
        if col == DEVICE_COL:
            return self.device_text(row)
        if col == CONFIG_COL:
            return self.summary(row)
        if col == ERROR_COL:
            return self.error_line(row)
        if col in _FLOAT_FIELDS:
            return fmt_ms(float(self._cols[_FLOAT_FIELDS[col]][row]))
        if col == 3:
            return self.status(row)
        return str(int(self._cols[_INT_FIELDS[col]][row]))

    # ---- sorting and filtering -----------------------------------------------------------------
    def _string_keys(self, col: int, first: int, last: int) -> list[str]:
        if col == FAILURE_COL:
            return [self.failure(r) for r in range(first, last)]
        if col == DEVICE_COL:
            return [d or LOCAL_DEVICE for d in self._cols["device"][first:last].tolist()]
        if col == 3:
            return [self.status(r) for r in range(first, last)]
        if col == CONFIG_COL:
            return self.summaries(first, last)
        return [e or "" for e in self._cols["error"][first:last].tolist()]

    def sort_keys(self, col: int) -> np.ndarray:
        """Column `col`'s sort keys for every row: numbers (NaN for none) or string ranks."""
        if col in _INT_FIELDS:
            return self._cols[_INT_FIELDS[col]]
        if col in _FLOAT_FIELDS:
            return self._cols[_FLOAT_FIELDS[col]]  # NaN (none) sorts last
        if col == CV_COL:
            return self.cv()
        if col == IQR_COL:
            return self.iqr()
        ranks = self._ranks.get(col)
        if ranks is None:
            strings = self._str_keys.get(col)
            if strings is None:
                strings = self._str_keys[col] = self._string_keys(col, 0, self.rowCount())
            rank = {s: i for i, s in enumerate(sorted(set(strings)))}
            ranks = self._ranks[col] = np.fromiter(
                map(rank.__getitem__, strings), dtype=np.int64, count=len(strings)
            )
        return ranks

    def sort_order(self, col: int, order: Qt.SortOrder) -> np.ndarray:
        """Row numbers in the order of column `col` (stable; rows without a value last either way)."""
        if col < 0 or col >= len(COLUMNS):
            return np.arange(self.rowCount(), dtype=np.int64)
        keys = self.sort_keys(col)
        if order == Qt.SortOrder.AscendingOrder:
            return np.argsort(keys, kind="stable")
        if keys.dtype.kind == "f":
            return np.argsort(-keys, kind="stable")  # NaN stays NaN: last
        # Stable descending: sort the reversed keys ascending, then reverse (ties keep row order).
        n = len(keys)
        return (n - 1 - np.argsort(keys[::-1], kind="stable"))[::-1]

    def _filter_texts(self, first: int, last: int) -> list[str]:
        c = self._cols
        cols = [list(map(str, c[_INT_FIELDS[k]][first:last].tolist())) for k in (0, 1, 2)]
        cols.append([self.status(r) for r in range(first, last)])
        cols += [list(map(fmt_ms, c[_FLOAT_FIELDS[k]][first:last].tolist())) for k in (4, 5, 6, 7)]
        cols.append(self.summaries(first, last))
        cols.append([self.error_line(r) for r in range(first, last)])
        cols.append([self.display_text(r, CV_COL) for r in range(first, last)])
        cols.append(list(map(fmt_ms, self.iqr()[first:last].tolist())))
        cols.append([self.failure(r) for r in range(first, last)])
        cols.append(self._string_keys(DEVICE_COL, first, last))
        sep = _FILTER_SEP
        return [sep.join(parts).lower() for parts in zip(*cols, strict=True)]

    def filter_mask(self, text: str) -> np.ndarray | None:
        """Which rows show `text` (case-insensitive) in some column; None: every row (empty text)."""
        if not text:
            return None
        if self._filter_text is None:
            self._filter_text = self._filter_texts(0, self.rowCount())
        needle = text.lower()
        return np.fromiter((needle in s for s in self._filter_text), dtype=bool, count=len(self._filter_text))

    # ---- Qt model ------------------------------------------------------------------------------
    def n_rows(self) -> int:
        return len(self._cols["id"])

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        return header_data(section, orientation, role)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        return self.data_at(index.row(), index.column(), role)

    def data_at(self, row: int, col: int, role: int):
        if role == Qt.ItemDataRole.DisplayRole:
            return self.display_text(row, col)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _RIGHT if col in NUMERIC else None
        if role == Qt.ItemDataRole.ForegroundRole:
            return _RED if col in (3, ERROR_COL, FAILURE_COL) and not self.is_ok(row) else None
        if role == Qt.ItemDataRole.ToolTipRole:
            error = self.error(row)
            if col == ERROR_COL and error:
                return error[:2000]
            if col == CONFIG_COL:
                return json.dumps(self.config(row), indent=1)
            if col == DEVICE_COL:
                device = self.device(row)
                return f"Measured on the RPC server at {device}" if device else "Measured on this machine"
            return None
        if role == SORT_ROLE:
            if col in _INT_FIELDS:
                return int(self._cols[_INT_FIELDS[col]][row])
            if col in _FLOAT_FIELDS or col in (CV_COL, IQR_COL):
                v = float(self.sort_keys(col)[row])
                return float("inf") if math.isnan(v) else v
            return self.summary(row) if col == CONFIG_COL else self._string_keys(col, row, row + 1)[0]
        return None
