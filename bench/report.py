"""`python -m bench.report RESULTS.json`: the markdown tables of docs/benchmarks.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.0f}"


def latency_table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| scenario | N | members | ok/reps | trigger → complete, median ms (all) | "
        "vs Java | rebalance start → complete, median ms | rebalances | "
        "time without partitions, worst member, median ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = f"1→{r['n']}" if r["scenario"] == "scale-out" else str(r["n"])
        every = ", ".join(str(x) for x in r["latency_all_ms"])
        out.append(
            f"| {r['scenario']} | {n} | {r['kind']} | {r['ok']}/{r['reps']} | "
            f"{_ms(r['latency_ms'])} ({every}) | {r.get('ratio_vs_java', '-')} | "
            f"{_ms(r['broker_rebalance_ms'])} | {r['rebalances']} | "
            f"{_ms(r['unassigned_max_ms'])} |"
        )
    return "\n".join(out)


def broker_ratio_table(rows: list[dict[str, Any]], key: str = "last_rebalance_ms") -> str:
    by = {(r["scenario"], r["n"], r["kind"]): r for r in rows}
    out = [
        "| scenario | N | kgctl | Java | kafka-python | kgctl / Java | kgctl / kafka-python |",
        "|---|---|---|---|---|---|---|",
    ]
    for scenario, n in sorted({(r["scenario"], r["n"]) for r in rows}, key=lambda k: k):
        vals = {k: (by.get((scenario, n, k)) or {}).get(key) for k in ("kgctl", "java", "kp")}
        kg, jv, kp = vals["kgctl"], vals["java"], vals["kp"]
        out.append(
            f"| {scenario} | {n} | {_ms(kg)} | {_ms(jv)} | {_ms(kp)} | "
            f"{(f'{kg / jv:.2f}' if kg and jv else '-')} | "
            f"{(f'{kg / kp:.2f}' if kg and kp else '-')} |"
        )
    return "\n".join(out)


def density_table(res: dict[str, Any]) -> str:
    out = [
        "| members | processes | ok | ramp s, then complete after s | held s | rebalances "
        "during hold | dead | PSS per member | PSS, all | threads per member | CPU per "
        "member, % of a core | CPU, all members | load average, hold start → end | "
        "memory available after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for st in res["steps"]:
        if "hold_s" not in st:
            out.append(f"| {st['members']} | - | no | {st.get('ramp_s', '-')} | - | - | - | - "
                       f"| - | - | - | - | - | {st.get('error', '')} |")  # fmt: skip
            continue
        load = " → ".join(str(x) for x in st["loadavg_1m_start_end"])
        out.append(
            f"| {st['members']} | {st['processes']} | {'yes' if st['ok'] else 'no'} | "
            f"{st['ramp_s']}, {st.get('complete_after_ramp_s', '-')} | {st['hold_s']} | "
            f"{st['rebalances_during_hold']} | {st['dead_members']} | "
            f"{st['pss_mb_per_member']} MB | {st['pss_gb_all']} GB | "
            f"{st['threads_per_member']} | {st['cpu_pct_per_member']} | "
            f"{st['cpu_pct_all_members']} % | {load} | {st['mem_available_gb_end']} GB |"
        )
    return "\n".join(out)


def phases_table(rows: list[dict[str, Any]]) -> str:
    """`--through-proxy`: each phase of trigger -> complete (bench/growth_phases.py)."""
    names = list(rows[0]["phases_ms"])
    out = [
        "| scenario | N | members | trigger → complete | " + " | ".join(names) + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    for r in rows:
        phases = " | ".join(_ms(r["phases_ms"][k]) for k in names)
        out.append(
            f"| {r['scenario']} | {r['n']} | {r['kind']} | {_ms(r['latency_ms'])} | {phases} |"
        )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    res = json.loads(Path(argv[0]).read_text())
    print("## machine\n")
    print("```\n" + json.dumps(res["machine"], indent=1) + "\n```\n")
    if "latency" in res:
        print("## latency\n")
        print(latency_table(res["latency"]) + "\n")
        for key in ("latency_ms", "broker_rebalance_ms", "last_rebalance_ms", "unassigned_max_ms"):
            print(f"### {key}, medians\n")
            print(broker_ratio_table(res["latency"], key) + "\n")
        delays = [d for r in res["latency"] if r["kind"] == "kgctl" for d in r["rejoin_delay_ms"]]
        if delays:
            delays.sort()
            print(
                f"kgctl rejoin delays (PreparingRebalance → JoinGroupSent): n={len(delays)}, "
                f"median {delays[len(delays) // 2]} ms, max {delays[-1]} ms, "
                f"all: {delays}\n"
            )
        phased = [r for r in res["latency"] if r.get("phases_ms")]
        if phased:
            print("### growth through the proxy: phases, medians (ms)\n")
            print(phases_table(phased) + "\n")
    if "density" in res and "steps" in res["density"]:
        print("## density\n\n" + density_table(res["density"]) + "\n")
    for key in ("fold", "view", "watch", "trace", "startup", "density"):
        if key in res:
            print(f"## {key}\n\n```\n{json.dumps(res[key], indent=1)}\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
