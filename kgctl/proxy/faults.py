"""Fault rules for `kgctl proxy`: parsing `API:EFFECT[:SELECTOR]...` and deciding, for
each request, which rule (if any) applies to it.

Pure: no sockets and no clock of its own (callers pass `now`, in seconds). The proxy
asks `FaultBook.decide` once per request frame and carries out the effect.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from kgctl.adapters import wire
from kgctl.errors import UsageError

EFFECTS = ("error", "delay", "drop", "hang", "blackhole")
SELECTORS = ("client", "group", "count", "after", "for")
# Never faulted: an ApiVersions or SASL exchange decides whether a connection exists at
# all, and the SASL frames are not decoded by design.
_UNFAULTABLE = frozenset({wire.API_VERSIONS, wire.SASL_HANDSHAKE, wire.SASL_AUTHENTICATE})
TRACED_NAMES = tuple(wire.api_name(k) for k in sorted(wire.TRACED))


def parse_version_cap(text: str) -> tuple[int, int]:
    """`API=MAX` (`--cap-version`): the highest version of API the proxy lets clients
    see in ApiVersions, as a broker that serves no more would say."""
    api, sep, value = text.strip().partition("=")
    key = wire.API_KEYS.get(api.strip())
    if not sep or key is None or not value.strip().isdigit():
        raise UsageError(
            f"--cap-version {text!r}: expected API=MAX with a Kafka API name, for example "
            "ConsumerGroupHeartbeat=0"
        )
    if key in _UNFAULTABLE:
        raise UsageError(f"--cap-version {text!r}: {api.strip()} cannot be capped")
    return key, int(value)


class RuleError(UsageError):
    """A fault rule that cannot be parsed or cannot apply."""


@dataclass
class Rule:
    """One fault rule and how often it has matched so far."""

    text: str
    api: str
    api_key: int
    effect: str
    error: str | None = None
    error_code: int | None = None
    delay_ms: int = 0
    client: str | None = None
    group: str | None = None
    count: int | None = None
    after: int = 0
    for_s: float | None = None
    id: str = ""
    client_exact: bool = False  # client= names the whole client id (set by chaos)
    added_at: float = 0.0
    matched: int = 0  # requests that matched the API and selectors
    applied: int = 0  # of those, the ones the effect was applied to

    def selects(self, api_key: int, client_id: str, group: str | None) -> bool:
        if api_key != self.api_key:
            return False
        if self.client is not None:
            if self.client_exact and client_id != self.client:
                return False
            if self.client not in client_id:
                return False
        return self.group is None or self.group == group

    def active(self, now: float) -> bool:
        if self.for_s is not None and now - self.added_at >= self.for_s:
            return False
        return self.count is None or self.applied < self.count

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "rule": self.text, "api": self.api}
        out["effect"] = self.effect
        for name in ("error", "client", "group", "count", "for_s"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.effect == "delay":
            out["delay_ms"] = self.delay_ms
        if self.after:
            out["after"] = self.after
        return out


def _number(name: str, value: str, text: str, *, integer: bool) -> float:
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise RuleError(f"fault rule {text!r}: {name}= needs {kind}, got {value!r}") from None
    if number < 0 or not math.isfinite(number):
        raise RuleError(f"fault rule {text!r}: {name}= must not be negative")
    return number


def parse_rule(text: str) -> Rule:
    """One rule from `API:EFFECT[:SELECTOR]...`; RuleError (one line) when invalid."""
    parts = [p.strip() for p in text.strip().split(":")]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise RuleError(
            f"fault rule {text!r}: expected API:EFFECT[:SELECTOR]..., for example "
            "'JoinGroup:error=NOT_COORDINATOR:count=1'"
        )
    api = parts[0]
    key = wire.API_KEYS.get(api)
    if key is None:
        raise RuleError(
            f"fault rule {text!r}: unknown API {api!r}; traced APIs: {', '.join(TRACED_NAMES)} "
            "(or any Kafka API name, such as Fetch, Produce, Metadata)"
        )
    if key in _UNFAULTABLE:
        raise RuleError(f"fault rule {text!r}: {api} cannot be faulted (connection set-up)")
    name, _, value = parts[1].partition("=")
    if name not in EFFECTS:
        raise RuleError(
            f"fault rule {text!r}: unknown effect {name!r}; valid: {', '.join(EFFECTS)}"
        )
    rule = Rule(text=text.strip(), api=api, api_key=key, effect=name)
    _set_effect(rule, text, value)
    for part in parts[2:]:
        _set_selector(rule, text, part)
    return rule


def _set_effect(rule: Rule, text: str, value: str) -> None:
    """The effect's value (an error name, a delay), checked against the rule's API."""
    api, name = rule.api, rule.effect
    if name == "error":
        valid = wire.API_ERRORS.get(api)
        if valid is None:
            raise RuleError(
                f"fault rule {text!r}: error= applies only to {', '.join(TRACED_NAMES)}; "
                f"for {api} use delay, drop, hang or blackhole"
            )
        if value not in wire.ERROR_CODES:
            raise RuleError(
                f"fault rule {text!r}: unknown error {value!r}; {api} defines: {', '.join(valid)}"
            )
        if value not in valid:
            raise RuleError(
                f"fault rule {text!r}: {api} does not answer {value}; "
                f"it defines: {', '.join(valid)}"
            )
        rule.error, rule.error_code = value, wire.ERROR_CODES[value]
    elif name == "delay":
        if not value:
            raise RuleError(f"fault rule {text!r}: delay= needs milliseconds, e.g. delay=500")
        rule.delay_ms = int(_number("delay", value, text, integer=True))
    elif value:
        raise RuleError(f"fault rule {text!r}: {name} takes no value")


def _set_selector(rule: Rule, text: str, part: str) -> None:
    """One `SELECTOR=VALUE` of a rule."""
    sel, eq, value = part.partition("=")
    if sel not in SELECTORS:
        raise RuleError(
            f"fault rule {text!r}: unknown selector {sel!r}; valid: "
            + ", ".join(f"{s}=" for s in SELECTORS)
        )
    if not eq or not value:
        raise RuleError(f"fault rule {text!r}: {sel}= needs a value")
    if sel == "client":
        rule.client = value
    elif sel == "group":
        if rule.api_key not in wire.TRACED:
            raise RuleError(
                f"fault rule {text!r}: group= applies only to {', '.join(TRACED_NAMES)} "
                f"(the proxy does not decode {rule.api}); use client= instead"
            )
        rule.group = value
    elif sel == "count":
        rule.count = int(_number(sel, value, text, integer=True))
    elif sel == "after":
        rule.after = int(_number(sel, value, text, integer=True))
    else:
        rule.for_s = _number(sel, value, text, integer=False)


@dataclass
class FaultBook:
    """The rules in force, in the order they were added; the first that applies wins."""

    rules: list[Rule] = field(default_factory=list)
    _next: int = 1

    def add(self, rule: Rule | str, now: float) -> Rule:
        if isinstance(rule, str):
            rule = parse_rule(rule)
        rule.id = rule.id or f"r{self._next}"
        self._next += 1
        rule.added_at = now
        self.rules.append(rule)
        return rule

    def remove(self, rule_id: str) -> list[Rule]:
        """Remove every rule with this id (chaos may give several the same); the removed."""
        gone = [r for r in self.rules if r.id == rule_id]
        self.rules = [r for r in self.rules if r.id != rule_id]
        return gone

    def clear(self) -> list[Rule]:
        gone, self.rules = self.rules, []
        return gone

    def decide(self, now: float, api_key: int, client_id: str, group: str | None) -> Rule | None:
        """The rule to apply to this request, counting the match; None to forward it."""
        for rule in self.rules:
            if not rule.active(now) or not rule.selects(api_key, client_id, group):
                continue
            rule.matched += 1
            if rule.matched <= rule.after:
                continue
            rule.applied += 1
            return rule
        return None

    def expired(self, now: float) -> list[Rule]:
        """Remove and return the rules that can never apply again."""
        done = [r for r in self.rules if not r.active(now)]
        self.rules = [r for r in self.rules if r.active(now)]
        return done


def parse_control(line: str) -> tuple[str, Any]:
    """One stdin control line: {"op": "add", "rule": "..."}, {"op": "remove", "id": "r1"},
    {"op": "clear"} or {"op": "list"}. Returns (op, argument); RuleError when invalid."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RuleError(f"control line is not JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise RuleError("control line must be a JSON object with an op")
    op = raw.get("op")
    if op == "add":
        text = raw.get("rule")
        if not isinstance(text, str):
            raise RuleError('add needs "rule": "API:EFFECT[:SELECTOR]..."')
        return op, parse_rule(text)
    if op == "remove":
        rule_id = raw.get("id")
        if not isinstance(rule_id, str):
            raise RuleError('remove needs "id": the rule id FaultRuleAdded gave')
        return op, rule_id
    if op in ("clear", "list"):
        return op, None
    raise RuleError(f"unknown op {op!r}; valid: add, remove, clear, list")
