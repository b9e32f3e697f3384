"""The counterfactual of the decision benchmark (issue 45): what the agent
predicts each static setting would take, against what each took.

A run whose settings include "observe" runs each workload once per
repetition under the device's defaults with the agent in Observe mode. Its
metrics are read when a window has closed after the workload's
preparation and again after its end (Agent.after_window), so that the
difference holds the windows of that workload alone:
shadowtune_agent_predicted_seconds_total{candidate} is the measure the
decision compares for each candidate, summed over the evaluated windows,
and the ratio of a candidate's sum to the current setting's is the
predicted time ratio of that candidate for the workload. The same
workload's wall time under each static setting, against its wall time
under the defaults, is the measured ratio. section() tabulates both, the
error in points, and whether the sign is right; svg() plots them.
Everything here is a pure function of the record.
"""
import statistics as st

PRED = "shadowtune_agent_predicted_seconds_total"
REAL = "shadowtune_agent_real_service_seconds_total"
EVALS = "shadowtune_agent_evaluation_duration_seconds_count"
SKIPS = "shadowtune_agent_windows_skipped_total"
# issue 45's bars: the sign right wherever the measured difference
# exceeds SIGN_PCT, and the mean absolute error at most MAE_POINTS.
SIGN_PCT = 5.0
MAE_POINTS = 5.0
# the plot's range of ratios (svg)
LO, HI = 0.5, 1.5


def windows(m, dev):
    """The windows of device dev that one scrape (parse_metrics' form)
    counts: evaluated, and skipped for any reason."""
    out = {"windows": 0, "skipped": 0}
    for (name, labels), v in m.items():
        if ("device", dev) not in labels:
            continue
        if name == EVALS:
            out["windows"] += int(round(v))
        elif name == SKIPS:
            out["skipped"] += int(round(v))
    return out


def delta(before, after, dev):
    """What the agent's counters of device dev gained between two scrapes
    (parse_metrics' form): per candidate predicted seconds, measured
    service seconds, windows evaluated and skipped."""
    out = {"predicted_s": {}, "real_s": 0.0}
    for (name, labels), v in after.items():
        lab = dict(labels)
        if lab.get("device") != dev:
            continue
        if name == PRED:
            out["predicted_s"][lab["candidate"]] = round(v - before.get((name, labels), 0.0), 6)
        elif name == REAL:
            out["real_s"] = round(v - before.get((name, labels), 0.0), 6)
    w0, w1 = windows(before, dev), windows(after, dev)
    out.update({k: w1[k] - w0[k] for k in w1})
    return out


def rows(rec):
    """One row per (workload, static setting other than the defaults):
    the measured ratio (median wall time under the setting ÷ under the
    defaults), the predicted one (the observed repetitions' summed
    predictions for the setting's scheduler ÷ the current scheduler's;
    None for a setting the agent does not predict: another read_ahead_kb),
    the error in points, and whether the sign is right."""
    default = rec.get("default_setting")
    ms = rec.get("measurements", [])
    if not default or not any(m["setting"] == "observe" for m in ms):
        return []
    dsched, dra = default.split("/")
    wall = {}
    pred = {}
    for m in ms:
        if m["setting"] == "observe":
            for c, v in (m.get("counterfactual") or {}).get("predicted_s", {}).items():
                pred.setdefault(m["workload"], {}).setdefault(c, 0.0)
                pred[m["workload"]][c] += v
        elif "/" in m["setting"]:
            wall.setdefault((m["workload"], m["setting"]), []).append(m["wall_s"])
    out = []
    for w in rec["plan"]["workloads"]:
        base = wall.get((w, default))
        if not base:
            continue
        for s in rec.get("settings", []):
            if s == default or "/" not in s or (w, s) not in wall:
                continue
            sched, ra = s.split("/")
            meas = st.median(wall[(w, s)]) / st.median(base)
            p = pred.get(w, {})
            pr = None
            if ra == dra and p.get(dsched, 0) > 0 and sched in p:
                pr = p[sched] / p[dsched]
            out.append(row(w, s, meas, pr))
    return out


def row(w, s, meas, pr):
    r = {"workload": w, "setting": s, "measured": meas, "predicted": pr, "error": None, "judged": False,
         "sign_right": None}
    if pr is None:
        return r
    r["error"] = abs(pr - meas) * 100
    r["judged"] = abs(meas - 1) * 100 > SIGN_PCT
    if r["judged"]:
        r["sign_right"] = (pr - 1) * (meas - 1) > 0
    return r


def summary(rs):
    """The bars over the predicted rows: mean absolute error (points),
    the rows whose measured difference exceeds SIGN_PCT and how many of
    them have the sign right."""
    pr = [r for r in rs if r["predicted"] is not None]
    judged = [r for r in pr if r["judged"]]
    mae = st.mean(r["error"] for r in pr) if pr else None
    return {"predicted": len(pr), "unpredicted": len(rs) - len(pr), "mae": mae, "judged": len(judged),
            "sign_right": sum(1 for r in judged if r["sign_right"]),
            "identical": sum(1 for r in pr if r["predicted"] == 1.0)}


