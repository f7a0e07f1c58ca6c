# Send/receive around a ring over port channels (a proxy's puts, as across
# nodes): rank r tells r-1 it is ready, waits until r+1 is, puts its input
# into r+1's output with a signal, and waits for r-1's.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def sendrecv(name, gpus, instances):
    with CollectiveProgram(name, SendRecv(gpus, 1, False), gpus, instances=instances):
        nxt, prv = {}, {}
        for r in range(gpus):
            nxt[r] = PortChannel((r + 1) % gpus, r)
            prv[r] = PortChannel((r - 1) % gpus, r)
        for r in range(gpus):
            n = (r + 1) % gpus
            prv[r].signal(tb=0, data_sync=SyncType.none)
            nxt[r].wait(tb=0, data_sync=SyncType.after)
            nxt[r].put_with_signal(Rank(n).get_output_buffer()[:], Rank(r).get_input_buffer()[:],
                                   tb=0)
            prv[r].wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
parser.add_argument("instances", type=int, nargs="?", default=2)
args = parser.parse_args()
sendrecv("sendrecv_port", args.gpus, args.instances)
