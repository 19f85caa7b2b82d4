"""The RoPE targets of docs/performance.md from `posenc bench --sections rope` JSON files, as a
markdown table: python benchmarks/rope_targets.py run-1thread.json run-2threads.json ...

Per file and shape: the floors (copy, and the clone over it), `Rope.rotate` and `kernels.rope(out=)`
over the copy floor beside the targets (at most 1.2x and 1.1x), how many times slower transformers
and the fastest peer are, the page faults of a clone, and the other processes' CPU share.
"""

import argparse
import json

from posenc.bench.report import rope_ratios


def _f(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def table(paths: list[str]) -> str:
    lines = [
        "| threads | L | dtype | layout | copy floor ms | clone / copy | Rope.rotate / copy (≤ 1.2) | out= / copy (≤ 1.1) "
        "| transformers x | fastest peer x | clone faults / call | other CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        with open(path) as handle:
            result = json.load(handle)
        rows = [r for r in result["rope"] if r.get("kind") == "steady"]
        for ratios in rope_ratios(rows):
            key = (ratios["L"], ratios["dtype"], ratios["layout"])
            mine = {r["case"]: r for r in rows if (r["L"], r["dtype"], r["layout"]) == key}
            floor = mine["floor"]
            rotate = mine.get("posenc Rope.rotate", {})
            lines.append(
                f"| {result['meta']['num_threads']} | {key[0]} | {key[1]} | {key[2]} | {floor['median_ms']:.2f} | "
                f"{_f(ratios['clone_x_floor'])} | {_f(ratios['rotate_x_floor'])} | {_f(ratios['out_x_floor'])} "
                f"({ratios['backend']}) | {_f(ratios['transformers_x_rotate'], 1)} | "
                f"{_f(ratios['fastest_peer_x_rotate'], 1)} | "
                f"{_f(mine['floor, new tensors'].get('page_faults_per_call'), 0)} | "
                f"{_f(rotate.get('other_cpu'))} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="+", help="JSON files written by posenc bench --sections rope --json FILE")
    print(table(p.parse_args().json))