def section(rec, svg_name=None):
    """The report's counterfactual section (markdown lines); [] for a run
    without the observe setting."""
    rs = rows(rec)
    if not rs:
        return []
    sm = summary(rs)
    obs = [m for m in rec["measurements"] if m["setting"] == "observe"]
    wins = sum((m.get("counterfactual") or {}).get("windows", 0) for m in obs)
    skips = sum((m.get("counterfactual") or {}).get("skipped", 0) for m in obs)
    L = ["## Counterfactual: the agent's predicted ratio against the measured one", "",
         f"Each workload ran once per repetition under the defaults ({rec['default_setting']}) with the agent "
         f"in Observe mode ({wins} windows evaluated, {skips} skipped over {len(obs)} workload runs). "
         "Predicted: the summed `shadowtune_agent_predicted_seconds_total` of the setting's scheduler over "
         "the current one's, over that workload's windows. Measured: the median wall time under the setting "
         "over the median under the defaults. Error: |predicted − measured| in points. The sign is judged "
         f"where the measured difference exceeds {SIGN_PCT:g} %. A setting of another `read_ahead_kb` is "
         "not predicted by these counters (the read-ahead road costs depths apart).", ""]
    if svg_name:
        L += [f"![predicted against measured ratio]({svg_name})", ""]
    L += ["| workload | setting | measured | predicted | error (points) | sign |", "|---|---|---:|---:|---:|---|"]
    for r in rs:
        if r["predicted"] is None:
            L.append(f"| {r['workload']} | {r['setting']} | {r['measured']:.3f} | not predicted | | |")
            continue
        sign = ("right" if r["sign_right"] else "**wrong**") if r["judged"] else "(within 5 %)"
        L.append(f"| {r['workload']} | {r['setting']} | {r['measured']:.3f} | {r['predicted']:.3f} | "
                 f"{r['error']:.1f} | {sign} |")
    L.append("")
    if sm["predicted"]:
        ok_sign = sm["sign_right"] == sm["judged"]
        ok_mae = sm["mae"] <= MAE_POINTS
        L += [f"- **Sign** where the measured difference exceeds {SIGN_PCT:g} %: right in {sm['sign_right']} "
              f"of {sm['judged']}: **{'PASS' if ok_sign else 'FAIL'}**.",
              f"- **Mean absolute error** over {sm['predicted']} predicted pairs: {sm['mae']:.1f} points "
              f"(bar ≤ {MAE_POINTS:g}): **{'PASS' if ok_mae else 'FAIL'}**.",
              f"- Predicted exactly 1.000 (no difference): {sm['identical']} of {sm['predicted']}; "
              f"not predicted (other read_ahead_kb): {sm['unpredicted']}.", ""]
    return L


def svg(rec):
    """An SVG scatter plot of predicted (x) against measured (y) ratio
    over [LO, HI], the diagonal drawn; a ratio outside is drawn hollow at
    the edge and labelled with its value. None for a run without
    predictions."""
    pts = [r for r in rows(rec) if r["predicted"] is not None]
    if not pts:
        return None
    W, P = 480, 50

    def x(v):
        return P + (min(max(v, LO), HI) - LO) / (HI - LO) * (W - 2 * P)

    def y(v):
        return W - P - (min(max(v, LO), HI) - LO) / (HI - LO) * (W - 2 * P)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{W}" viewBox="0 0 {W} {W}" '
         'font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{W}" fill="white"/>',
         f'<line x1="{x(LO)}" y1="{y(LO)}" x2="{x(HI)}" y2="{y(HI)}" stroke="#999" stroke-dasharray="4 3"/>',
         f'<line x1="{x(LO)}" y1="{y(LO)}" x2="{x(HI)}" y2="{y(LO)}" stroke="black"/>',
         f'<line x1="{x(LO)}" y1="{y(LO)}" x2="{x(LO)}" y2="{y(HI)}" stroke="black"/>',
         f'<line x1="{x(1)}" y1="{y(LO)}" x2="{x(1)}" y2="{y(HI)}" stroke="#ddd"/>',
         f'<line x1="{x(LO)}" y1="{y(1)}" x2="{x(HI)}" y2="{y(1)}" stroke="#ddd"/>']
    for k in range(11):
        t = LO + k * (HI - LO) / 10
        o.append(f'<text x="{x(t):.1f}" y="{y(LO) + 15:.1f}" text-anchor="middle">{t:.1f}</text>')
        o.append(f'<text x="{x(LO) - 6:.1f}" y="{y(t) + 4:.1f}" text-anchor="end">{t:.1f}</text>')
    o.append(f'<text x="{W / 2}" y="{W - 12}" text-anchor="middle">predicted ratio (scheduler ÷ defaults)</text>')
    o.append(f'<text x="14" y="{W / 2}" text-anchor="middle" transform="rotate(-90 14 {W / 2})">'
             'measured wall-time ratio</text>')
    for r in pts:
        colour = "#c00" if r["sign_right"] is False else "#06c"
        px, py = x(r["predicted"]), y(r["measured"])
        out = not (LO <= r["predicted"] <= HI and LO <= r["measured"] <= HI)
        fill = f'fill="white" stroke="{colour}"' if out else f'fill="{colour}"'
        o.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" {fill}>'
                 f'<title>{r["workload"]} {r["setting"]}: predicted {r["predicted"]:.3f}, '
                 f'measured {r["measured"]:.3f}</title></circle>')
        if out:
            o.append(f'<text x="{px - 6:.1f}" y="{py - 8:.1f}" text-anchor="end" fill="{colour}">'
                     f'{r["workload"]} {r["setting"].split("/")[0]}: {r["predicted"]:.3g} vs {r["measured"]:.3g}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"
