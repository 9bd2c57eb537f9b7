"""Apache Kafka's VerifiableConsumer (artifact kafka-tools) fetched with Maven, cached.

`mvn dependency:copy-dependencies` on bench/pom.xml into
`~/.cache/kgctl/bench-tools-<version>/libs` (or `$KGCTL_CACHE_DIR`), once. Jars are
never committed.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from kgctl.broker.provision import cache_dir

KAFKA_TOOLS_VERSION = "4.4.0"
POM = Path(__file__).with_name("pom.xml")


def tools_libs(version: str = KAFKA_TOOLS_VERSION, say=print) -> Path:
    """The directory holding kafka-tools and its runtime jars (fetched on first use)."""
    target = cache_dir() / f"bench-tools-{version}"
    libs = target / "libs"
    if any(libs.glob("kafka-tools-*.jar")):
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise SystemExit("bench: mvn not found; it is needed once to fetch kafka-tools")
    target.parent.mkdir(parents=True, exist_ok=True)
    say(f"bench: fetching org.apache.kafka:kafka-tools:{version} with Maven into {libs}")
    with tempfile.TemporaryDirectory(prefix="kgctl-bench-mvn-", dir=target.parent) as work:
        staged = Path(work) / "libs"
        done = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-Dkafka.version={version}",
                f"-DoutputDirectory={staged}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not any(staged.glob("kafka-tools-*.jar")):
            raise SystemExit(f"bench: Maven failed: {(done.stdout + done.stderr)[-500:]}")
        target.mkdir(parents=True, exist_ok=True)
        if libs.exists():
            shutil.rmtree(libs)
        staged.rename(libs)
    return libs
