# Ring allreduce, MSCCLang style: chunk i is reduced around the ring starting
# at rank i, then copied around it; one channel and threadblock per chunk
# modulo `channels`.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllReduce


def allreduce_ring(size, channels, instances, protocol):
    topology = fully_connected(size)
    collective = AllReduce(size, size, True)
    with MSCCLProgram(f"allreduce_ring_{channels}channelsperring", topology, collective, instances,
                      protocol=protocol, threadblock_policy=ThreadblockPolicy.manual):
        for step in range(size - 1):
            for index in range(size):
                rank = (index + step) % size
                nxt = (index + step + 1) % size
                c = chunk(nxt, Buffer.input, index)
                c.reduce(chunk(rank, Buffer.input, index), sendtb=index % channels,
                         recvtb=index % channels, ch=index % channels)
        for step in range(-1, size - 2):
            for index in range(size):
                rank = (index + step) % size
                c = chunk(rank, Buffer.input, index)
                c.copy((index + step + 1) % size, Buffer.input, index, sendtb=index % channels,
                       recvtb=index % channels, ch=index % channels)
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("channels", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="LL128")
args = parser.parse_args()
allreduce_ring(args.num_gpus, args.channels, args.instances, args.protocol)
