"""Unit tests of the decision benchmark's plan and figure generators (run by
hack/benchreport's Go test, so by make test):
python3 -m unittest discover -s benchdec -t . (from hack/)."""
import copy
import json
import os
import subprocess
import tempfile
import unittest

from benchdec import plan as planmod
from benchdec import report
from benchdec import counterfactual
from benchdec.agent import parse_log_line, parse_metrics, policy_yaml
from benchdec.runner import williams_order

HACK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(times, reps=3, status="complete", quick=False, deviations=(), blockers=(), started="2026-12-06T10:00:00+00:00",
           metrics=None):
    """A run's record: times[setting][workload] = a wall time, or a list
    of one per repetition."""
    settings = list(times)
    workloads = list(next(iter(times.values())))
    ms = []
    for rep in range(1, reps + 1):
        for s in settings:
            for w in workloads:
                v = times[s][w]
                v = v[rep - 1] if isinstance(v, list) else v
                ms.append({"rep": rep, "setting": s, "workload": w, "wall_s": v,
                           "metrics": (metrics or {}).get((s, w), {"ops_s": 1000.0 / v}),
                           "state0": "none/2560", "state1": "none/2560"})
    p = planmod.load(planmod.QUICK_PLAN if quick else planmod.DEFAULT_PLAN)
    p["workloads"] = workloads
    p["repetitions"] = reps
    return {"format": 1, "name": "x", "status": status, "started": started, "plan": p,
            "settings": settings, "default_setting": "none/2560", "measurements": ms, "sequences": [],
            "agent_deviations": list(deviations), "headline_blockers": list(blockers),
            "git": {"commit": "0123456789abcdef", "branch": "b", "dirty": False},
            "host": {"kernel": "6.18", "cpus": 2}}


BASE = {
    "none/2560": {"a": 10.0, "b": 20.0},
    "none/128": {"a": 10.0, "b": 5.0},
    "agent": {"a": 10.1, "b": 5.5},
}


class TestBars(unittest.TestCase):
    def test_pass(self):
        b = report.Stats(record(BASE)).bars()
        self.assertEqual([x["pass"] for x in b], [False, True, True])  # 15.6 > 1.02 × 15
        good = copy.deepcopy(BASE)
        good["agent"] = {"a": 10.0, "b": 5.2}
        b = report.Stats(record(good)).bars()
        self.assertEqual([x["pass"] for x in b], [True, True, True])
        self.assertIn("b 1.040 (defaults 4.00× none/128)", b[2]["value"])

    def test_slower_than_defaults(self):
        t = copy.deepcopy(BASE)
        t["agent"]["a"] = 10.6  # > 1.05 × 10
        b = report.Stats(record(t)).bars()
        self.assertFalse(b[1]["pass"])
        self.assertIn("a 1.060", b[1]["value"])

    def test_pathology(self):
        t = copy.deepcopy(BASE)
        t["agent"]["b"] = 6.3  # > 1.25 × 5
        b = report.Stats(record(t)).bars()
        self.assertFalse(b[2]["pass"])

    def test_no_pathology(self):
        t = {"none/2560": {"a": 10.0}, "none/128": {"a": 9.0}, "agent": {"a": 9.0}}
        b = report.Stats(record(t)).bars()
        self.assertTrue(b[2]["pass"])
        self.assertIn("no workload", b[2]["value"])

    def test_medians_over_repetitions(self):
        t = copy.deepcopy(BASE)
        t["agent"]["a"] = [10.0, 30.0, 10.0]  # one outlier: the median is 10
        S = report.Stats(record(t))
        self.assertEqual(S.med("agent", "a"), 10.0)
        self.assertEqual(S.total("agent"), 15.5)

    def test_not_judged_without_agent_or_defaults(self):
        t = {"none/128": {"a": 1.0}, "agent": {"a": 1.0}}
        self.assertIsNone(report.Stats(record(t)).bars())
        t = {"none/2560": {"a": 1.0}, "none/128": {"a": 1.0}}
        self.assertIsNone(report.Stats(record(t)).bars())

    def test_incomplete_repetition_left_out(self):
        r = record(BASE)
        r["measurements"] = [m for m in r["measurements"] if not (m["rep"] == 3 and m["setting"] == "agent")]
        S = report.Stats(r)
        self.assertEqual(S.complete, [1, 2])

    def test_bootstrap_is_seeded(self):
        t = copy.deepcopy(BASE)
        t["agent"]["a"] = [10.0, 11.0, 12.0]
        a = report.render_run(record(t), "x.json")
        b = report.render_run(record(t), "x.json")
        self.assertEqual(a, b)


