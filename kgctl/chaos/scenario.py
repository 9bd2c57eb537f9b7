"""Scenario files: the typed model and its validation (every error at once, with file:line).

A scenario is YAML (docs/scenarios.md): a `fleet` (members, assignors, static or
dynamic, timeouts, topics, produce rate) and `steps`, each one action with optional
expectations. `load_scenario` walks PyYAML's node tree so each error carries the line
and column of the value it is about, and collects all of them before raising.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from kgctl.chaos.actions import ACTIONS, NAME, StepCheck
from kgctl.chaos.app import check_template
from kgctl.errors import UsageError

ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
COMMITS = ("auto", "sync", "async", "none")
# The group protocol a member speaks (Java's group.protocol), the client that runs it
# (kgctl join, or Apache Kafka's Java VerifiableConsumer) and, on the consumer protocol,
# the broker-side assignor it asks for.
PROTOCOLS = ("classic", "consumer")
CLIENTS = ("kgctl", "java", "command")  # command: the user's program (kgctl/chaos/app.py)
REMOTE_ASSIGNORS = ("uniform", "range")
# Fault rules on these requests only mean something to members of one protocol.
CLASSIC_APIS = frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"})
CONSUMER_APIS = frozenset({"ConsumerGroupHeartbeat"})
# Actions that talk to a member over its control lines: kgctl join reads them, a Java
# VerifiableConsumer does not.
CONTROL_ACTIONS = ("subscription-change", "slow-consumer")
# Each action's arguments and checks are its own: kgctl/chaos/actions.py (ACTIONS).

STEP_KEYS = ("name", "action", "expect")
EXPECT_KEYS = {
    "rebalances": "int",
    "min_rebalances": "int",
    "max_rebalances": "int",
    "max_seconds": "num",
    "no_revokes_for": "str_list",
    "fenced": "str_list",
    "group_type": "protocol",
}
FLEET_KEYS = {
    "members": "members_spec",
    "assignors": "assignors",
    "static": "bool",
    "session_timeout_ms": "int",
    "heartbeat_interval_ms": "int",
    "max_poll_interval_ms": "int",
    "commit": "commit",
    "topics": "partitions_map",
    "subscribe": "str_list",
    "pattern": "str",
    "produce_rate": "num",
    "brokers": "int",
    "protocol": "protocol",
    "client": "client",
    "remote_assignor": "remote_assignor",
    "fetch": "bool",
    "command": "command",
}
MEMBER_KEYS = {
    "name": "str",
    "static": "bool",
    "assignors": "assignors",
    "subscribe": "str_list",
    "pattern": "str",
    "processing_ms": "int",
    "session_timeout_ms": "int",
    "protocol": "protocol",
    "client": "client",
    "remote_assignor": "remote_assignor",
    "command": "command",
}
TOP_KEYS = (
    "name",
    "description",
    "fleet",
    "steps",
    "settle_quiet_ms",
    "settle_timeout_s",
    "protocols",
    "compare_protocols",
)


@dataclass
class MemberSpec:
    """One member of the fleet as the scenario describes it."""

    name: str
    static: bool = False
    assignors: list[str] = field(default_factory=lambda: ["range"])
    subscribe: list[str] = field(default_factory=list)  # logical topic names
    pattern: str | None = None
    processing_ms: int = 0
    # This member's own session timeout (the fleet's when None): a scenario where one
    # member must outlast a delay the others must not (slow-sync).
    session_timeout_ms: int | None = None
    protocol: str = "classic"  # classic | consumer (KIP-848)
    client: str = "kgctl"  # kgctl | java (Apache Kafka's VerifiableConsumer)
    remote_assignor: str | None = None  # consumer protocol: uniform | range (broker's default)
    # client "command": the program started for this member, with placeholders
    # ({bootstrap}, {group}, {topics}, {name}, {instance_id}, {client_id}).
    command: list[str] = field(default_factory=list)


@dataclass
class Fleet:
    """The members, their settings and the topics the scenario creates."""

    members: list[MemberSpec]
    topics: dict[str, int]
    assignors: list[str] = field(default_factory=lambda: ["range"])
    static: bool = False
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 500
    max_poll_interval_ms: int = 30000
    commit: str = "auto"
    produce_rate: float = 0.0
    brokers: int = 1
    # False: members keep their partitions paused and send no Fetch (`kgctl join
    # --no-fetch`): cheap members for a large fleet that needs no records.
    fetch: bool = True

    @property
    def protocols(self) -> set[str]:
        """The group protocols the fleet's members speak."""
        return {m.protocol for m in self.members}


