"""Connection settings shared by every command: bootstrap, client properties, timeout.

Properties come in Java client form (`security.protocol`, `sasl.jaas.config`, ...) from
`--command-config` and `-X key=value`; `kafka_config()` translates them for kafka-python.
Secrets never leave this object except into the client config itself.
"""

from __future__ import annotations

import os
import re
import ssl
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
    "ssl.truststore.location": "ssl_cafile",  # PEM only (see kafka_config)
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.location": "ssl_certfile",  # PEM only: key and certificate chain
    "ssl.keystore.password": "ssl_password",
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
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Accepted and checked, with nothing to pass on to every kafka-python client: the member
# reads retry.backoff.max.ms (the consumer-protocol member's own retries; kafka-python has
# no such key) and auto.commit.interval.ms (a consumer's key only).
_CHECKED = (
    "ssl.truststore.type",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "retry.backoff.max.ms",
    "auto.commit.interval.ms",
)


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
            # The line is not echoed whole: it may hold a secret.
            raise UsageError(
                f"{origin}:{lineno}: expected key=value (a line of {len(raw.strip())} "
                "characters is neither); fix the line or remove it"
            )
        props[match.group(1)] = match.group(2)
    return props


def parse_overrides(items: list[str]) -> dict[str, str]:
    """Parse repeated `-X key=value` options."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            shown = item if not SECRET_KEY.search(item) else key.split(":")[0][:40] + "..."
            raise UsageError(f"-X {shown!r}: expected key=value, for example -X client.id=me")
        props[key.strip()] = value.strip()
    return props


_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_topic_name(name: str, what: str = "topic") -> None:
    """Kafka's topic name rule (Topic.validate), as a usage error naming the option."""
    if not _TOPIC.fullmatch(name) or name in (".", ".."):
        shown = name if len(name) <= 40 else name[:40] + f"... ({len(name)} characters)"
        raise UsageError(
            f"{what} {shown!r}: not a legal Kafka topic name; use 1 to 249 letters, digits, "
            "'.', '_' or '-'"
        )


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
        """kafka-python client settings (common to consumer, producer and admin).

        Raises UsageError, naming the property (never its value), for what kafka-python
        cannot do: JKS/PKCS12 stores, mechanisms other than PLAIN/SCRAM, and so on.
        """
        timeout_ms = int(self.timeout_s * 1000)
        cfg: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap.split(","),
            "request_timeout_ms": max(timeout_ms, 1000),
            # Every client (consumer, producer, admin) gives up bootstrapping in --timeout.
            "bootstrap_timeout_ms": max(timeout_ms, 1000),
        }
        props = self.properties
        _check_store_types(props)
        for key, value in props.items():
            _apply_property(cfg, key, value.strip())
        protocol = cfg.get("security_protocol", "PLAINTEXT")
        if protocol.startswith("SASL_"):
            _check_sasl(cfg, protocol)
        elif "sasl_mechanism" in cfg:
            raise UsageError(
                f"sasl.mechanism is set but security.protocol is {protocol}; "
                "set security.protocol=SASL_SSL or SASL_PLAINTEXT"
            )
        if protocol.endswith("SSL"):
            _check_ssl(cfg, props)
        return cfg

    @property
    def principal(self) -> str | None:
        """The Kafka principal these settings authenticate as, when known (SASL)."""
        protocol = self.properties.get("security.protocol", "PLAINTEXT").strip().upper()
        if not protocol.startswith("SASL_"):
            return None
        user = dict(_JAAS.findall(self.properties.get("sasl.jaas.config", ""))).get("username")
        user = user or self.properties.get("sasl.username")
        return f"User:{user}" if user else None

    def redacted(self) -> dict[str, Any]:
        return {"bootstrap": self.bootstrap, "properties": redact(self.properties)}


def _check_store_types(props: dict[str, str]) -> None:
    for kind in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(kind, "PEM").strip().upper() != "PEM":
            raise UsageError(
                f"{kind}={props[kind].strip()}: kgctl (kafka-python) reads PEM files only; "
                "convert the store (keytool -importkeystore -deststoretype PKCS12, then "
                "openssl pkcs12 -nodes) and set "
                f"{kind}=PEM"
            )


