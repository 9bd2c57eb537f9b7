"""Several members in one process (kgctl/member/pack.py), pure parts: their names and
ids, and which member a control line reaches."""

from __future__ import annotations

import io

from kgctl.member.pack import MemberPack, packed_configs
from kgctl.member.runner import MemberConfig
from kgctl.settings import ClientSettings


def test_packed_members_get_numbered_names_and_ids() -> None:
    base = MemberConfig(group="g", topics=["t"], name="w", instance_id="i", client_id="c")
    got = packed_configs(base, 3, pid=42)
    assert [(c.name, c.instance_id, c.client_id) for c in got] == [
        ("w-1", "i-1", "c-1"),
        ("w-2", "i-2", "c-2"),
        ("w-3", "i-3", "c-3"),
    ]
    assert all(not c.read_stdin and c.group == "g" and c.topics == ["t"] for c in got)
    plain = packed_configs(MemberConfig(group="g", topics=["t"]), 2, pid=42)
    assert [(c.name, c.instance_id, c.client_id) for c in plain] == [
        ("member-42-1", None, None),
        ("member-42-2", None, None),
    ]
    # Named by the instance id when there is no --name (as a single member is).
    assert (
        packed_configs(MemberConfig(group="g", topics=["t"], instance_id="s"), 1, 1)[0].name
        == "s-1"
    )


def test_a_control_line_reaches_the_member_it_names_or_all() -> None:
    configs = packed_configs(MemberConfig(group="g", topics=["t"], name="p"), 3, pid=1)
    pack = MemberPack(configs, ClientSettings(bootstrap="127.0.0.1:9092"), lambda c: [],
                      stdin=io.StringIO())  # fmt: skip
    pack._route('{"op": "rejoin", "member": "p-2"}')
    pack._route('{"op": "rejoin"}')
    pack._route('{"op": "rejoin", "member": "nobody"}')
    pack._route("not json")
    got = {m.config.label: [c.op for c in m.control.drain()] for m in pack.members}
    assert got == {
        "p-1": ["rejoin", "invalid"],
        "p-2": ["rejoin", "rejoin", "invalid"],
        "p-3": ["rejoin", "invalid"],
    }
