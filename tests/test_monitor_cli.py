"""`kgctl monitor`'s bad input: one line saying what is wrong, exit 2, before anything
starts (in-process, no broker: nothing is contacted before the options are checked)."""

from __future__ import annotations

import io
import socket

import pytest

from kgctl.cli.app import main
from kgctl.cli.common import Env
from kgctl.cli.monitor import parse_listen
from kgctl.errors import ExitStatus, UsageError


def kgctl(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), env=Env(stdout=out, stderr=err))
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--groups", "orders-("], "--groups 'orders-(': not a regular expression"),
        (["--exclude", "*x"], "--exclude '*x': not a regular expression"),
        (["--metrics-listen", "localhost:http"], "not HOST:PORT"),
        (["--since", "yesterday"], "--since 'yesterday': not a duration"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    status, out, err = kgctl("monitor", "-b", "127.0.0.1:1", *args)
    assert status == ExitStatus.USAGE
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_a_taken_port_is_a_usage_error() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        status, _out, err = kgctl("monitor", "-b", "127.0.0.1:1", "--metrics-listen", str(port))
    assert status == ExitStatus.USAGE
    assert f"--metrics-listen 127.0.0.1:{port}: cannot listen there" in err


def test_listen_defaults_to_loopback() -> None:
    assert parse_listen("9308") == ("127.0.0.1", 9308)
    assert parse_listen(":9308") == ("127.0.0.1", 9308)
    assert parse_listen("0.0.0.0:9308") == ("0.0.0.0", 9308)
    assert parse_listen("[::1]:9308") == ("::1", 9308)
    with pytest.raises(UsageError):
        parse_listen("9308:x")