@dataclass
class Expect:
    """What a step's outcome must satisfy (all optional)."""

    rebalances: int | None = None
    min_rebalances: int | None = None
    max_rebalances: int | None = None
    max_seconds: float | None = None
    no_revokes_for: list[str] = field(default_factory=list)
    fenced: list[str] = field(default_factory=list)
    # The group's type as the broker lists it once the step settled (classic, consumer):
    # an online migration converts it.
    group_type: str | None = None
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in EXPECT_KEYS:
            value = getattr(self, key)
            if value not in (None, []):
                out[key] = value
        return out


@dataclass
class Step:
    """One action and what its outcome must satisfy."""

    name: str
    action: str
    args: dict[str, Any]
    expect: Expect
    line: int = 0


@dataclass
class Scenario:
    """A validated scenario."""

    name: str
    description: str
    fleet: Fleet
    steps: list[Step]
    origin: str = "<scenario>"
    text: str = ""
    settle_quiet_ms: int = 1000
    settle_timeout_s: float | None = None
    # The protocols the scenario means something on (`protocols:`; both by default): a
    # scenario about JoinGroup or about a classic assignor says classic only.
    protocols: list[str] = field(default_factory=lambda: list(PROTOCOLS))
    # Run once per protocol and compare (kgctl/chaos/showdown.py): the protocol showdown.
    compare_protocols: bool = False

    @property
    def uses_proxy(self) -> bool:
        """A scenario with fault rules, or with members that are the user's program (read
        from the wire), runs its fleet through a `kgctl proxy`."""
        if any(m.client == "command" for m in self.fleet.members):
            return True
        return any(s.action in ("fault", "heal") for s in self.steps)