class TestKinds(unittest.TestCase):
    def test_kinds(self):
        self.assertEqual(report.kind(record(BASE)), "full")
        self.assertEqual(report.kind(record(BASE, quick=True)), "smoke")
        self.assertEqual(report.kind(record(BASE, status="interrupted")), "cut short")
        self.assertEqual(report.kind(record(BASE, deviations=["policy spec: {}"])), "non-default agent")
        self.assertEqual(report.kind(record(BASE, blockers=["1 repetition(s), fewer than 3"])), "custom")
        r = record(BASE)
        r["git"]["dirty"] = True
        self.assertEqual(report.kind(r), "custom")

    def test_report_names_deviation(self):
        md = report.render_run(record(BASE, deviations=["agent flags: --follow-open-files"]), "x.json")
        self.assertIn("Non-default agent settings: agent flags: --follow-open-files", md)
        md = report.render_run(record(BASE, quick=True), "x.json")
        self.assertIn("SMOKE run", md)
        md = report.render_run(record(BASE, quick=True, deviations=["hostPID: x"]), "x.json")
        self.assertIn("SMOKE run", md)
        self.assertIn("Non-default agent settings: hostPID: x", md)


class TestReadme(unittest.TestCase):
    def write(self, d, name, rec):
        rec = dict(rec, name=name)
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(rec, f)

    def test_no_full_run(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "2026-12-06-smoke", record(BASE, quick=True))
            self.write(d, "2026-12-06-cut", record(BASE, status="failed"))
            self.write(d, "2026-12-06-flags", record(BASE, deviations=["agent flags: -x"]))
            block = report.readme_block(d)
            self.assertIn("No full run yet", block)
            self.assertTrue(block.startswith(report.BEGIN) and block.endswith(report.END))

    def test_latest_full_run(self):
        with tempfile.TemporaryDirectory() as d:
            old = copy.deepcopy(BASE)
            old["agent"]["b"] = 9.0
            self.write(d, "2026-12-01-full", record(old, started="2026-12-01T00:00:00+00:00"))
            self.write(d, "2026-12-02-full", record(BASE, started="2026-12-02T00:00:00+00:00"))
            self.write(d, "2026-12-03-smoke", record(BASE, quick=True, started="2026-12-03T00:00:00+00:00"))
            block = report.readme_block(d)
            self.assertIn("2026-12-02-full", block)
            self.assertNotIn("2026-12-01-full", block)
            self.assertIn("| b | 20.00 | `none/128` 5.00 | 5.50 | 1.100", block)
            idx = report.render_index(d)
            self.assertLess(idx.index("2026-12-03-smoke"), idx.index("2026-12-01-full"))

    def test_splice(self):
        text = f"a\n{report.BEGIN}\nold\n{report.END}\nb\n"
        self.assertEqual(report.splice_readme(text, "NEW"), "a\nNEW\nb\n")
        with self.assertRaises(ValueError):
            report.splice_readme("no markers", "NEW")

    def test_archive_listed(self):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "2026-12-03-history.md"), "w").close()
            self.assertIn("[2026-12-03-history.md](2026-12-03-history.md)", report.render_index(d))


