"""The Python package (chorus) and MSCCLang's module names (msccl.*): run by
ctest with PYTHONPATH=<build>/python and CHORUS_BIN=<the chorus command>,
under Debian's /usr/bin/python3 (docs/python.md)."""

import os
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import chorus

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
MSCCL_DIR = os.path.join(SOURCE, "..", "shared", "msccl-algorithms", "ndv4")
PROGRAMS = os.path.join(HERE, "mscclang")


class Package(unittest.TestCase):
    def test_help_reads(self):
        import pydoc
        text = pydoc.render_doc(chorus, renderer=pydoc.plaintext)
        for name in ("Algorithm", "Program", "simulate", "synthesize", "Comm", "Error"):
            self.assertIn(name, text)

    def test_gen_verify_run_simulate(self):
        a = chorus.gen("ring_allreduce", ranks=4)
        self.assertEqual((a.collective, a.ranks), ("allreduce", 4))
        report = a.verify()
        self.assertTrue(report.correct, str(report))
        outs = a.run(count=8 * a.count_quantum, dtype="int32")
        self.assertEqual(len(outs), 4)
        self.assertEqual(outs[0].dtype, np.int32)
        sim = chorus.simulate(a, "ring:4", bytes=1 << 30)
        self.assertGreater(sim["busbw"], 0)
        self.assertTrue(sim["links"] and sim["critical_path"])

    def test_run_on_numpy_inputs(self):
        a = chorus.gen("ring_allreduce", ranks=4)
        ins = [np.arange(64, dtype=np.float32) * (r + 1) for r in range(4)]
        for out in a.run(ins):
            np.testing.assert_array_equal(out, np.arange(64, dtype=np.float32) * 10)
        ag = chorus.gen("ring_allgather", ranks=3)
        ins = [np.full(5, 7 * r, dtype=np.int64) for r in range(3)]
        for out in ag.run(ins):
            np.testing.assert_array_equal(out, np.concatenate(ins))
        with self.assertRaises(chorus.Error):
            a.run([np.zeros(64, dtype=np.float32)] * 3)

    def test_production_file_and_convert(self):
        path = os.path.join(MSCCL_DIR, "ap4ll.xml")
        a = chorus.load(path)
        self.assertTrue(chorus.verify(path).correct)
        with tempfile.TemporaryDirectory() as d:
            chorus.convert(path, os.path.join(d, "a.json"))
            b = chorus.load(os.path.join(d, "a.json"))
        self.assertEqual(b.xml(), a.xml())
        a.run()  # checked against allreduce's closed form

    def test_bad_file_raises_with_location(self):
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write('<algo name="x" nchunksperloop="1" nchannels="1" ngpus="2" coll="allreduce"'
                    ' proto="Simple" inplace="0">\n<gpu id="0"\n')
        try:
            with self.assertRaises(chorus.Error) as cm:
                chorus.load(f.name)
            d = cm.exception.diagnostics[0]
            self.assertEqual((d.code, d.file), ("E001", f.name))
            self.assertGreater(d.line, 0)
        finally:
            os.unlink(f.name)

    def test_program_mistake_points_at_this_line(self):
        p = chorus.Program("x", "allgather", 2)
        p.chunk(0, chorus.Buffer.input, 0).copy(0, chorus.Buffer.output, 0)
        line = sys._getframe().f_lineno + 1
        p.chunk(1, chorus.Buffer.output, 1)
        with self.assertRaises(chorus.Error) as cm:
            p.compile()
        d = cm.exception.diagnostics[0]
        self.assertEqual((d.code, os.path.basename(d.file), d.line), ("E601", "test_chorus.py", line))

    def test_program_compiles_and_runs(self):
        n = 4
        p = chorus.Program("ring_allgather", "allgather", n)
        for r in range(n):
            c = p.chunk(r, chorus.Buffer.input, 0).copy(r, chorus.Buffer.output, r)
            for step in range(1, n):
                c = c.copy((r + step) % n, chorus.Buffer.output, r)
        a = p.compile()
        self.assertTrue(a.verify().correct)
        a.run()

    def test_synthesize_and_optimum(self):
        best = chorus.optimum("allgather", "dgx-a100")
        self.assertAlmostEqual(best["algbw"], 2400 / 7, places=6)
        algo, info = chorus.synthesize("allgather", "dgx-a100")
        self.assertTrue(algo.verify().correct)
        self.assertGreater(info["simulated_algbw"], 0.95 * best["algbw"])
        with self.assertRaises(chorus.Error):
            chorus.synthesize("allgather", "no-such-topology")
        # For Chorus's runtimes (no limit on steps per threadblock).
        algo, info = chorus.synthesize("allreduce", "ring:4", target="chorus")
        self.assertTrue(algo.verify().correct)
        self.assertEqual(info["target"], "chorus")
        self.assertGreater(info["most_steps_per_threadblock"], 0)
        self.assertIn("halves_in_turn", info)
        # An allgather for Chorus's runtimes is pipelined by slices of its own.
        algo, info = chorus.synthesize("allgather", "ring:6", target="chorus")
        self.assertTrue(algo.verify().correct)
        self.assertGreater(info["slice_bytes"], 0)
        self.assertEqual(algo.slice_bytes, info["slice_bytes"])
        # Simulated as Chorus's runtimes move slices: whole (parts=1).
        whole = chorus.simulate(algo, "ring:6", bytes=info["simulated_bytes"], parts=1)
        self.assertEqual(whole["algbw"], info["simulated_algbw"])
        halves = chorus.simulate(algo, "ring:6", bytes=info["simulated_bytes"], parts=2)
        self.assertNotEqual(halves["algbw"], info["simulated_algbw"])
        with self.assertRaises(chorus.Error):
            chorus.synthesize("allreduce", "ring:4", target="nccl")

    def test_report(self):
        # The page chorus report writes, for a file and an Algorithm; its
        # data is the JSON the viewer draws (tests/report checks the
        # drawing in a browser).
        import json, re, tempfile
        ring = chorus.gen("ring_allreduce", 4)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.html")
            html = chorus.report(ring, os.path.join(HERE, "..", "data", "bad",
                                                    "e301_swapped_offsets.xml"),
                                 topo="ring:4", output=path)
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), html)
        data = json.loads(re.search(r'id="chorus-data">(.*?)</script>', html, re.S).group(1))
        # In the order given.
        self.assertEqual([a["verdict"] for a in data["algorithms"]], ["correct", "wrong"])
        ours = data["algorithms"][0]
        self.assertEqual(ours["label"], ring.name)
        self.assertEqual(len(ours["flow"]["steps"]), ring.stats()["steps"])
        self.assertGreater(ours["sim"]["busbw"], 0)
        with self.assertRaises(chorus.Error):
            chorus.report(ring, topo="no-such-topology")

    def test_comm_thread_ranks(self):
        comms = chorus.Comm.init_all(3)
        outs, errors = [None] * 3, []

        def rank(r):
            try:
                send = np.full(10, r + 1, dtype=np.float64)
                outs[r] = np.empty_like(send)
                comms[r].allreduce(send, outs[r])
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for o in outs:
            np.testing.assert_array_equal(o, np.full(10, 6.0))
        for c in comms:
            c.destroy()
        with self.assertRaises(chorus.Error):
            comms[0].allreduce(np.zeros(2))

    def test_comm_refuses_bad_buffers_and_keeps_group_arrays(self):
        comms = chorus.Comm.init_all(2)
        ro = np.ones(4, np.float32)
        ro.setflags(write=False)
        for call, words in (
                (lambda: comms[0].gather(np.zeros(8, "f4"), np.zeros(8, "f4"), root=0), "root's recv"),
                (lambda: comms[0].scatter(np.zeros(8, "f4"), np.zeros(8, "f4"), root=0), "root's send"),
                (lambda: comms[0].allreduce(np.ones(10, "f4"), np.empty(10, "i1")), "dtypes differ"),
                (lambda: comms[0].allreduce(ro), "read-only")):
            with self.assertRaisesRegex(chorus.Error, words):
                call()
        # Inside a group the calls only queue: temporaries must live until the end.
        chorus.group_start()
        comms[0].send(np.arange(4, dtype="f4") * 7, 1)
        import gc
        gc.collect()
        out = np.empty(4, "f4")
        comms[1].recv(out, 0)
        chorus.group_end()
        np.testing.assert_array_equal(out, np.arange(4, dtype="f4") * 7)
        for c in comms:
            c.destroy()

    def test_process_ranks(self):
        chorus_bin = os.environ.get("CHORUS_BIN")
        if not chorus_bin:
            self.skipTest("CHORUS_BIN not set (ctest sets it)")
        r = subprocess.run([chorus_bin, "launch", "-n", "3", "--", sys.executable,
                            os.path.join(HERE, "procs_check.py")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count(": ok"), 3, r.stdout)


# MSCCLang programs, unchanged: each prints XML that Chorus proves and runs.
GOOD = [
    ("allreduce_ring.py", ["4", "2", "1"]),
    ("allreduce_ring.py", ["8", "4", "2", "--protocol", "LL"]),
    ("allreduce_allpairs.py", ["4", "1"]),
    ("allgather_ring.py", ["5", "2"]),
    ("allgather_allpairs.py", ["4", "1"]),
    ("allgather_recursive_doubling.py", ["8", "1"]),
    ("alltoall_allpairs.py", ["4", "1"]),
    ("alltoall_two_step.py", ["2", "3"]),
    ("reducescatter_allpairs.py", ["4"]),
    ("allreduce_recursive_doubling_halving.py", ["8", "2"]),
    ("hierarchical_allreduce.py", ["2", "2", "1"]),
    ("custom_broadcast.py", ["4", "2"]),
]
BAD = [("bad_unwritten.py", 9, "E601"), ("bad_wrong_sum.py", 11, "E303")]


def run_program(name, args, folder=PROGRAMS):
    return subprocess.run([sys.executable, os.path.join(folder, name)] + args,
                          capture_output=True, text=True, timeout=120)


class MscclangPrograms(unittest.TestCase):
    def test_programs_print_verified_xml_that_runs(self):
        for name, args in GOOD:
            with self.subTest(program=name, args=args):
                r = run_program(name, args)
                self.assertEqual(r.returncode, 0, r.stderr)
                a = chorus.loads(r.stdout, name)
                spec = None
                if name == "custom_broadcast.py":
                    # The custom collective's meaning: rank 0's chunks on every other rank.
                    import json
                    spec = json.dumps({"collective": a.collective, "input_chunks": a.chunks,
                                       "output_chunks": a.chunks, "postcondition": [
                                           {"rank": rk, "chunk": c, "holds": [[0, c]]}
                                           for rk in range(1, a.ranks) for c in range(a.chunks)]})
                report = a.verify(spec=spec)
                self.assertTrue(report.correct, str(report))
                a.run(count=4 * a.count_quantum, dtype="int32", spec=spec)

    def test_mistakes_exit_1_at_the_line(self):
        for name, line, code in BAD:
            with self.subTest(program=name):
                r = run_program(name, [])
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertEqual(r.stdout, "", "no XML for a wrong program")
                self.assertIn(f"{name}:{line}:", r.stderr)
                self.assertIn(code, r.stderr)



# MSCCL++'s DSL (mscclpp.language): programs of our own in its style, each
# printing a plan Chorus proved; the plan then runs (lowered to two-sided
# steps) with every element checked.
MSCCLPP = os.path.join(HERE, "mscclpp")
MSCCLPP_GOOD = [
    ("allgather_allpairs.py", ["4"]),
    ("allgather_allpairs.py", ["2"]),
    ("allreduce_allpairs.py", ["3", "2"]),
    ("allreduce_packets.py", ["4"]),
    ("reducescatter.py", ["4"]),
    ("alltoall.py", ["4"]),
    ("sendrecv_port.py", ["4", "2"]),
    ("allreduce_nvls.py", ["4"]),
    ("allgather_tbg.py", ["3", "4"]),
    ("hierarchical_allreduce.py", ["2"]),
    ("allreduce_pipeline.py", ["3", "32"]),
]
MSCCLPP_BAD = [("bad_missing_wait.py", 23, "E705"), ("bad_wrong_reduction.py", 23, "E301")]


class MscclppPrograms(unittest.TestCase):
    def test_programs_print_proven_plans_that_run(self):
        import json
        for name, args in MSCCLPP_GOOD:
            with self.subTest(program=name, args=args):
                r = run_program(name, args, MSCCLPP)
                self.assertEqual(r.returncode, 0, r.stderr)
                plan = json.loads(r.stdout)
                self.assertEqual(plan["gpus"][0]["id"], 0)
                self.assertIn("threadblocks", plan["gpus"][0])
                a = chorus.loads(r.stdout, name)
                spec = None
                if plan["collective"] == "sendrecv":
                    # Its meaning: rank r's output is rank r-1's input.
                    n = a.ranks
                    spec = json.dumps({"collective": a.collective, "input_chunks": a.chunks,
                                       "output_chunks": a.chunks, "postcondition": [
                                           {"rank": rk, "chunk": c, "holds": [[(rk - 1) % n, c]]}
                                           for rk in range(n) for c in range(a.chunks)]})
                report = a.verify(spec=spec)
                self.assertTrue(report.correct, str(report))
                a.run(count=4 * a.count_quantum, dtype="int32", spec=spec)

    def test_a_plan_runs_on_processes(self):
        import tempfile
        r = run_program("allgather_allpairs.py", ["2"], MSCCLPP)
        self.assertEqual(r.returncode, 0, r.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write(r.stdout)
            f.flush()
            out = subprocess.run([os.environ["CHORUS_BIN"], "run", f.name, "--procs", "2",
                                  "--check", "-b", "64K", "-n", "1", "-w", "0"],
                                 capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("Out of bounds values : 0 OK", out.stdout + out.stderr)

    def test_mistakes_exit_1_at_the_line(self):
        for name, line, code in MSCCLPP_BAD:
            with self.subTest(program=name):
                r = run_program(name, [], MSCCLPP)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertEqual(r.stdout, "", "no plan for a wrong program")
                self.assertIn(f"{name}:{line}: error[{code}]", r.stderr)

    def test_an_operation_the_executor_cannot_parse_is_refused(self):
        # A switch channel's reduce without the broadcast that fuses it into
        # glres: MSCCL++'s executor has no "glre".
        prog = """
from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *
with CollectiveProgram("lone_glre", AllReduce(2, 1, True), 2):
    nvls = SwitchChannel(rank_list=[0, 1], buffer_type=BufferType.input)
    for r in range(2):
        nvls.at_rank(r).reduce(buffer_offset=r, size=1,
                               dst_chunk=Rank(r).get_input_buffer()[r:r + 1], tb=0)
    print(JSON())
"""
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("glre", r.stderr)

    def test_the_dsl_checks_what_it_can_at_the_call(self):
        from mscclpp.language.collectives import AllGather
        from mscclpp.language.program import CollectiveProgram
        from mscclpp.language.rank import Rank
        from mscclpp.language.channel import MemoryChannel
        with CollectiveProgram("x", AllGather(2, 1, False), 2):
            with self.assertRaises(RuntimeError):
                Rank(2)
            ch = MemoryChannel(1, 0)
            with self.assertRaises(RuntimeError):  # the source is not on the channel's rank
                ch.put(Rank(0).get_output_buffer()[0:1], Rank(1).get_input_buffer()[0:1], tb=0)
            with self.assertRaises(RuntimeError):
                Rank(0).get_output_buffer()[0:3]


if __name__ == "__main__":
    unittest.main()
