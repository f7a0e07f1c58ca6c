# A two-node in-place allreduce: memory channels within a node, a port
# channel to the same GPU of the other node. Rank (n, i) owns chunk n*G+i:
#   1. it sums chunks i and G+i over its node (reads of its peers, rre);
#   2. it puts its partial sum of the other node's chunk to its twin there
#      (put with signal), waits for the twin's, adds it, and puts the total
#      back to the twin;
#   3. it puts both totals to its node's peers.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allreduce(name, gpus_per_node):
    G = gpus_per_node
    N = 2 * G
    with CollectiveProgram(name, AllReduce(N, 1, True), N):
        scratch = [Buffer(r, 1) for r in range(N)]
        mem, port = {}, {}
        for r in range(N):
            n, i = divmod(r, G)
            for k in range(G):
                if k != i:
                    mem[(n * G + k, r)] = MemoryChannel(n * G + k, r)
            port[r] = PortChannel((1 - n) * G + i, r)
        for r in range(N):
            n, i = divmod(r, G)
            peers = [n * G + k for k in range(G) if k != i]
            inp = Rank(r).get_input_buffer()
            twin = (1 - n) * G + i
            own, other = n * G + i, (1 - n) * G + i
            for p in peers:
                mem[(p, r)].signal(tb=0, relaxed=True)
            for p in peers:
                mem[(p, r)].wait(tb=0, data_sync=SyncType.after, relaxed=True)
            for c in (own, other):  # 1.
                for p in peers:
                    mem[(p, r)].reduce(inp[c : c + 1], [Rank(p).get_input_buffer()[c : c + 1]],
                                       tb=0)
            port[r].signal(tb=0)  # 2.
            port[r].wait(tb=0, data_sync=SyncType.after)
            port[r].put_with_signal(scratch[twin][0:1], inp[other : other + 1], tb=0)
            port[r].wait(tb=0, data_sync=SyncType.after)
            Rank(r).reduce(inp[own : own + 1], [scratch[r][0:1]], tb=0)
            port[r].put_with_signal(Rank(twin).get_input_buffer()[own : own + 1],
                                    inp[own : own + 1], tb=0)
            port[r].wait(tb=0, data_sync=SyncType.after)
            for c in (own, other):  # 3.
                for p in peers:
                    mem[(p, r)].put(Rank(p).get_input_buffer()[c : c + 1], inp[c : c + 1], tb=0)
            for p in peers:
                mem[(p, r)].signal(tb=0, data_sync=SyncType.before)
            for p in peers:
                mem[(p, r)].wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus_per_node", type=int, nargs="?", default=2)
args = parser.parse_args()
allreduce("hierarchical_allreduce", args.gpus_per_node)
