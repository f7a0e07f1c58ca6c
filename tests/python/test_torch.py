"""The chorus backend of torch.distributed (chorus.torch), run by ctest
(label torch) where the backend was built: every operation with checked
data on 2 and 4 processes in torchrun's environment (tests/python/
torchrun_env.py: Debian 12's torchrun itself fails on Python 3.11) and
under `chorus launch` and mpirun; a dead and a silent peer; DDP training
that ends where the same run on gloo ends; device tensors refused."""

import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist

import chorus.torch
from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def script(name):
    return os.path.join(HERE, name)


def torchrun(nproc, name, *args, env=None, timeout=240):
    return subprocess.run([sys.executable, script("torchrun_env.py"), "--nproc", str(nproc),
                           "--timeout", str(timeout - 10), script(name)] + list(args),
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


class Backend(unittest.TestCase):
    def assertRan(self, r, ranks):
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("all operations ok"), ranks, r.stdout + r.stderr)

    def test_every_operation_2_and_4_processes(self):
        for n in (2, 4):
            with self.subTest(processes=n):
                self.assertRan(torchrun(n, "torch_ops.py"), n)

    def test_under_chorus_launch(self):
        chorus_bin = os.environ.get("CHORUS_BIN")
        if not chorus_bin:
            self.skipTest("CHORUS_BIN not set (ctest sets it)")
        r = subprocess.run([chorus_bin, "launch", "-n", "3", "--", sys.executable,
                            script("torch_ops.py")], capture_output=True, text=True, timeout=240,
                           env=dict(os.environ, MASTER_PORT=str(free_port())))
        self.assertRan(r, 3)

    def test_under_mpirun(self):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            self.skipTest("no mpirun (Debian: openmpi-bin)")
        r = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                            "-x", "PYTHONPATH", "-x", f"MASTER_PORT={free_port()}",
                            sys.executable, script("torch_ops.py")],
                           capture_output=True, text=True, timeout=240)
        self.assertRan(r, 2)

    def test_under_srun_environment(self):
        # Two tasks of an srun step, faked: only Slurm's variables (no
        # RANK, MASTER_ADDR, ...); they meet at the step's first host and
        # the job step's port.
        self.assertEqual(chorus.torch._first_slurm_host("node[01-04,07],gpu3"), "node01")
        self.assertEqual(chorus.torch._first_slurm_host("rack[2-3]-n[005-006]"), "rack2-n005")
        self.assertIsNone(chorus.torch._slurm_task({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}))
        job = str(os.getpid() * 7 % 1000000 + 1)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("CHORUS_", "SLURM_", "OMPI_", "PMI_"))
                and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
        procs = [subprocess.Popen([sys.executable, script("torch_ops.py")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=dict(base, SLURM_PROCID=str(r), SLURM_LOCALID=str(r),
                                           SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2",
                                           SLURM_STEP_NODELIST="localhost,node[2-3]",
                                           SLURM_JOB_ID=job, SLURM_STEP_ID="0"))
                 for r in range(2)]
        out = "".join(p.communicate(timeout=240)[0] for p in procs)
        self.assertEqual([p.returncode for p in procs], [0, 0], out)
        self.assertEqual(out.count("all operations ok"), 2, out)

    def test_dead_and_silent_peers_raise(self):
        for mode in ([], ["--silent"]):
            with self.subTest(mode=mode):
                r = torchrun(3, "torch_dead_peer.py", *mode, env={"CHORUS_TIMEOUT_S": "4"},
                             timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertEqual(r.stdout.count("raised after"), 2, r.stdout + r.stderr)

    def test_bench_checks_and_compares(self):
        # bench/torch_bench.py, the side-by-side table (CPU here; --device
        # cuda on a GPU): every op checked, then timed against gloo.
        bench = os.path.join(HERE, "..", "..", "bench", "torch_bench.py")
        r = torchrun(2, os.path.abspath(bench), "--min", "4K", "--max", "64K", "--rounds", "1")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = [line.split(",") for line in r.stdout.splitlines() if line[:1].isalpha()][1:]
        self.assertEqual(sorted({row[0] for row in rows}),
                         ["all_gather", "all_reduce", "all_to_all_single", "reduce_scatter"])
        for row in rows:
            self.assertGreater(float(row[2]), 0, row)  # chorus timed on every op

    def test_ddp_matches_gloo(self):
        with tempfile.TemporaryDirectory() as d:
            params = {}
            for backend in ("chorus", "gloo"):
                out = os.path.join(d, backend + ".pt")
                r = torchrun(4, "torch_ddp.py", "--backend", backend, "--out", out)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                params[backend] = torch.load(out)
        for k, v in params["chorus"].items():
            torch.testing.assert_close(v, params["gloo"][k], rtol=1e-4, atol=1e-5)


class InProcess(unittest.TestCase):
    """One rank in this process: argument errors without other processes."""

    @classmethod
    def setUpClass(cls):
        dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                                world_size=1, timeout=datetime.timedelta(seconds=60))

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()

    def test_device_tensors_are_refused(self):
        # What every backend call checks first; a meta tensor stands in for a
        # device one (this torch has no CUDA, and its dispatcher stops meta
        # tensors before they reach a backend).
        from chorus import _torch
        with self.assertRaisesRegex(RuntimeError, "serves CPU tensors; meta tensors need"):
            _torch.check_tensor(torch.ones(4, device="meta"))
        self.assertEqual(_torch.check_tensor(torch.ones(4)), 7)  # chorusFloat32

    def test_one_rank_collectives(self):
        t = torch.arange(6, dtype=torch.float32)
        dist.all_reduce(t)
        self.assertTrue(torch.equal(t, torch.arange(6, dtype=torch.float32)))
        out = torch.empty(6)
        dist.all_to_all_single(out, torch.arange(6, dtype=torch.float32), [6], [6])
        self.assertTrue(torch.equal(out, torch.arange(6, dtype=torch.float32)))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(RuntimeError, "split"):
            dist.all_to_all_single(torch.empty(6), torch.empty(6), [5], [6])
        with self.assertRaisesRegex(RuntimeError, "not another rank"):
            dist.send(torch.ones(2), 3)
        with self.assertRaisesRegex(RuntimeError, "contiguous"):
            dist.all_reduce(torch.ones(4, 4).t())


if __name__ == "__main__":
    unittest.main()
