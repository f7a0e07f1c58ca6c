"""Several copies of a machine, every GPU pair across machines linked."""

from msccl.topologies.topology import Topology


def _copies(local, num_copies, remote_bw):
    n = local.num_nodes()
    total = n * num_copies
    links = [[0] * total for _ in range(total)]
    for dst in range(total):
        for src in range(total):
            if dst // n == src // n:
                links[dst][src] = local.link(src % n, dst % n)
            else:
                links[dst][src] = remote_bw
    return links, n


def distributed_fully_connected(local_topology, num_copies, remote_bw):
    links, _ = _copies(local_topology, num_copies, remote_bw)
    return Topology(f"DistributedFullyConnected(local={local_topology.name},copies={num_copies},"
                    f"bw={remote_bw})", links)


def distributed_hub_and_spoke(local_topology, num_copies, remote_bw):
    links, n = _copies(local_topology, num_copies, remote_bw)
    switches = []
    for c in range(num_copies):
        mine = list(range(c * n, (c + 1) * n))
        others = [r for r in range(n * num_copies) if r // n != c]
        switches.append((mine, others, remote_bw, f"copy_{c}_out"))
        switches.append((others, mine, remote_bw, f"copy_{c}_in"))
    return Topology(f"DistributedHubAndSpoke(local={local_topology.name},copies={num_copies},"
                    f"bw={remote_bw})", links, switches)
