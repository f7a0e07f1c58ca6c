"""A topology as MSCCLang programs see it: ``links[dst][src]`` is the
bandwidth from src to dst (0: no link)."""


class Topology:
    def __init__(self, name, links, switches=None):
        self.name = name
        self.links = links
        self.switches = list(switches or [])
        for srcs, dsts, bw, sw_name in self.switches:
            if bw == 0:
                raise ValueError(f"Switch {sw_name} has zero bandwidth, but switch bandwidths "
                                 "must be strictly positive")

    def num_nodes(self):
        return len(self.links)

    def nodes(self):
        return range(self.num_nodes())

    def link(self, src, dst):
        return self.links[dst][src]

    def sources(self, dst):
        for src, bw in enumerate(self.links[dst]):
            if bw > 0:
                yield src

    def destinations(self, src):
        for dst, links in enumerate(self.links):
            if links[src] > 0:
                yield dst

    def bandwidth_constraints(self):
        for dst, dst_links in enumerate(self.links):
            for src, bw in enumerate(dst_links):
                if bw > 0:
                    yield ([src], [dst], bw, f"{src}→{dst}")
        for srcs, dsts, bw, name in self.switches:
            yield (srcs, dsts, bw, name)

    def __repr__(self):
        return f"<Topology {self.name}: {self.num_nodes()} nodes>"
