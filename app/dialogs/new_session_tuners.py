"""The New-session dialog's tuner: the strategies that load here and drive the chosen space kind, the one
recommended for the space's kind, size, target and trials, and the xgb tuner's cost model."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel

from tunelab.app.dialogs.new_session_target import TargetChecks
from tunelab.app.widgets.combo import combo_item
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.errors import TunelabError

# When the recommended strategy cannot be loaded here, the next best that can.
FALLBACK_TUNERS = ("xgb", "genetic", "random", "grid")


# Tuner name -> None when it loads here, else why not; None until a worker has loaded every tuner once
# in this process (loading them imports Optuna, XGBoost and MetaSchedule: seconds, never on the GUI thread).
_loaded: dict[str, str | None] | None = None


def tuner_availability() -> dict[str, str | None]:
    """What is known of which tuners load here: empty until a worker has loaded them (every tuner is
    offered until then; Start's check refuses one that cannot load, saying why)."""
    return dict(_loaded or {})


def load_tuners() -> dict[str, str | None]:
    """Load every registered tuner: name -> None when it loads here, else why not. In a worker."""
    from tunelab.core.usecases.listing import get_tuner_class, tuner_names

    out: dict[str, str | None] = {}
    for name in tuner_names():
        try:
            get_tuner_class(name)
            out[name] = None
        except TunelabError as exc:
            out[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken optional strategy must not break the dialog
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


class TunerChoice(TargetChecks):
    """The tuner part of the New-session dialog (NewSessionDialog builds the space kind's combo)."""

    space_kind_combo: QComboBox
    _tuner_chosen: bool

    def _tuner_box(self) -> QGroupBox:
        """The Tuner group: the strategy (each saying what it is, or why it cannot load here) and the
        xgb tuner's cost model."""
        tuner_box = QGroupBox("Tuner")
        tuner_form = QFormLayout(tuner_box)
        self.tuner_combo = QComboBox()
        from tunelab.core.usecases.listing import tuner_description, tuner_names

        self._tuner_availability = tuner_availability()
        self._last_size: int | None = None
        for name in tuner_names():
            self.tuner_combo.addItem(name, name)
            item = combo_item(self.tuner_combo, self.tuner_combo.count() - 1)
            why = self._tuner_availability.get(name)
            item.setToolTip(why or tuner_description(name))  # the registry's one line, or why it cannot load
            if why:
                item.setEnabled(False)
        if _loaded is None:
            worker = CallWorker(None, load_tuners)
            worker.succeeded.connect(self._on_tuners_loaded)
            keep_alive(worker).start()
        self.tuner_combo.activated.connect(self._on_tuner_chosen)
        self.space_kind_combo.currentIndexChanged.connect(self._offer_tuners)
        self.tuner_hint = QLabel()
        self.tuner_hint.setProperty("role", "hint")
        self.tuner_hint.setWordWrap(True)
        tuner_form.addRow("Strategy", self.tuner_combo)
        tuner_form.addRow("", self.tuner_hint)
        # The model that ranks the xgb tuner's candidates (the registry of tunelab.core.search.models);
        # the other tuners use none.
        from tunelab.core.usecases.listing import COST_MODEL_WORDS, cost_model_names

        self.cost_model_combo = QComboBox()
        self.cost_model_combo.setObjectName("cost_model_combo")
        for name in cost_model_names():
            self.cost_model_combo.addItem(name, name)
            item = combo_item(self.cost_model_combo, self.cost_model_combo.count() - 1)
            item.setToolTip(COST_MODEL_WORDS.get(name, ""))
        self.cost_model_combo.setToolTip("The cost model that ranks candidates (the xgb tuner's)")
        self.tuner_combo.currentIndexChanged.connect(self._show_cost_model)
        tuner_form.addRow("Cost model", self.cost_model_combo)
        self._show_cost_model()
        return tuner_box

    def tuners_known(self) -> bool:
        """Whether the dialog knows which tuners load here (a worker loads them once per process)."""
        return _loaded is not None

    def _on_tuners_loaded(self, availability: dict[str, str | None]) -> None:
        """Grey the tuners that cannot load here (saying why), and recommend again among the rest."""
        global _loaded
        _loaded = dict(availability)
        self._tuner_availability = dict(availability)
        self._offer_tuners()
        self._recommend_again()

    def _recommend_again(self) -> None:
        """Recommend again for the space last sized (the tuners that load here changed)."""
        if self._last_size is not None:
            self._recommend(self._last_size)

    def _recommend(self, size: int) -> None:
        from tunelab.core.usecases.listing import ON_TARGET, recommend_tuner

        self._last_size = size
        kind = self.space_kind_combo.currentData()
        target_kind = self._target.kind if self._target is not None else "llvm"
        recommended = recommend_tuner(kind, size, target_kind)
        available = self._tuner_availability
        usable = (
            recommended
            if available.get(recommended) is None
            else next((t for t in FALLBACK_TUNERS if available.get(t) is None), recommended)
        )
        for i in range(self.tuner_combo.count()):
            name = self.tuner_combo.itemData(i)
            self.tuner_combo.setItemText(i, f"{name} (recommended)" if name == usable else name)
        article = "an" if kind == "auto" else "a"
        # an auto space's recommendation depends on the target's kind (registry.recommend_tuner)
        on = f" {ON_TARGET[target_kind]}" if kind == "auto" and target_kind in ON_TARGET else ""
        if usable == recommended:
            self.tuner_hint.setText(
                f"Recommended for {article} {kind} space of {size:,} configs{on}: {recommended}."
            )
        else:
            self.tuner_hint.setText(
                f"{recommended} suits {article} {kind} space of {size:,} configs but is not available "
                f"here ({available[recommended]}); {usable} is the next best."
            )
        if not self._tuner_chosen:
            self.tuner_combo.setCurrentIndex(self.tuner_combo.findData(usable))

    def _offer_tuners(self) -> None:
        """Offer the tuners that drive the chosen space kind; the others are greyed, saying why (the
        Optuna samplers search a template's knobs, an auto space has none). A chosen
        tuner the new kind cannot drive gives way to the first one that can."""
        from tunelab.core.usecases.listing import tuner_description, tuner_space_kinds

        kind = self.space_kind_combo.currentData()
        for i in range(self.tuner_combo.count()):
            name = self.tuner_combo.itemData(i)
            why = self._tuner_availability.get(name)
            fits = kind in tuner_space_kinds(name)
            item = combo_item(self.tuner_combo, i)
            item.setEnabled(why is None and fits)
            if why is not None:
                item.setToolTip(why)
            else:
                item.setToolTip(
                    tuner_description(name)
                    if fits
                    else f"{name} searches a template's knobs; an {kind} space has none"
                )
        if not combo_item(self.tuner_combo, self.tuner_combo.currentIndex()).isEnabled():
            first = next(
                i for i in range(self.tuner_combo.count()) if combo_item(self.tuner_combo, i).isEnabled()
            )
            self.tuner_combo.setCurrentIndex(first)

    def _on_tuner_chosen(self) -> None:
        self._tuner_chosen = True

    def _show_cost_model(self) -> None:
        """The cost-model choice is the xgb tuner's: offered while it is the strategy."""
        self.cost_model_combo.setEnabled(self.tuner_combo.currentData() == "xgb")

    def _tuner_options(self) -> dict[str, Any]:
        model = self.cost_model_combo.currentData()
        if self.tuner_combo.currentData() != "xgb" or model in (None, "xgb"):
            return {}  # the xgb tuner's own default model, or a tuner without one
        return {"model": model}
