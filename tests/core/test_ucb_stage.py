"""The ucb tuner says in the session's stage line why it gave each batch to the policy it chose (issue 28).
A real LLVM session: the stage listeners hear the tuner's own sentence."""

from __future__ import annotations

from specs import small_spec

from tunelab.core.session.loop import create_session


def test_each_ucb_pick_is_said_on_the_stage_line(store):
    session = create_session(store, small_spec(tuner="ucb", trials=8, batch=2))
    stages: list[str] = []
    session.on_stage.append(stages.append)
    trials = list(session.run())
    assert len(trials) == 8
    picks = [s for s in stages if s.startswith("ucb: batch to ")]
    assert len(picks) == 4, stages  # one sentence a batch, naming the policy and why
