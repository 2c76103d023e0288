"""The Live header says how much of the session's time went to the search between rounds (issue 29: on
the H200 the search took 30-45 s between rounds and nothing showed it). Real sessions tuned into the
test store; the figure is the store's own (Store.search_time), the same `tunelab show` prints."""

from __future__ import annotations

from tunelab.app.views.live_plot import LivePlot


def test_the_live_header_states_the_search_time_the_store_holds(qtbot, store):
    sid = min(r.id for r in store.sessions())
    search = store.search_time(sid)
    assert search is not None and search.rounds >= 1  # rounds of a session tuned now are timed
    live = LivePlot(store, redraw_ms=10)
    qtbot.addWidget(live)
    live.resize(1600, 600)  # the whole header fits: its tooltip is the figures' words, not the cut text
    live.show()
    live.set_session(sid)
    title = live.title.text()
    seconds = f"{search.total_s:.{1 if search.total_s < 10 else 0}f}"
    assert f"search {seconds} s = {search.share:.0%} of the rounds" in title
    assert search.words() in live.title.toolTip()
    live.set_session(None)
    assert "search" not in live.title.text()
