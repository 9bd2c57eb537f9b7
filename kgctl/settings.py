"""Connection settings shared by every command: bootstrap, client properties, timeout.

Properties come in Java client form (`security.protocol`, `sasl.jaas.config`, ...) from
`--command-config` and `-X key=value`; `kafka_config()` translates them for kafka-python.
Secrets never leave this object except into the client config itself.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgctl.errors import UsageError

DEFAULT_TIMEOUT_S = 30.0
SECRET_KEY = re.compile(r"(password|secret|jaas|key\b|keystore\.key|token)", re.I)

# Java property -> kafka-python config key.
_DIRECT = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "ssl.truststore.location": "ssl_cafile",  # PEM only (see _translate)
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
}
_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_properties(text: str, origin: str) -> dict[str, str]:
    """Parse Java .properties text (key=value or key: value, # and ! comments)."""
    props: dict[str, str] = {}
    pending = ""
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if not match:
            raise UsageError(
                f"{origin}:{lineno}: expected key=value, got {raw.strip()[:40]!r}; "
                "fix the line or remove it"
            )
        props[match.group(1)] = match.group(2)
    return props


def parse_overrides(items: list[str]) -> dict[str, str]:
    """Parse repeated `-X key=value` options."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-X {item!r}: expected key=value, for example -X client.id=me")
        props[key.strip()] = value.strip()
    return props


def redact(props: dict[str, str]) -> dict[str, str]:
    """The same properties with every secret value replaced, safe to print or record."""
    return {k: ("<redacted>" if SECRET_KEY.search(k) else v) for k, v in props.items()}


@dataclass
class ClientSettings:
    """How to reach the cluster; built once by the CLI and handed down."""

    bootstrap: str = "127.0.0.1:9092"
    properties: dict[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_options(
        cls,
        bootstrap: str | None,
        command_config: Path | None = None,
        overrides: list[str] | None = None,
        timeout_s: float | None = None,
    ) -> ClientSettings:
        props: dict[str, str] = {}
        if command_config is not None:
            try:
                text = Path(command_config).read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(
                    f"--command-config {command_config}: cannot read it ({exc.strerror}); "
                    "pass a readable Java properties file"
                ) from None
            except UnicodeDecodeError:
                raise UsageError(
                    f"--command-config {command_config}: not a text file; "
                    "pass a Java properties file"
                ) from None
            props.update(parse_properties(text, str(command_config)))
        props.update(parse_overrides(overrides or []))
        timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
        if not 0 < timeout <= 3600:
            raise UsageError(f"--timeout {timeout_s}: must be more than 0 and at most 3600 seconds")
        server = bootstrap or props.pop("bootstrap.servers", None)
        server = server or os.environ.get("KGCTL_BOOTSTRAP_SERVER") or "127.0.0.1:9092"
        for part in server.split(","):
            host, sep, port = part.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise UsageError(
                    f"--bootstrap-server {server!r}: expected host:port[,host:port], "
                    "for example 127.0.0.1:9092"
                )
        return cls(bootstrap=server, properties=props, timeout_s=timeout)

    def kafka_config(self) -> dict[str, Any]:
        """kafka-python client settings (common to consumer, producer and admin)."""
        timeout_ms = int(self.timeout_s * 1000)
        cfg: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap.split(","),
            "request_timeout_ms": max(timeout_ms, 1000),
        }
        for key, value in self.properties.items():
            if key == "sasl.jaas.config":
                fields = dict(_JAAS.findall(value))
                if "username" in fields:
                    cfg["sasl_plain_username"] = fields["username"]
                if "password" in fields:
                    cfg["sasl_plain_password"] = fields["password"]
            elif key == "ssl.endpoint.identification.algorithm":
                cfg["ssl_check_hostname"] = value.strip().lower() == "https"
            elif key in _DIRECT:
                target = _DIRECT[key]
                cfg[target] = int(value) if target.endswith("_ms") else value
            elif key in ("bootstrap.servers",):
                continue
            else:
                raise UsageError(
                    f"client setting {key!r} is not supported by kgctl; "
                    f"supported: {', '.join(sorted([*_DIRECT, 'sasl.jaas.config']))}"
                )
        if cfg.get("security_protocol", "PLAINTEXT").upper().endswith("SSL"):
            cfg.setdefault("ssl_check_hostname", False)
        return cfg

    def redacted(self) -> dict[str, Any]:
        return {"bootstrap": self.bootstrap, "properties": redact(self.properties)}