class TestPlan(unittest.TestCase):
    def env(self, **kw):
        return {k: str(v) for k, v in kw.items()}

    def test_default_and_quick_plans_are_valid(self):
        p = planmod.from_env({})
        self.assertEqual(p["workloads"], planmod.APP_WORKLOADS)
        self.assertEqual(p["repetitions"], 3)
        self.assertEqual(p["agent"], {"args": [], "policy_extra": {}, "state_dir": "fresh-per-sequence",
                                      "host_pid": False})
        q = planmod.from_env(self.env(BENCH_QUICK=1))
        self.assertTrue(q["quick"])

    def test_errors_are_one_line_and_name_the_fault(self):
        cases = [
            (dict(BENCH_WORKLOADS="rocksdb-pread nosuch"), "unknown workload 'nosuch'"),
            (dict(BENCH_SETTINGS="none/2560 fast"), "unknown setting 'fast'"),
            (dict(BENCH_REPS="x"), "BENCH_REPS"),
            (dict(BENCH_MEM="lots"), "pod_memory"),
            (dict(BENCH_THROTTLE="read_iops=x"), "BENCH_THROTTLE"),
            (dict(BENCH_POLICY_EXTRA="{"), "BENCH_POLICY_EXTRA"),
            (dict(BENCH_POLICY_EXTRA='{"mode": "Observe"}'), "spec.mode"),
            (dict(BENCH_QUICK="2"), "BENCH_QUICK"),
            (dict(BENCH_AGENT_STATE="sometimes"), "state_dir"),
            (dict(BENCH_AGENT_HOSTPID="yes"), "BENCH_AGENT_HOSTPID"),
        ]
        for env, want in cases:
            with self.subTest(env=env):
                with self.assertRaises(planmod.PlanError) as cm:
                    planmod.from_env(env)
                self.assertIn(want, str(cm.exception))
                self.assertNotIn("\n", str(cm.exception))

    def test_malformed_plan_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"name": "x", "workloads": [}')
        try:
            with self.assertRaises(planmod.PlanError) as cm:
                planmod.from_env({"BENCH_PLAN": f.name})
            self.assertIn("not JSON", str(cm.exception))
            with open(planmod.DEFAULT_PLAN) as g:
                p = json.load(g)
            p["sizes"]["typo_key"] = 1
            with open(f.name, "w") as g:
                json.dump(p, g)
            with self.assertRaises(planmod.PlanError) as cm:
                planmod.from_env({"BENCH_PLAN": f.name})
            self.assertIn("typo_key", str(cm.exception))
        finally:
            os.remove(f.name)

    def test_deviations_and_blockers(self):
        p = planmod.from_env(self.env(BENCH_AGENT_ARGS="--follow-open-files", BENCH_POLICY_EXTRA='{"rollout": {"minDwell": "0s"}}'))
        dev = planmod.agent_deviations(p)
        self.assertEqual(dev, ["agent flags: --follow-open-files", 'policy spec: {"rollout": {"minDwell": "0s"}}'])
        offered = ["none", "mq-deadline", "kyber"]
        full = planmod.resolve_settings(p, offered, "none", 2560)
        self.assertEqual(full, ["none/2560", "none/128", "mq-deadline/2560", "mq-deadline/128", "kyber/2560",
                                "kyber/128", "agent"])
        self.assertIn("agent flags: --follow-open-files", planmod.headline_blockers(p, full, offered, "none", 2560))
        h = planmod.from_env(self.env(BENCH_AGENT_HOSTPID=1))
        self.assertEqual(planmod.agent_deviations(h), ["hostPID: the agent in the host's PID namespace"])
        v = planmod.from_env(self.env(BENCH_SETTINGS="none/2560 agent.null agent"))
        self.assertEqual(planmod.agent_deviations(v), ["agent variants (other binaries): agent.null"])
        self.assertEqual(planmod.resolve_settings(v, offered, "none", 2560), ["none/2560", "agent.null", "agent"])
        d = planmod.from_env({})
        self.assertEqual(planmod.headline_blockers(d, full, offered, "none", 2560), [])
        self.assertIn("not every static setting against the agent",
                      planmod.headline_blockers(d, full[:2] + ["agent"], offered, "none", 2560))

    def test_resolve_settings(self):
        p = planmod.from_env(self.env(BENCH_SETTINGS="default default-scheduler/128 kyber/default agent"))
        self.assertEqual(planmod.resolve_settings(p, ["none", "kyber"], "none", 2560),
                         ["none/2560", "none/128", "kyber/2560", "agent"])
        p = planmod.from_env(self.env(BENCH_SETTINGS="bfq/128"))
        with self.assertRaises(planmod.PlanError) as cm:
            planmod.resolve_settings(p, ["none", "kyber"], "none", 2560)
        self.assertIn("bfq is not offered", str(cm.exception))


class TestAgentGlue(unittest.TestCase):
    def test_policy_sets_only_mode_and_device(self):
        y = policy_yaml("loop7", {})
        self.assertEqual(y.split("spec:\n", 1)[1], '  mode: Apply\n  devices:\n    include: ["loop7"]\n')
        self.assertEqual(report.policy_spec(y), 'mode: Apply; devices:; include: ["loop7"]')
        y = policy_yaml("loop7", {"rollout": {"minDwell": "0s"}})
        self.assertTrue(y.endswith('  rollout: {"minDwell": "0s"}\n'))

    def test_parse_log_line(self):
        kv = parse_log_line(' "level"=0 "msg"="applied" "device"="loop1" "change"="read_ahead_kb 2560 -> 32"')
        self.assertEqual(kv["msg"], "applied")
        self.assertEqual(kv["change"], "read_ahead_kb 2560 -> 32")
        self.assertEqual(parse_log_line("not a log line"), {})

    def test_williams_matches_the_shell(self):
        for n in (1, 2, 3, 7, 9):
            for r in range(2 * n + 1):
                out = subprocess.run(["bash", "-c", f". {HACK}/lib/williams.sh; williams_order {n} {r}"],
                                     stdout=subprocess.PIPE, text=True, check=True).stdout.split()
                self.assertEqual([int(x) for x in out], williams_order(n, r), (n, r))


