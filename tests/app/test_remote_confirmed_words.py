"""How the views say where a confirmation's runs were: fresh processes here, or fresh sessions on the RPC
servers for a session measured (and so confirmed) through a tracker (tunelab.core.trust.remeasure.remote_pool)."""

from __future__ import annotations

from tunelab.app.widgets.formatting import fmt_fresh_runs


def test_a_confirmation_on_servers_says_so():
    assert fmt_fresh_runs(1) == "1 fresh process"
    assert fmt_fresh_runs(3) == "3 fresh processes"
    assert fmt_fresh_runs(3, ("127.0.0.1:9091", "127.0.0.1:9093")) == "3 fresh sessions on the RPC servers"
    assert fmt_fresh_runs(1, ("127.0.0.1:9091",)) == "1 fresh session on the RPC server"
