"""`kgctl join` as it runs: one real consumer-group member that shows every step of the
rebalance. No typer here: the options are declared once, for typer, in `kgctl.cli.join`;
a plain command line reaches `run_join` through `kgctl.cli.fastparse` without typer, any
other through typer and `join_command` (docs/benchmarks.md, "Start-up").
"""

from __future__ import annotations

import contextlib
import enum
import io
import os
from pathlib import Path

from kgctl.cli.base import Env, OutputFormat, make_env, make_settings, run
from kgctl.errors import ExitStatus, MemberFailedError, UsageError
from kgctl.model.events import Event


class Assignor(str, enum.Enum):
    range = "range"
    roundrobin = "roundrobin"
    sticky = "sticky"
    cooperative_sticky = "cooperative-sticky"


class Commit(str, enum.Enum):
    auto = "auto"
    sync = "sync"
    async_ = "async"
    none = "none"


class GroupProtocol(str, enum.Enum):
    classic = "classic"
    consumer = "consumer"


class RemoteAssignor(str, enum.Enum):
    uniform = "uniform"
    range = "range"


class From(str, enum.Enum):
    earliest = "earliest"
    latest = "latest"


class TextSink:
    """Lines on stdout (with a live header on a terminal, for one member alone); the exit
    summary on stderr."""

    def __init__(self, env: Env, live: bool = True) -> None:
        from kgctl.render.member_lines import MemberHeader

        self.env = env
        self.header = MemberHeader()
        self.previous: Event | None = None
        self.live = None
        assert env.out is not None
        if live and env.out.is_terminal and not env.quiet:
            from rich.live import Live

            self.live = Live(
                self.header.render(),
                console=env.out,
                auto_refresh=True,
                refresh_per_second=4,
                transient=True,
                get_renderable=self.header.render,
            )
            self.live.start()

    def __call__(self, event: Event) -> None:
        from kgctl.render.member_lines import render_line, summary_lines

        self.header.update(event)
        assert self.env.out is not None
        if event.type == "MemberStopped":
            self.close()
            failed = event.data.get("reason") == "failed"
            did_work = bool(event.data.get("records") or event.data.get("committed"))
            # A member that failed before doing anything: the error line says it all
            # (stderr keeps to that one line).
            if (not self.env.quiet or event.data.get("exit_status")) and (did_work or not failed):
                for summary in summary_lines(event):
                    self.env.error_line(summary)
            return
        if self.env.quiet and event.type not in ("MemberFailed",):
            return
        line = render_line(event, self.previous, heartbeats=self.env.verbose)
        if event.type != "HeartbeatSucceeded":
            self.previous = event
        if line is not None:
            console = self.live.console if self.live is not None else self.env.out
            console.print(line, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class JsonSink:
    """Events as JSON lines on stdout, nothing else."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def __call__(self, event: Event) -> None:
        try:
            self.env.line(event.to_json())
        except (BrokenPipeError, ValueError):
            # The reader went away (kgctl chaos died?): keep the member's own shutdown path
            # (SIGTERM from the parent-death signal) rather than dying here mid-protocol.
            stream = self.env.stdout_stream
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())


def run_join(
    topics: list[str] | None,
    group: str,
    pattern: str | None,
    client_pattern: str | None,
    assignor: list[Assignor] | None,
    instance_id: str | None,
    session_timeout: int | None,
    heartbeat_interval: int | None,
    max_poll_interval: int | None,
    client_id: str | None,
    name: str | None,
    processing_ms: float,
    commit: Commit,
    from_: From,
    max_records: int | None,
    duration: float | None,
    control_topic: str | None,
    trace_topic: str | None,
    fail_on_missing: bool,
    group_protocol: GroupProtocol,
    remote_assignor: RemoteAssignor | None,
    client_rack: str | None,
    fetch: bool,
    fetch_max_wait: int | None,
    members: int,
    bootstrap: str | None,
    command_config: Path | None,
    x: list[str] | None,
    output: OutputFormat,
    timeout: float,
    verbose: bool,
    quiet: bool,
) -> int:
    """Run the member(s) `kgctl join`'s options describe; the exit status (errors are
    written as one line and raised as `CommandExit`)."""
    env = make_env(output, verbose, quiet)

    def body() -> ExitStatus:
        from kgctl.member.runner import Member, MemberConfig, Sink

        if not group:
            raise UsageError("--group/-g is required")
        if [bool(topics), bool(pattern), bool(client_pattern)].count(True) != 1:
            raise UsageError(
                "give TOPICS..., --pattern REGEX or --client-pattern REGEX (exactly one of them)"
            )
        settings = make_settings(bootstrap, command_config, x, timeout)
        config = MemberConfig(
            group=group,
            topics=list(topics or []),
            pattern=pattern,
            client_pattern=client_pattern,
            assignors=[a.value for a in (assignor or [Assignor.range])],
            instance_id=instance_id,
            session_timeout_ms=session_timeout,
            heartbeat_interval_ms=heartbeat_interval,
            max_poll_interval_ms=max_poll_interval,
            client_id=client_id,
            name=name,
            processing_ms=processing_ms,
            commit=commit.value,
            offset_reset=from_.value,
            max_records=max_records,
            duration_s=duration,
            control_topic=control_topic,
            trace_topic=trace_topic,
            fail_on_missing=fail_on_missing,
            group_protocol=group_protocol.value,
            remote_assignor=remote_assignor.value if remote_assignor is not None else None,
            client_rack=client_rack or None,
            fetch=fetch,
            fetch_max_wait_ms=fetch_max_wait,
        )
        config.validate()
        member_class = Member
        if config.group_protocol == "consumer":
            from kgctl.adapters.cluster import probe
            from kgctl.member.consumer_member import ConsumerProtocolMember

            # Before the member starts: on a broker without KIP-848 it failed with a
            # bare UNSUPPORTED_VERSION that said nothing of why (Kafka 3.x).
            caps = probe(settings)
            missing = caps.consumer_protocol_missing
            if missing:
                raise MemberFailedError(
                    caps.refusal(
                        "kgctl join --group-protocol consumer",
                        missing,
                        f"run it with --group-protocol classic, or {caps.enable_hint}",
                    )
                )

            member_class = ConsumerProtocolMember
        if members > 1:
            from kgctl.member.pack import MemberPack, packed_configs

            configs = packed_configs(config, members, os.getpid())
            json_sink = JsonSink(env)

            def sinks(c: MemberConfig) -> list[Sink]:
                # Every line names its member; one live header cannot speak for N.
                return [json_sink if env.json else TextSink(env, live=False)]

            return MemberPack(configs, settings, sinks, member_class=member_class).run()
        sink = JsonSink(env) if env.json else TextSink(env)
        try:
            return member_class(config, settings, [sink]).run()
        finally:
            if isinstance(sink, TextSink):
                sink.close()

    return int(run(env, body))
