"""`python -m bench.showdown --bootstrap HOST:PORT`: the protocol showdown, raw JSON.

Runs the built-in `protocol-showdown` scenario (kgctl/chaos/scenarios/) once on the
classic protocol and once on the consumer protocol (KIP-848), one after the other, on
the cluster given (kgctl's local broker: its consumer groups have a 10 s session and a
500 ms heartbeat interval, the same as the scenario's classic members). Writes every
step's measure per protocol, both runs' journals, the cluster's group settings and the
machine with its load average at the start and the end of each run. Method and numbers:
docs/benchmarks.md, section "Classic versus consumer protocol".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.run import machine
from kgctl.chaos.runner import RunOptions
from kgctl.chaos.scenarios import builtin
from kgctl.chaos.showdown import compare, run_showdown
from kgctl.model.events import Event
from kgctl.settings import ClientSettings


def _progress(event: Event) -> None:
    """One line per step on stderr, so a long run shows where it is."""
    if event.type in ("ScenarioStarted", "StepFinished", "ScenarioFinished"):
        what = event.data.get("step") or event.data.get("scenario") or ""
        extra = event.data.get("verdict") or event.data.get("status") or ""
        load = os.getloadavg()[0]
        print(f"{time.strftime('%H:%M:%S')} {event.type} {what} {extra} load {load:.1f}",
              file=sys.stderr, flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--scenario", default="protocol-showdown")
    parser.add_argument("--out", type=Path, default=Path("bench/results/showdown.json"))
    args = parser.parse_args(argv)
    sc = builtin(args.scenario) if not args.scenario.endswith(".yaml") else None
    if sc is None:
        from kgctl.chaos.scenario import load_scenario

        sc = load_scenario(args.scenario)
    settings = ClientSettings(bootstrap=args.bootstrap)
    started = time.time()
    loads: list[dict[str, Any]] = [{"at": "start", "loadavg": os.getloadavg()}]

    def on_event(event: Event) -> None:
        _progress(event)
        if event.type in ("ScenarioStarted", "ScenarioFinished"):
            loads.append({"at": event.type, "ts_ms": event.ts_ms, "loadavg": os.getloadavg()})

    journals = run_showdown(sc, settings, options=RunOptions(), on_event=on_event)
    loads.append({"at": "end", "loadavg": os.getloadavg()})
    rows = compare(journals)
    result = {
        "scenario": sc.name,
        "bootstrap": args.bootstrap,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "machine": machine(),
        "load": loads,
        "rows": [r.to_dict() for r in rows],
        "verdicts": {p: j.verdict for p, j in journals.items()},
        "journals": {p: j.to_dict() for p, j in journals.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps({"rows": result["rows"], "verdicts": result["verdicts"],
                      "load": loads}, indent=1, default=str))  # fmt: skip
    return 0 if all(j.verdict == "passed" for j in journals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
