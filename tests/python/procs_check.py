# One rank of a job of processes (run under `chorus launch -n N`): NCCL's
# collectives through chorus.Comm on numpy arrays, every element checked.
import sys

import numpy as np

import chorus

comm = chorus.Comm.from_env()
r, n = comm.rank, comm.size
count = 1000
send = (np.arange(count, dtype=np.float32) + 1000 * r)
out = np.empty_like(send)
comm.allreduce(send, out)
assert np.array_equal(out, sum(np.arange(count, dtype=np.float32) + 1000 * k for k in range(n)))
gathered = np.empty(count * n, dtype=np.int32)
comm.allgather(send.astype(np.int32), gathered)
assert np.array_equal(gathered, np.concatenate([np.arange(count, dtype=np.int32) + 1000 * k
                                                for k in range(n)]))
a2a_in = np.array([100 * r + j for j in range(n)], dtype=np.int64)
a2a_out = np.empty_like(a2a_in)
comm.alltoall(a2a_in, a2a_out)
assert list(a2a_out) == [100 * j + r for j in range(n)], a2a_out
buf = np.full(16, r, dtype=np.float64)
comm.broadcast(buf, root=n - 1)
assert (buf == n - 1).all()
rs = np.empty(4, dtype=np.float32)
comm.reduce_scatter(np.arange(4 * n, dtype=np.float32), rs)
assert np.array_equal(rs, n * np.arange(4 * r, 4 * r + 4, dtype=np.float32))
try:
    comm.allreduce(np.zeros(3, dtype=np.complex64))
    sys.exit("a complex array was accepted")
except chorus.Error as e:
    assert "complex64" in str(e), e
comm.destroy()
print(f"rank {r} of {n}: ok")