def _apply_property(cfg: dict[str, Any], key: str, value: str) -> None:
    """One Java client property into kafka-python's `cfg` (or a UsageError naming it)."""
    if key == "sasl.jaas.config":
        fields = dict(_JAAS.findall(value))
        module = value.split(None, 1)[0] if value else ""
        if not module.endswith(("ScramLoginModule", "PlainLoginModule")):
            raise UsageError(
                f"sasl.jaas.config: login module {module[:80]!r} is not supported; "
                "use org.apache.kafka.common.security.scram.ScramLoginModule or "
                '...plain.PlainLoginModule with username="..." password="..."'
            )
        if "username" in fields:
            cfg["sasl_plain_username"] = fields["username"]
        if "password" in fields:
            cfg["sasl_plain_password"] = fields["password"]
    elif key == "ssl.endpoint.identification.algorithm":
        cfg["ssl_check_hostname"] = value.lower() == "https"
    elif key == "security.protocol":
        if value.upper() not in _PROTOCOLS:
            raise UsageError(
                f"security.protocol={value[:40]}: expected one of {', '.join(_PROTOCOLS)}"
            )
        cfg["security_protocol"] = value.upper()
    elif key == "sasl.mechanism":
        if value.upper() not in _MECHANISMS:
            raise UsageError(
                f"sasl.mechanism={value[:40]}: kgctl supports {', '.join(_MECHANISMS)}"
            )
        cfg["sasl_mechanism"] = value.upper()
    elif key == "ssl.truststore.certificates":
        cfg["ssl_context"] = _inline_trust(value)
    elif key in _DIRECT or key.endswith(".ms") and key in _CHECKED:
        if key.endswith(".ms") and not value.isdigit():
            raise UsageError(f"{key}={value[:20]}: expected a whole number of milliseconds")
        target = _DIRECT.get(key)
        if target is not None:
            cfg[target] = int(value) if target.endswith("_ms") else value
    elif key not in ("bootstrap.servers", *_CHECKED):
        raise UsageError(
            f"client setting {key!r} is not supported by kgctl; "
            f"supported: {', '.join(sorted([*_DIRECT, *_CHECKED, 'sasl.jaas.config']))}"
        )


def _check_sasl(cfg: dict[str, Any], protocol: str) -> None:
    cfg.setdefault("sasl_mechanism", "GSSAPI")
    if cfg["sasl_mechanism"] not in _MECHANISMS:
        raise UsageError(
            f"security.protocol={protocol} needs sasl.mechanism (one of "
            f"{', '.join(_MECHANISMS)}); GSSAPI/Kerberos is not supported"
        )
    if "sasl_plain_username" not in cfg or "sasl_plain_password" not in cfg:
        raise UsageError(
            f"sasl.mechanism={cfg['sasl_mechanism']} needs a user and password: set "
            'sasl.jaas.config=... required username="..." password="...";'
        )


def _check_ssl(cfg: dict[str, Any], props: dict[str, str]) -> None:
    # Java's default ssl.endpoint.identification.algorithm is https.
    cfg.setdefault("ssl_check_hostname", True)
    for target in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = cfg.get(target)
        if path and not _is_pem(path):
            java = next(k for k, v in _DIRECT.items() if v == target and k in props)
            raise UsageError(
                f"{java}={path}: not a readable PEM file; kgctl reads PEM only "
                "(with ssl.truststore.type=PEM), fix the path or convert the file"
            )
    if "ssl_context" in cfg:
        cfg["ssl_context"].check_hostname = cfg["ssl_check_hostname"]


def _is_pem(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"-----BEGIN " in handle.read(65536)
    except OSError:
        return False


def _inline_trust(value: str) -> Any:
    try:
        context = ssl.create_default_context(cadata=value.replace("\\n", "\n"))
    except (ssl.SSLError, ValueError):
        raise UsageError(
            "ssl.truststore.certificates: not PEM certificates; give the CA certificates "
            "in PEM, or a file with ssl.truststore.location"
        ) from None
    return context
