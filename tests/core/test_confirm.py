"""tunelab.core.trust.confirm: a finished session re-measures its winners in fresh processes, and exports state the
confirmed figure. Real TVM sessions, real worker processes, a real store."""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import replace

import pytest
from confirming import assert_stored_as_it_was, run_confirmed
from neighbours import start_neighbours, stop_neighbours
from specs import small_spec

from tunelab.core.errors import TunelabError
from tunelab.core.export.files import export_trial
from tunelab.core.export.pick import export_pick, untrusted_because
from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.confirm import _measure_until_settled, confirm_session
from tunelab.core.trust.confirmed import (
    CONFIRM_PURPOSE,
    Confirmation,
    clearly_faster,
    confirmations,
    disturbance_of,
)
from tunelab.core.trust.remeasure.api import validate_session
from tunelab.core.trust.remeasure.pool import worker_processes
from tunelab.core.trust.remeasure.report import ValidationReport
from tunelab.core.trust.remeasure.verdict import DISTURBED_FRACTION
from tunelab.core.usecases.tuning import confirm_when_finished

pytestmark = pytest.mark.slow

CONFIRMING = MeasureOptions(
    number=1, repeat=3, min_repeat_ms=1, cooldown_s=0, confirm_runs=2, confirm_top=2, confirm_max_s=0
)


