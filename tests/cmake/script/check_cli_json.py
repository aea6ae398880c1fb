"""Checks the JSON that `int8attn run --json FILE` wrote (CTest cli_json): it parses, has the
run's description and one result per mode with the metrics, the bar and meets_bar."""
import json
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
for key in ("version", "backend", "device", "shape", "dtype", "layout", "inputs", "results"):
    assert key in d, f"missing {key!r}"
assert d["shape"]["D"] == 40 and d["shape"]["Hkv"] == 2, d["shape"]
modes = [r["mode"] for r in d["results"]]
assert modes == ["EXACT", "BALANCED", "FAST"], modes
for r in d["results"]:
    assert 0.99 < r["cos"] <= 1.0 and r["rel_l1"] >= 0.0, r
    assert r["rel_l1"] <= r["bar_max_rel_l1"] and r["meets_bar"] is True, r
print("cli json: ok,", ", ".join(f"{r['mode']} {r['rel_l1']:.3g}" for r in d["results"]))