class TestCounterfactual(unittest.TestCase):
    def rec(self, pred):
        """Statics and observe: kyber 20 % slower than the defaults and
        none/128 10 % faster; pred[workload] = observed predictions."""
        r = record({"none/2560": {"a": 10.0, "b": 10.0}, "none/128": {"a": 9.0, "b": 9.0},
                    "kyber/2560": {"a": 12.0, "b": 10.2}, "observe": {"a": 10.1, "b": 10.1}})
        for m in r["measurements"]:
            if m["setting"] == "observe":
                m["counterfactual"] = {"predicted_s": pred[m["workload"]], "real_s": 1.0, "windows": 2, "skipped": 0}
        return r

    def test_ratios_errors_signs(self):
        rs = counterfactual.rows(self.rec({"a": {"none": 1.0, "kyber": 1.3}, "b": {"none": 2.0, "kyber": 1.8}}))
        got = {(x["workload"], x["setting"]): x for x in rs}
        a = got[("a", "kyber/2560")]
        self.assertAlmostEqual(a["measured"], 1.2)
        self.assertAlmostEqual(a["predicted"], 1.3)  # summed over 3 repetitions alike
        self.assertAlmostEqual(a["error"], 10.0)
        self.assertTrue(a["judged"] and a["sign_right"])
        b = got[("b", "kyber/2560")]
        self.assertFalse(b["judged"])  # 2 % measured: no sign judged
        self.assertIsNone(got[("a", "none/128")]["predicted"])  # another read_ahead_kb: not predicted
        sm = counterfactual.summary(rs)
        self.assertEqual((sm["predicted"], sm["unpredicted"], sm["judged"], sm["sign_right"]), (2, 2, 1, 1))
        self.assertAlmostEqual(sm["mae"], (10.0 + 12.0) / 2)

    def test_identical_predictions_have_the_wrong_sign(self):
        rs = counterfactual.rows(self.rec({"a": {"none": 1.0, "kyber": 1.0}, "b": {"none": 1.0, "kyber": 1.0}}))
        a = [x for x in rs if x["workload"] == "a" and x["setting"] == "kyber/2560"][0]
        self.assertEqual(a["predicted"], 1.0)
        self.assertFalse(a["sign_right"])
        text = "\n".join(counterfactual.section(self.rec({"a": {"none": 1.0, "kyber": 1.0}, "b": {"none": 1.0, "kyber": 1.0}})))
        self.assertIn("right in 0 of 1: **FAIL**", text)
        self.assertIn("Predicted exactly 1.000 (no difference): 2 of 2", text)

    def test_observe_is_not_a_static_setting(self):
        r = self.rec({"a": {"none": 1.0, "kyber": 1.3}, "b": {"none": 2.0, "kyber": 1.8}})
        self.assertNotIn("observe", report.Stats(r).statics)
        self.assertIn("## Counterfactual", report.render_run(r, "x.json"))
        self.assertTrue(counterfactual.svg(r).startswith("<svg"))
        self.assertEqual(counterfactual.section(record({"none/2560": {"a": 1.0}, "agent": {"a": 1.0}})), [])

    def test_delta_of_scrapes(self):
        before = parse_metrics('shadowtune_agent_predicted_seconds_total{candidate="kyber",device="loop0"} 1\n'
                               'shadowtune_agent_predicted_seconds_total{candidate="none",device="loop1"} 5\n')
        after = parse_metrics('shadowtune_agent_predicted_seconds_total{candidate="kyber",device="loop0"} 3.5\n'
                              'shadowtune_agent_predicted_seconds_total{candidate="none",device="loop0"} 2\n'
                              'shadowtune_agent_predicted_seconds_total{candidate="none",device="loop1"} 9\n'
                              'shadowtune_agent_evaluation_duration_seconds_count{device="loop0"} 4\n'
                              'shadowtune_agent_windows_skipped_total{device="loop0",reason="cpu_budget"} 1\n')
        d = counterfactual.delta(before, after, "loop0")
        self.assertEqual(d["predicted_s"], {"kyber": 2.5, "none": 2.0})
        self.assertEqual((d["windows"], d["skipped"]), (4, 1))

    def test_observe_setting_and_policy(self):
        self.assertTrue(planmod.SETTING_RE.match("observe"))
        self.assertIn("  mode: Observe\n", policy_yaml("loop7", {}, "Observe"))


if __name__ == "__main__":
    unittest.main()