def test_finished_session_is_confirmed_and_exports_the_confirmed_figure(tmp_path):
    store = Store(tmp_path / "t.sqlite")
    # two shapes (tasks): each gets its own confirmation
    spec = small_spec(
        shape={"M": 64, "N": 64, "K": 64},
        shapes=({"M": 32, "N": 64, "K": 64},),
        trials=8,
        batch=4,
        measure=CONFIRMING,
    )
    session, stages, trials = run_confirmed(store, spec)
    sid = session.session_id
    assert len(session.confirmations) == 2 and len(stages) == 2 and "2 fresh processes" in stages[0]
    stored = store.validations(sid)
    assert len(stored) == 2
    for report in session.confirmations:
        assert report.source.purpose == CONFIRM_PURPOSE and report.runs == 2
        assert len(report.schedules) == 2
        assert_stored_as_it_was(store, report)
    # the two confirmed trials of each task are its two fastest by the session's figures
    tasks = store.tasks(sid)
    confirmed = confirmations(store, sid)
    assert len(confirmed) == 4
    for task in tasks:
        ok = sorted((t for t in trials if t.ok and t.task_id == task.id), key=lambda t: (t.latency_ms, t.id))
        assert {t.id for t in ok[:2]} <= set(confirmed)
    for trial_id, c in confirmed.items():
        assert c.runs == 2 and len(c.samples_ms) >= 2 * 3 and c.reference_ms > 0
        assert c.median_ms == pytest.approx(statistics.median(c.samples_ms))
        assert c.session_ms == pytest.approx(store.trial(trial_id).latency_ms)

    # a later validation judges confirmed trials against their confirmed figures (or the session's, if asked)
    report = validate_session(store, sid, top_k=2, runs=1, record=False)
    for entry in report.schedules:
        assert entry.recorded_kind == "confirmed"
        assert entry.recorded_ms == pytest.approx(confirmed[entry.trial_id].median_ms)
        assert entry.session_ms == pytest.approx(store.trial(entry.trial_id).latency_ms)
        assert entry.machine_drift == pytest.approx(entry.reference_ms / entry.recorded_reference_ms)
        # each worker also timed the kernel with every buffer at the same page offset (tunelab.core.measure.placement)
        assert set(entry.layout_ms) == {"staggered", "aligned", "plain"} and entry.placement_ratio > 0
        assert entry.layout_ms["staggered"] == pytest.approx(entry.remeasured_ms, rel=0.5)
    report = validate_session(store, sid, top_k=1, runs=1, record=False, against="session")
    assert report.schedules[0].recorded_kind == "session" and report.schedules[0].session_ms is None
    with pytest.raises(TunelabError, match="against"):
        validate_session(store, sid, against="luck")

    # the export names the fastest confirmed trial of the primary shape and states its confirmed figure
    written = export_trial(store, sid, out_dir=tmp_path / "out", formats=("schedule", "database"))
    doc = json.loads(open(written["schedule"]).read())
    # the session's best (stated with its confirmed figure, not the one it was picked by), unless a confirmed
    # rival is clearly (5 %) faster
    primary = [k for k in confirmed if store.trial(k).task_id == tasks[0].id]
    fastest = min(primary, key=lambda k: (confirmed[k].median_ms, k))
    session_best = tasks[0].best_trial_id
    best = fastest if clearly_faster(confirmed[fastest], confirmed[session_best]) else session_best
    assert doc["session"]["trial_id"] == best
    stats = doc["stats"]
    assert stats["source"] == "confirmed" and stats["median_ms"] == pytest.approx(confirmed[best].median_ms)
    assert stats["session_median_ms"] == pytest.approx(store.trial(best).latency_ms)
    assert stats["samples_ms"] == list(confirmed[best].samples_ms)
    assert stats["session_samples_ms"] == store.samples(best)
    assert stats["confirmed"]["runs"] == 2
    # the file says whether its figure can be held to: only a quiet confirmation is evidence
    assert stats["confirmed"]["disturbance"] == confirmed[best].disturbance
    assert stats["trusted"] == (confirmed[best].disturbance is None)
    assert stats["untrusted_because"] == (
        None if stats["trusted"] else f"confirmed while {confirmed[best].disturbance}"
    )
    assert stats["reference_ms"] == confirmed[best].reference_ms
    record = json.loads(open(f"{written['database']}/database_tuning_record.json").readline())
    assert record[1][1][0] == pytest.approx(confirmed[best].median_ms * 1e-3)
    # beside the stated figure: its interval over the fresh processes and how it runs placed otherwise
    lo, hi = stats["ci_ms"]
    assert (
        min(confirmed[best].run_medians_ms)
        <= lo
        <= stats["median_ms"]
        <= hi
        <= max(confirmed[best].run_medians_ms)
    )
    placement = stats["placement"]
    assert placement["measured_with"] == "staggered" and set(placement["layout_ms"]) == {
        "staggered",
        "aligned",
        "plain",
    }
    assert placement["plain_ms"] == pytest.approx(confirmed[best].layout_ms["plain"])
    assert placement["worst_ms"] == max(placement["layout_ms"].values())
    assert stats["placement_sensitive"] == placement["sensitive"] == (placement["ratio"] > 1.05)
    assert (placement["note"] is not None) == placement["sensitive"]
    # the rule on given figures
    from tunelab.core.export.pick import choose_trial as _chosen_best

    def at(*run_medians: float, disturbance: str | None = None, layouts: dict | None = None) -> Confirmation:
        ms = sorted(run_medians)[len(run_medians) // 2]
        return Confirmation(
            ms,
            run_medians,
            len(run_medians),
            None,
            None,
            "stable",
            None,
            None,
            0,
            disturbance,
            run_medians,
            layouts or {},
        )

    other = next(k for k in primary if k != session_best)
    best_at = at(1.0, 0.99, 1.01)
    assert _chosen_best(store, tasks[0], {session_best: best_at, other: at(0.97, 0.96, 0.98)}) == session_best
    assert _chosen_best(store, tasks[0], {session_best: best_at, other: at(0.90, 0.89, 0.91)}) == other
    # 10 % faster by the medians, but one of its processes was as slow as the best's: the intervals
    # overlap, and the best stays (issue 15: a 5 % difference of two noisy medians picked the rival)
    assert _chosen_best(store, tasks[0], {session_best: best_at, other: at(0.90, 0.85, 1.00)}) == session_best
    # clearly faster by every process, but measured beside a busy neighbour: its figure picks nothing
    busy = at(
        0.90, 0.89, 0.91, disturbance="pid 4242 (stress) was busy during 60% of the confirmation's runs"
    )
    assert _chosen_best(store, tasks[0], {session_best: best_at, other: busy}) == session_best
    assert (
        _chosen_best(store, tasks[0], {session_best: at(1.0), other: at(0.5)}) == session_best
    )  # one process each
    assert _chosen_best(store, tasks[0], {other: at(1.0)}) == other
    assert _chosen_best(store, tasks[0], {}) == session_best
    # --robust: the schedule whose worst placement is fastest, of those confirmed quietly
    sensitive = at(1.0, 0.99, 1.01, layouts={"staggered": 1.0, "aligned": 1.4, "plain": 1.3})
    steady = at(1.1, 1.09, 1.11, layouts={"staggered": 1.1, "aligned": 1.12, "plain": 1.11})
    figures = {session_best: sensitive, other: steady}
    assert _chosen_best(store, tasks[0], figures) == session_best
    assert _chosen_best(store, tasks[0], figures, robust=True) == other
    noisy_steady = replace(steady, disturbance="pid 1 (x) was busy during 50% of the confirmation's runs")
    assert (
        _chosen_best(store, tasks[0], {session_best: sensitive, other: noisy_steady}, robust=True)
        == session_best
    )

    # a chosen trial that was never confirmed keeps the session's figure
    unconfirmed = next(t for t in trials if t.ok and t.id not in confirmed and t.task_id == tasks[0].id)
    doc = json.loads(
        open(
            export_trial(store, sid, unconfirmed.id, out_dir=tmp_path / "o2", formats=("schedule",))[
                "schedule"
            ]
        ).read()
    )
    assert doc["stats"]["source"] == "session" and doc["stats"]["median_ms"] == unconfirmed.latency_ms
    assert not doc["stats"]["trusted"] and doc["stats"]["untrusted_because"].startswith("never confirmed")
    assert not worker_processes()
    store.close()


def test_confirmation_off_and_bad_counts(tmp_path):
    store = Store(tmp_path / "t.sqlite")
    session = confirm_when_finished(
        create_session(store, small_spec(trials=4, measure=replace(CONFIRMING, confirm_runs=0)))
    )
    list(session.run())
    assert session.confirmations == [] and store.validations(session.session_id) == []
    assert confirm_session(store, session.session_id) == []  # the session's own options: off
    before = store.sessions()
    for bad in (dict(confirm_runs=-1), dict(confirm_top=-2), dict(confirm_runs=100)):
        with pytest.raises(TunelabError, match="confirmation needs"):
            create_session(store, small_spec(measure=replace(CONFIRMING, **bad)))
    for cap in (-1.0, 1e9):
        with pytest.raises(TunelabError, match="time cap"):
            create_session(store, small_spec(measure=replace(CONFIRMING, confirm_max_s=cap)))
    assert store.sessions() == before
    store.close()


def test_cancel_during_confirmation_keeps_the_session_finished(tmp_path):
    store = Store(tmp_path / "t.sqlite")
    session = confirm_when_finished(
        create_session(store, small_spec(trials=4, measure=replace(CONFIRMING, confirm_runs=4)))
    )
    # the stage callback runs just before the fresh processes start: stop there
    session.on_stage.append(lambda text: session.cancel() if text.startswith("confirming") else None)
    stages: list[str] = []
    session.on_stage.append(stages.append)
    list(session.run())
    assert store.session(session.session_id).status == "finished"
    assert session.confirmations == [] and store.validations(session.session_id) == []
    assert stages[-1].startswith("confirmation stopped")
    assert not worker_processes()
    store.close()


@pytest.mark.serial
def test_a_confirmation_beside_a_busy_neighbour_is_not_evidence_and_is_measured_again(tmp_path):
    """Issue 15 part 1: a confirmation taken while another process is busy says so and picks or states
    nothing to hold to; given time, it is measured again until the machine is quiet.

    The machine may run other people's work too (issue 26): the planted neighbours are asserted among the
    busy processes named, never as the only ones or the first, and the settled end is asserted only when
    the machine did settle once they left."""
    store = Store(tmp_path / "t.sqlite")
    # a kernel long enough (128^3, 10 ms samples) that its samples agree on a quiet machine; the run-CV
    # target is loose here so that only the neighbours decide
    measure = replace(CONFIRMING, min_repeat_ms=10, repeat=5, confirm_top=1, target_cv=1.0, confirm_max_s=0)
    session = create_session(
        store, small_spec(shape={"M": 128, "N": 128, "K": 128}, trials=3, measure=measure)
    )
    list(session.run())
    sid = session.session_id
    pids = start_neighbours()
    stages: list[str] = []
    try:
        time.sleep(0.5)
        # no time to measure again: one attempt, stored with what disturbed it
        (noisy,) = confirm_session(store, sid, on_stage=stages.append)
        assert not any("measuring again" in s for s in stages)
        (entry,) = noisy.schedules
        assert set(pids) & set(entry.other_busy_pids) and entry.busy_fraction >= 0.5
        (confirmation,) = confirmations(store, sid).values()
        named = {int(p) for p in re.findall(r"pid (\d+)", confirmation.disturbance or "")}
        assert named and named <= set(entry.other_busy_pids) and "busy" in confirmation.disturbance
        pick = export_pick(store, sid)
        assert pick.confirmation == confirmation
        assert pick.untrusted_because == f"confirmed while {confirmation.disturbance}"
        assert "Not a figure to hold to: confirmed while pid" in pick.summary()

        # with time: measured again once the first attempt is found disturbed; the neighbours leave then
        def on_stage(text: str) -> None:
            stages.append(text)
            if "measuring again" in text:
                stop_neighbours(pids)

        stages.clear()
        (later,) = confirm_session(store, sid, max_s=120, on_stage=on_stage)
    finally:
        stop_neighbours(pids)
    again = [s for s in stages if "measuring again" in s]
    (entry,) = later.schedules
    if not again:
        # Its first attempt settled: on a machine whose other tenants starved the planted loops below the
        # busy threshold through that attempt, the telemetry saw none of them busy (seen once in CI). The
        # measure-again loop itself is pinned by test_an_unsettled_confirmation_is_measured_again_until_*.
        assert entry.busy_fraction < DISTURBED_FRACTION and disturbance_of(entry) is None, stages
        assert [v["id"] for v in store.validations(sid)] == [later.id, noisy.id]
        store.close()
        return
    assert "busy" in again[0] and "attempt 2" in again[0], stages
    latest = confirmations(store, sid)[entry.trial_id]
    assert latest.validation_id == later.id
    if latest.disturbance is None:
        # settled once the planted neighbours left: an attempt without them, the figure to hold to
        assert not set(pids) & set(entry.other_busy_pids)
        # the figure to hold to, unless this shared machine's own noise left its fresh processes disagreeing
        reason = export_pick(store, sid).untrusted_because
        assert reason == untrusted_because(latest), reason
        assert reason is None or reason.startswith("its confirmation was noisy"), reason
    else:
        # other work kept the machine busy for the whole time: stored as noisy, said so, not trusted
        assert any("did not settle" in s for s in stages), stages
        assert export_pick(store, sid).untrusted_because == f"confirmed while {latest.disturbance}"
    # only the last confirmation's chosen attempt is stored (beside the earlier noisy confirmation)
    assert [v["id"] for v in store.validations(sid)] == [later.id, noisy.id]
    assert not worker_processes()
    store.close()


@pytest.mark.serial
def test_an_unsettled_confirmation_is_measured_again_until_settled_or_out_of_time(tmp_path):
    """The loop behind a confirmation's time cap, on a real disturbed report (a busy neighbour planted
    through one real confirmation) and that report with the neighbour gone: measured again while
    unsettled and another attempt fits, the first settled attempt kept; out of time, the least disturbed."""
    store = Store(tmp_path / "t.sqlite")
    measure = replace(CONFIRMING, min_repeat_ms=10, repeat=5, confirm_top=1, target_cv=1.0)
    session = create_session(
        store, small_spec(shape={"M": 128, "N": 128, "K": 128}, trials=2, measure=measure)
    )
    list(session.run())
    pids = start_neighbours()
    try:
        time.sleep(0.5)
        (busy,) = confirm_session(store, session.session_id)
    finally:
        stop_neighbours(pids)
    store.close()
    (entry,) = busy.schedules
    if disturbance_of(entry) is None:
        pytest.skip("the planted neighbours were starved below the busy threshold through the confirmation")
    quiet = replace(
        busy, schedules=(replace(entry, other_busy_pids=(), busy_fraction=0.0, cv=0.0, run_cv=0.0),)
    )
    assert disturbance_of(quiet.schedules[0]) is None

    def scripted(*reports: ValidationReport):
        left = list(reports)
        return lambda: left.pop(0)

    ticks = iter(range(1000))  # each clock reading one second later: an attempt takes 1 to 2 s
    stages: list[str] = []
    kept = _measure_until_settled(
        scripted(busy, busy, quiet, busy),
        max_s=60,
        target_cv=1.0,
        on_stage=stages.append,
        clock=lambda: float(next(ticks)),
    )
    assert kept is quiet
    assert len(stages) == 2 and all("busy" in s for s in stages)
    assert "attempt 2" in stages[0] and "attempt 3" in stages[1]

    # out of time after two attempts: the least disturbed one (busy through half its runs, not all)
    busier = replace(busy, schedules=(replace(entry, busy_fraction=1.0),))
    less = replace(busy, schedules=(replace(entry, busy_fraction=DISTURBED_FRACTION, run_cv=0.0),))
    assert disturbance_of(less.schedules[0]) is not None
    stages.clear()
    kept = _measure_until_settled(
        scripted(busier, less, quiet),
        max_s=6,
        target_cv=1.0,
        on_stage=stages.append,
        clock=lambda: float(next(ticks)),
    )
    assert kept is less
    assert "did not settle in 6 s" in stages[-1] and sum("measuring again" in s for s in stages) == 1
