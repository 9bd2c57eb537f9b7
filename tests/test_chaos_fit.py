"""A scenario's timings fitted to a cluster's group bounds (pure: no broker)."""

from __future__ import annotations

import pytest

from kgctl.chaos.fit import TimingOverrides, fit_scenario
from kgctl.chaos.scenarios import builtin, builtin_names
from kgctl.errors import UsageError
from kgctl.model.bounds import KAFKA_DEFAULTS, GroupBounds

STOCK = GroupBounds.from_configs({})  # a cluster that sets nothing: Kafka's own values
RELAXED = GroupBounds.from_configs(
    {"group.min.session.timeout.ms": "500", "group.initial.rebalance.delay.ms": "0"}
)


def test_a_session_below_the_cluster_minimum_is_raised_to_it_and_the_rest_follows() -> None:
    sc = builtin("member-kill")  # session 3 s, heartbeat 300 ms, kill step max 11 s
    fitted = fit_scenario(sc, STOCK)
    fleet = fitted.scenario.fleet
    assert fleet.session_timeout_ms == 6000
    assert fleet.heartbeat_interval_ms == 600
    assert fitted.scenario.steps[0].expect.max_seconds == 22
    shown = [a.describe() for a in fitted.adjustments]
    assert shown[0].startswith("session 3 s → 6 s: the cluster's minimum")
    assert "heartbeat 300 ms → 600 ms" in shown[1]
    assert "step 'kill m2' max_seconds 11 s → 22 s" in shown[2]
    assert shown[3].startswith("setup wait +3 s: group.initial.rebalance.delay.ms")
    assert fitted.first_join_delay_ms == 3000
    # The scenario as written is untouched (a second run fits it afresh).
    assert sc.fleet.session_timeout_ms == 3000


def test_a_scenario_that_fits_is_left_as_it_is() -> None:
    sc = builtin("member-kill")
    fitted = fit_scenario(sc, RELAXED)
    assert fitted.adjustments == []
    assert fitted.scenario.fleet == sc.fleet
    assert fitted.scenario.steps == sc.steps


def test_a_session_above_the_cluster_maximum_is_lowered_to_it() -> None:
    sc = builtin("rolling-restart-static")  # session 8 s
    tight = GroupBounds.from_configs(
        {"group.min.session.timeout.ms": "1000", "group.max.session.timeout.ms": "4000"}
    )
    fitted = fit_scenario(sc, tight)
    assert fitted.scenario.fleet.session_timeout_ms == 4000
    assert fitted.scenario.fleet.heartbeat_interval_ms == 250
    assert "the cluster's maximum" in fitted.adjustments[0].why


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_fits_a_stock_cluster(name: str) -> None:
    fleet = fit_scenario(builtin(name), STOCK).scenario.fleet
    assert KAFKA_DEFAULTS["group.min.session.timeout.ms"] <= fleet.session_timeout_ms
    assert fleet.heartbeat_interval_ms * 3 <= fleet.session_timeout_ms


def test_overrides_win_over_the_scenario_and_are_shown() -> None:
    sc = builtin("member-kill")
    fitted = fit_scenario(sc, STOCK, TimingOverrides(10000, 1000, 20000))
    fleet = fitted.scenario.fleet
    assert (fleet.session_timeout_ms, fleet.heartbeat_interval_ms) == (10000, 1000)
    assert fleet.max_poll_interval_ms == 20000
    assert fitted.scenario.steps[0].expect.max_seconds == pytest.approx(11 * 10 / 3, abs=0.1)
    settings = [a.setting for a in fitted.adjustments]
    assert settings[:3] == ["session", "heartbeat", "max-poll"]
    assert fitted.adjustments[0].why == "--session-timeout"


def test_a_session_override_the_cluster_refuses_is_one_line_naming_the_bounds() -> None:
    with pytest.raises(UsageError) as err:
        fit_scenario(builtin("tour"), STOCK, TimingOverrides(session_timeout_ms=3000))
    message = str(err.value)
    assert "\n" not in message
    assert "--session-timeout 3000" in message
    assert "group.min.session.timeout.ms=6000" in message
    assert "group.max.session.timeout.ms=1800000" in message


def test_a_heartbeat_override_must_fit_three_times_in_the_session() -> None:
    with pytest.raises(UsageError, match="at most 2000"):
        fit_scenario(builtin("tour"), STOCK, TimingOverrides(6000, 2500))


def test_bounds_the_cluster_would_not_give_say_they_are_assumed() -> None:
    bounds = GroupBounds.assumed("the cluster refused DescribeConfigs")
    assert bounds.min_session_ms == 6000
    assert "assumed: the cluster refused DescribeConfigs" in bounds.origin()
    with pytest.raises(UsageError, match="assumed"):
        fit_scenario(builtin("tour"), bounds, TimingOverrides(session_timeout_ms=1000))


def test_the_live_view_and_the_lines_show_what_was_fitted() -> None:
    from rich.console import Console

    from kgctl.chaos.journal import Journal
    from kgctl.model.events import Event
    from kgctl.model.state import GroupState
    from kgctl.render.chaos_view import event_line, render_chaos

    fitted = fit_scenario(builtin("tour"), STOCK)
    timings = [a.to_dict() for a in fitted.adjustments]
    journal = Journal("tour", "r1", "g", "b", cluster={"timings": timings})
    console = Console(width=200, record=True)
    console.print(render_chaos(journal, GroupState(group="g"), 0))
    screen = console.export_text()
    assert "fitted to the cluster:" in screen
    assert "session 3 s → 6 s: the cluster's minimum" in screen
    assert "each step's max_seconds: in proportion to the session timeout (×2)" in screen
    started = Event("ScenarioStarted", 0, 0, 1, "g", source="chaos", data={"timings": timings})
    lines = (event_line(started) or "").splitlines()
    # The plain lines name every change, each step's limit included.
    assert len(lines) == 1 + len(timings)
    assert any(
        "step 'kill m2 (found by session timeout)' max_seconds 11 s → 22 s" in ln for ln in lines
    )
    # Nothing fitted, nothing shown.
    plain = Console(width=200, record=True)
    plain.print(render_chaos(Journal("tour", "r1", "g", "b"), GroupState(group="g"), 0))
    assert "fitted" not in plain.export_text()
