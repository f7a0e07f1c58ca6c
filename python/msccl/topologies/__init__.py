"""The topologies MSCCLang programs build (msccl.topologies)."""

from msccl.topologies.topology import Topology
from msccl.topologies.generic import fully_connected, ring, line, star, hub_and_spoke
from msccl.topologies.nvidia import dgx1, dgx_a100, nvlink_only
from msccl.topologies.distributed import distributed_fully_connected, distributed_hub_and_spoke
from msccl.topologies.transformers import reverse_topology, binarize_topology