class ScenarioError(UsageError):
    """A scenario that does not validate; `errors` holds every problem with its location."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        n = len(errors)
        if n == 1:  # one problem: one line, like every other kgctl error
            super().__init__(f"invalid scenario: {errors[0]}")
            return
        super().__init__(f"{n} errors in the scenario:\n  " + "\n  ".join(errors))


class _Checker:
    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.errors: list[str] = []  # in file order
        self._found: list[tuple[tuple[int, int], int, str]] = []
        self._loader = yaml.SafeLoader("")

    def error(self, node: yaml.Node | None, path: str, message: str) -> None:
        where, order = self.origin, (0, 0)
        if node is not None:
            mark = node.start_mark
            where = f"{self.origin}:{mark.line + 1}:{mark.column + 1}"
            order = (mark.line, mark.column)
        text = f"{where}: {path}: {message}" if path else f"{where}: {message}"
        self._found.append((order, len(self._found), text))
        self.errors = [t for _o, _i, t in sorted(self._found)]

    def value(self, node: yaml.Node) -> Any:
        return self._loader.construct_object(node, deep=True)

    def mapping(
        self, node: yaml.Node, path: str, allowed: tuple[str, ...] | list[str]
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            self.error(node, path, f"expected a mapping, got {_kind(node)}")
            return {}
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for knode, vnode in node.value:
            key = str(self.value(knode))
            if key not in allowed:
                close = difflib.get_close_matches(key, list(allowed), n=1)
                hint = (
                    f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
                )
                self.error(knode, path, f"unknown key {key!r}{hint}")
                continue
            if key in out:
                self.error(knode, path, f"duplicate key {key!r}")
            out[key] = (knode, vnode)
        return out

    def typed(self, node: yaml.Node, path: str, kind: str) -> Any:
        """The value of a scalar or list node of `kind`, or None after reporting an error."""
        if kind in ("str_list", "topics"):
            return self._names(node, path, one_allowed=kind == "topics")
        if kind == "members":
            if isinstance(node, yaml.ScalarNode) and self.value(node) == "all":
                return "all"
            return self._names(node, path, one_allowed=False)
        if kind == "assignors":
            return self._assignors(node, path)
        if kind == "command":
            return self._command(node, path)
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, path, f"expected {_KIND_TEXT.get(kind, kind)}, got {_kind(node)}")
            return None
        v = self.value(node)
        valid, expected = _SCALARS[kind]
        if not valid(v):
            self.error(node, path, f"expected {expected}, got {v!r}")
            return None
        return v

    def _names(self, node: yaml.Node, path: str, one_allowed: bool) -> list[str] | None:
        """A list of names (or, `one_allowed`, a single name standing for a list of one)."""
        if isinstance(node, yaml.ScalarNode) and one_allowed:
            one = self.value(node)
            if isinstance(one, str) and one:
                return [one]
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, path, f"expected a list of names, got {_kind(node)}")
            return None
        out = []
        for i, item in enumerate(node.value):
            v = self.value(item) if isinstance(item, yaml.ScalarNode) else None
            if not isinstance(v, str) or not v:
                self.error(item, f"{path}[{i}]", "expected a name")
            else:
                out.append(v)
        return out

    def _command(self, node: yaml.Node, path: str) -> list[str] | None:
        """A member's command line: a list of words (or one string, split as a shell
        would, without a shell), placeholders checked."""
        words: list[str] | None = None
        if isinstance(node, yaml.ScalarNode) and isinstance(self.value(node), str):
            try:
                words = shlex.split(self.value(node))
            except ValueError as exc:
                self.error(node, path, f"not a command line ({exc})")
                return None
        elif isinstance(node, yaml.SequenceNode):
            words = []
            for i, item in enumerate(node.value):
                v = self.value(item) if isinstance(item, yaml.ScalarNode) else None
                if v is None or isinstance(v, dict | list):
                    self.error(item, f"{path}[{i}]", "expected a word of the command line")
                    return None
                words.append(str(v))
        if not words:
            self.error(node, path, 'expected a command line, e.g. [python, app.py, "{bootstrap}"]')
            return None
        problem = check_template(words)
        if problem:
            self.error(node, path, problem)
            return None
        return words

    def _assignors(self, node: yaml.Node, path: str) -> list[str] | None:
        names = self._names(node, path, one_allowed=True)
        if names is None:
            return None
        bad = [n for n in names if n not in ASSIGNORS]
        for n in bad:
            self.error(node, path, f"unknown assignor {n!r}; expected one of {ASSIGNORS}")
        coop = {n == "cooperative-sticky" for n in names}
        if len(coop) > 1:
            self.error(node, path, "cooperative-sticky cannot be mixed with eager assignors")
        return None if bad or len(coop) > 1 else names


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v >= 0


# A scalar kind: whether a value is one, and what was expected when it is not.
_SCALARS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "member": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "topic": (lambda v: isinstance(v, str) and bool(v), "a name"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (_is_count, "a whole number >= 0"),
    "num": (_is_number, "a number >= 0"),
    "commit": (lambda v: v in COMMITS, f"one of {COMMITS}"),
    "protocol": (lambda v: v in PROTOCOLS, f"one of {', '.join(PROTOCOLS)}"),
    "client": (lambda v: v in CLIENTS, f"one of {', '.join(CLIENTS)}"),
    "remote_assignor": (lambda v: v in REMOTE_ASSIGNORS, f"one of {', '.join(REMOTE_ASSIGNORS)}"),
}


_KIND_TEXT = {"int": "a whole number", "num": "a number", "bool": "true or false", "str": "a name"}


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"{node.value!r}"


def parse_scenario(text: str, origin: str = "<scenario>") -> Scenario:
    """Validate scenario YAML; raise ScenarioError with every problem found."""
    c = _Checker(origin)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{origin}:{mark.line + 1}:{mark.column + 1}" if mark is not None else origin
        raise ScenarioError([f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
    if root is None:
        raise ScenarioError([f"{origin}: the file is empty"])
    top = c.mapping(root, "", TOP_KEYS)
    name = Path(origin).stem
    description = ""
    if "name" in top:
        name = c.typed(top["name"][1], "name", "str") or name
    if "description" in top:
        d = c.value(top["description"][1])
        description = str(d) if d is not None else ""
    fleet = _fleet(c, top.get("fleet"), root)
    protocols = _protocols(c, top.get("protocols"))
    compare = False
    if "compare_protocols" in top:
        compare = bool(c.typed(top["compare_protocols"][1], "compare_protocols", "bool"))
    quiet, timeout = 1000, None
    if "settle_quiet_ms" in top:
        quiet = c.typed(top["settle_quiet_ms"][1], "settle_quiet_ms", "int") or quiet
    if "settle_timeout_s" in top:
        timeout = c.typed(top["settle_timeout_s"][1], "settle_timeout_s", "num")
    steps: list[Step] = []
    if "steps" not in top:
        c.error(root, "", "missing key 'steps' (a list of actions)")
    else:
        snode = top["steps"][1]
        if not isinstance(snode, yaml.SequenceNode) or not snode.value:
            c.error(snode, "steps", "expected a non-empty list of steps")
        else:
            names = [m.name for m in fleet.members] if fleet else []
            topics = dict(fleet.topics) if fleet else {}
            for i, node in enumerate(snode.value):
                step = _step(c, node, f"steps[{i}]", names, topics)
                if step is not None:
                    steps.append(step)
    if c.errors:
        raise ScenarioError(c.errors)
    assert fleet is not None
    sc = Scenario(
        name=name,
        description=description,
        fleet=fleet,
        steps=steps,
        origin=origin,
        text=text,
        settle_quiet_ms=quiet,
        settle_timeout_s=timeout,
        protocols=protocols,
        compare_protocols=compare,
    )
    problems = protocol_problems(sc)
    if problems:
        raise ScenarioError([f"{origin}:{line}: {text}" for line, text in problems])
    return sc


def member_specs(sc: Scenario) -> dict[str, MemberSpec]:
    """Every member a scenario will run, by name: the fleet's, those a `member-add` starts
    (like the fleet's first) and a `static-conflict`'s duplicate (like its original)."""
    specs = {m.name: m for m in sc.fleet.members}
    first = sc.fleet.members[0]
    for step in sc.steps:
        if step.action == "member-add":
            clients = list(step.args.get("clients") or [first.client])
            for i, n in enumerate(step.args.get("names", [])):
                specs.setdefault(n, replace(first, name=n, client=clients[i % len(clients)]))
        elif step.action == "static-conflict" and step.args.get("member") in specs:
            dup = step.args.get("duplicate") or f"{step.args['member']}-dup"
            specs.setdefault(dup, replace(specs[step.args["member"]], name=dup))
    return specs


def _step_members(step: Step, specs: dict[str, MemberSpec]) -> list[MemberSpec]:
    """The members a step acts on (every member when it names none, or `all`)."""
    raw = step.args.get("member", step.args.get("members"))
    if raw in (None, "all", "leader"):
        return list(specs.values())
    names = [raw] if isinstance(raw, str) else list(raw)
    return [specs[n] for n in names if n in specs]


def _fault_apis(step: Step) -> set[str]:
    rules = step.args.get("rules") or [step.args.get("rule", "")]
    return {str(r).split(":", 1)[0].strip() for r in rules}


def protocol_problems(sc: Scenario) -> list[tuple[int, str]]:
    """What in a scenario its members' protocols or clients cannot do, as (line, message):
    a protocol the scenario does not run on, a fault on requests no targeted member sends,
    a control line to a Java member, a rebalance count no member can report."""
    out: list[tuple[int, str]] = []
    specs = member_specs(sc)
    spoken = sorted({m.protocol for m in specs.values()})
    refused = [p for p in spoken if p not in sc.protocols]
    if refused:
        out.append(
            (
                0,
                f"scenario {sc.name} runs on the {' and '.join(sc.protocols)} protocol only "
                f"(protocols: {sc.protocols}); its fleet would speak {', '.join(refused)}",
            )
        )
    every_java = all(m.client == "java" for m in specs.values())
    for i, step in enumerate(sc.steps):
        where = f"steps[{i}] ({step.name})"
        targets = _step_members(step, specs)
        if step.action == "fault":
            apis = _fault_apis(step)
            protos = {m.protocol for m in targets}
            needs = [(a, "classic") for a in CLASSIC_APIS] + [
                (a, "consumer") for a in CONSUMER_APIS
            ]
            for api, need in sorted(needs):
                if api in apis and need not in protos:
                    out.append(
                        (
                            step.line,
                            f"{where}: a fault on {api} reaches only {need}-protocol members; "
                            f"the members it targets speak {', '.join(sorted(protos))}",
                        )
                    )
        if step.action in CONTROL_ACTIONS or step.action == "static-conflict":
            java = sorted(m.name for m in targets if m.client == "java")
            if java:
                out.append(
                    (
                        step.line,
                        f"{where}: {step.action} needs kgctl members (control lines, a second "
                        f"process); {', '.join(java)} run Java's VerifiableConsumer",
                    )
                )
        counts = ("rebalances", "min_rebalances", "max_rebalances")
        if every_java and any(getattr(step.expect, k) is not None for k in counts):
            out.append(
                (
                    step.line,
                    f"{where}: rebalances are counted from the generations kgctl members "
                    "report; every member of this fleet is a Java VerifiableConsumer, which "
                    "reports none: drop the rebalance counts or add a kgctl member",
                )
            )
    return out


def with_app(sc: Scenario, command: list[str] | None) -> Scenario:
    """The scenario with `command` (`kgctl chaos run --app`) as the program of every
    command member, or of every member when the scenario has none. UsageError when a
    command member is left without a program."""
    members = list(sc.fleet.members)
    if command:
        apps = any(m.client == "command" for m in members)
        members = [
            replace(m, client="command", command=list(command))
            if m.client == "command" or not apps
            else m
            for m in members
        ]
    bare = [m.name for m in members if m.client == "command" and not m.command]
    if bare:
        raise UsageError(
            f"{sc.origin}: members {', '.join(bare)} are client: command without a command; "
            "add command: [program, args...] to the scenario or pass --app 'CMD'"
        )
    return replace(sc, fleet=replace(sc.fleet, members=members))


def with_protocol(sc: Scenario, protocol: str) -> Scenario:
    """The scenario with every member on `protocol` (classic, consumer) or `mixed` (every
    second member on consumer, starting with the second); UsageError (one line) when the
    scenario cannot run so."""
    choices = (*PROTOCOLS, "mixed")
    if protocol not in choices:
        raise UsageError(f"--group-protocol {protocol!r}: expected one of {', '.join(choices)}")

    def proto(i: int) -> str:
        if protocol == "mixed":
            return PROTOCOLS[i % 2]
        return protocol

    members = [replace(m, protocol=proto(i)) for i, m in enumerate(sc.fleet.members)]
    fleet = replace(sc.fleet, members=members)
    out = replace(sc, fleet=fleet, compare_protocols=False)
    problems = protocol_problems(out)
    if problems:
        raise UsageError(f"--group-protocol {protocol}: {problems[0][1]}")
    return out


def _protocols(c: _Checker, entry: tuple[yaml.Node, yaml.Node] | None) -> list[str]:
    """`protocols:`, the protocols a scenario runs on (both when absent)."""
    if entry is None:
        return list(PROTOCOLS)
    node = entry[1]
    listed = c.typed(node, "protocols", "str_list") or []
    bad = [p for p in listed if p not in PROTOCOLS]
    for p in bad:
        c.error(node, "protocols", f"unknown protocol {p!r}; expected one of {PROTOCOLS}")
    return listed if listed and not bad else list(PROTOCOLS)


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the scenario ({exc.strerror})") from None
    return parse_scenario(text, str(p))


def _fleet(c: _Checker, entry: tuple[yaml.Node, yaml.Node] | None, root: yaml.Node) -> Fleet | None:
    if entry is None:
        c.error(root, "", "missing key 'fleet' (members, topics, timeouts)")
        return None
    node = entry[1]
    keys = c.mapping(node, "fleet", list(FLEET_KEYS))
    vals: dict[str, Any] = {}
    for key, (_k, v) in keys.items():
        if key in ("members", "topics"):
            continue
        vals[key] = c.typed(v, f"fleet.{key}", FLEET_KEYS[key])
    topics = _fleet_topics(c, node, keys)
    static = bool(vals.get("static") or False)
    assignors = vals.get("assignors") or ["range"]
    subscribe = vals.get("subscribe")
    pattern = vals.get("pattern")
    if subscribe and pattern:
        c.error(keys["pattern"][0], "fleet", "give subscribe or pattern, not both")
    for t in subscribe or []:
        if t not in topics:
            c.error(
                keys["subscribe"][1],
                "fleet.subscribe",
                f"unknown topic {t!r}; add it to fleet.topics",
            )
    if pattern:
        _check_regex(c, keys["pattern"][1], "fleet.pattern", pattern)
    default = MemberSpec(
        "",
        static,
        list(assignors),
        list(subscribe) if subscribe else ([] if pattern else sorted(topics)),
        pattern,
        protocol=vals.get("protocol") or "classic",
        client=vals.get("client") or "kgctl",
        remote_assignor=vals.get("remote_assignor"),
        command=list(vals.get("command") or []),
    )
    _check_command(c, keys, "fleet", default)
    if default.remote_assignor and default.protocol != "consumer":
        c.error(keys["remote_assignor"][1], "fleet.remote_assignor", _REMOTE_CLASSIC)
    members: list[MemberSpec] = []
    if "members" not in keys:
        c.error(node, "fleet", "missing key 'members' (a count or a list)")
    else:
        members = _fleet_members(c, keys["members"][1], topics, default)
    session = vals.get("session_timeout_ms") or 6000
    heartbeat = vals.get("heartbeat_interval_ms") or 500
    if "heartbeat_interval_ms" in keys and heartbeat * 3 > session:
        c.error(
            keys["heartbeat_interval_ms"][1],
            "fleet.heartbeat_interval_ms",
            f"{heartbeat} ms is more than a third of session_timeout_ms ({session})",
        )
    brokers = vals.get("brokers") or 1
    if brokers not in (1, 3):
        c.error(keys["brokers"][1], "fleet.brokers", "1 or 3")
    fetch = vals.get("fetch", True)
    if not fetch and (vals.get("produce_rate") or 0) > 0:
        c.error(
            keys["fetch"][1],
            "fleet.fetch",
            "false with a produce_rate: members that do not fetch read no records "
            "(drop produce_rate, or fetch)",
        )
    if not fetch and any(m.protocol != "classic" or m.client != "kgctl" for m in members):
        c.error(
            keys["fetch"][1],
            "fleet.fetch",
            "false is for kgctl members of the classic protocol (kgctl join --no-fetch)",
        )
    return Fleet(
        members=members,
        topics=topics,
        assignors=list(assignors),
        static=static,
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        max_poll_interval_ms=vals.get("max_poll_interval_ms") or 30000,
        commit=vals.get("commit") or "auto",
        produce_rate=float(vals.get("produce_rate") or 0.0),
        brokers=brokers,
        fetch=bool(fetch),
    )


class _AnyKeys(list):  # type: ignore[type-arg]
    """Allows every key (topic names are the user's)."""

    def __contains__(self, item: object) -> bool:
        return True


def _check_regex(c: _Checker, node: yaml.Node, path: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        c.error(node, path, f"not a regular expression ({exc})")


def _fleet_topics(
    c: _Checker, node: yaml.Node, keys: dict[str, tuple[yaml.Node, yaml.Node]]
) -> dict[str, int]:
    topics: dict[str, int] = {}
    if "topics" not in keys:
        c.error(node, "fleet", "missing key 'topics' ({name: partitions})")
        return topics
    tnode = keys["topics"][1]
    tmap = c.mapping(tnode, "fleet.topics", _AnyKeys())
    if not tmap and isinstance(tnode, yaml.MappingNode):
        c.error(tnode, "fleet.topics", "expected at least one topic")
    for tname, (knode, vnode) in tmap.items():
        n = c.typed(vnode, f"fleet.topics.{tname}", "int")
        if not NAME.match(tname):
            c.error(knode, "fleet.topics", f"topic name {tname!r}: use letters, digits, . _ -")
        elif n is not None and n < 1:
            c.error(vnode, f"fleet.topics.{tname}", "a topic needs at least 1 partition")
        elif n is not None:
            topics[tname] = n
    return topics


def _fleet_members(
    c: _Checker, mnode: yaml.Node, topics: dict[str, int], default: MemberSpec
) -> list[MemberSpec]:
    """`fleet.members`: a count of members like `default`, or a list of members whose
    unset keys are `default`'s."""
    members: list[MemberSpec] = []
    if isinstance(mnode, yaml.ScalarNode):
        n = c.typed(mnode, "fleet.members", "int")
        if n is not None and not 1 <= n <= 20:
            c.error(mnode, "fleet.members", "between 1 and 20 members")
        elif n is not None:
            members = [
                replace(
                    default,
                    name=f"m{i}",
                    assignors=list(default.assignors),
                    subscribe=list(default.subscribe),
                )
                for i in range(1, n + 1)
            ]
            if default.client == "java":
                _check_java(c, mnode, "fleet", default)
    elif isinstance(mnode, yaml.SequenceNode):
        for i, item in enumerate(mnode.value):
            members.append(_fleet_member(c, i, item, members, topics, default))
        if not members:
            c.error(mnode, "fleet.members", "expected at least one member")
    else:
        c.error(mnode, "fleet.members", "expected a count or a list of members")
    return members


def _fleet_member(
    c: _Checker,
    i: int,
    item: yaml.Node,
    before: list[MemberSpec],
    topics: dict[str, int],
    default: MemberSpec,
) -> MemberSpec:
    mk = c.mapping(item, f"fleet.members[{i}]", list(MEMBER_KEYS))
    mv = {k: c.typed(v, f"fleet.members[{i}].{k}", MEMBER_KEYS[k]) for k, (_, v) in mk.items()}
    mname = mv.get("name") or f"m{i + 1}"
    if not NAME.match(mname):
        c.error(item, f"fleet.members[{i}].name", f"{mname!r}: use letters, digits, . _ -")
    if any(m.name == mname for m in before):
        c.error(item, f"fleet.members[{i}].name", f"duplicate member name {mname!r}")
    for t in mv.get("subscribe") or []:
        if t not in topics:
            c.error(mk["subscribe"][1], f"fleet.members[{i}].subscribe", f"unknown topic {t!r}")
    if mv.get("pattern"):
        _check_regex(c, mk["pattern"][1], f"fleet.members[{i}].pattern", mv["pattern"])
    sub = mv.get("subscribe")
    mpat = mv.get("pattern")
    spec = MemberSpec(
        name=mname,
        static=default.static if mv.get("static") is None else bool(mv["static"]),
        assignors=mv.get("assignors") or list(default.assignors),
        subscribe=list(sub) if sub else ([] if mpat else default.subscribe),
        pattern=mpat if mpat else (None if sub else default.pattern),
        processing_ms=mv.get("processing_ms") or 0,
        session_timeout_ms=mv.get("session_timeout_ms"),
        protocol=mv.get("protocol") or default.protocol,
        client=mv.get("client") or default.client,
        remote_assignor=mv.get("remote_assignor") or default.remote_assignor,
        command=list(mv.get("command") or default.command),
    )
    _check_command(c, mk, f"fleet.members[{i}]", spec)
    if spec.remote_assignor and spec.protocol != "consumer" and "remote_assignor" in mk:
        c.error(mk["remote_assignor"][1], f"fleet.members[{i}].remote_assignor", _REMOTE_CLASSIC)
    if spec.client == "java":
        _check_java(c, item, f"fleet.members[{i}]", spec)
    return spec


def _check_command(
    c: _Checker,
    keys: dict[str, tuple[yaml.Node, yaml.Node]],
    path: str,
    spec: MemberSpec,
) -> None:
    """A command is for `client: command` only. A command member without a command gets
    `--app`'s (`with_app`; the run refuses one with neither)."""
    if spec.client != "command" and "command" in keys and spec.command:
        c.error(keys["command"][0], path, "command is for client: command members; add it")


_REMOTE_CLASSIC = (
    "the broker-side assignor of the consumer protocol; set protocol: consumer, or use "
    "assignors for a classic member"
)


def _check_java(c: _Checker, node: yaml.Node, path: str, spec: MemberSpec) -> None:
    """What Java's VerifiableConsumer cannot be asked to do: one topic, no pattern, no
    slow processing (it takes no control lines)."""
    if spec.pattern or len(spec.subscribe) != 1:
        c.error(
            node,
            path,
            "a java member (VerifiableConsumer) subscribes to exactly one topic, no pattern; "
            "give it subscribe: [one topic]",
        )
    if spec.processing_ms:
        c.error(node, path, "a java member (VerifiableConsumer) has no processing_ms")


def _step(
    c: _Checker, node: yaml.Node, path: str, names: list[str], topics: dict[str, int]
) -> Step | None:
    """One step; `names` and `topics` are updated with what the step adds."""
    action = _action_of(c, node, path)
    if action is None:
        return None
    spec = ACTIONS[action].args
    keys = c.mapping(node, path, [*STEP_KEYS, *spec])
    args: dict[str, Any] = {}
    for key, (kind, required) in spec.items():
        if key not in keys:
            if required:
                c.error(node, path, f"{action} needs {key!r}")
            continue
        v = _step_arg(c, keys[key][1], f"{path}.{key}", kind, names, topics)
        if v is not None:
            args[key] = v

    def error(key: str | None, message: str) -> None:
        if key is None:
            c.error(node, path, message)
        else:
            c.error(keys[key][1] if key in keys else node, f"{path}.{key}", message)

    ACTIONS[action].validate(args, StepCheck(names, topics, error))
    expect = Expect(line=node.start_mark.line + 1)
    if "expect" in keys:
        _expect(c, keys["expect"][1], f"{path}.expect", names, expect)
    step_name = action
    if "name" in keys:
        step_name = c.typed(keys["name"][1], f"{path}.name", "str") or action
    return Step(step_name, action, args, expect, line=node.start_mark.line + 1)


def _expect(c: _Checker, enode: yaml.Node, path: str, names: list[str], expect: Expect) -> None:
    """A step's `expect` mapping into `expect` (`path` is the step's `.expect`)."""
    ekeys = c.mapping(enode, path, list(EXPECT_KEYS))
    for key, (_k, v) in ekeys.items():
        val = c.typed(v, f"{path}.{key}", EXPECT_KEYS[key])
        if val is None:
            continue
        if key in ("no_revokes_for", "fenced"):
            for m in val:
                if m not in names:
                    c.error(v, f"{path}.{key}", f"unknown member {m!r}")
        setattr(expect, key, val)
    lo, hi = expect.min_rebalances, expect.max_rebalances
    if lo is not None and hi is not None and lo > hi:
        c.error(enode, path, f"min_rebalances {lo} > max_rebalances {hi}")


def _action_of(c: _Checker, node: yaml.Node, path: str) -> str | None:
    """The step's action, or None after reporting why there is none."""
    if not isinstance(node, yaml.MappingNode):
        c.error(node, path, f"expected a mapping with 'action', got {_kind(node)}")
        return None
    raw = {str(c.value(k)): (k, v) for k, v in node.value}
    action_entry = raw.get("action")
    if action_entry is None:
        c.error(node, path, f"missing key 'action' (one of {', '.join(ACTIONS)})")
        return None
    action = c.value(action_entry[1])
    if action not in ACTIONS:
        close = difflib.get_close_matches(str(action), list(ACTIONS), n=1)
        hint = (
            f"; did you mean {close[0]!r}?" if close else f"; expected one of {', '.join(ACTIONS)}"
        )
        c.error(action_entry[1], f"{path}.action", f"unknown action {action!r}{hint}")
        return None
    return str(action)


def _step_arg(
    c: _Checker, vnode: yaml.Node, path: str, kind: str, names: list[str], topics: dict[str, int]
) -> Any:
    """One argument's value, or None after reporting an error; members and topics must be
    the fleet's (or added by an earlier step)."""
    v = c.typed(vnode, path, kind)
    if v is None:
        return None
    if kind == "member" and v not in names:
        c.error(vnode, path, f"unknown member {v!r}; members: {', '.join(names)}")
        return None
    if kind == "members" and v != "all":
        for m in v:
            if m not in names:
                c.error(vnode, path, f"unknown member {m!r}; members: {', '.join(names)}")
    if kind == "topic" and v not in topics:
        c.error(vnode, path, f"unknown topic {v!r}; topics: {', '.join(topics) or '(none)'}")
        return None
    if kind == "topics":
        for t in v:
            if t not in topics:
                c.error(vnode, path, f"unknown topic {t!r}; topics: {', '.join(topics)}")
    return v
