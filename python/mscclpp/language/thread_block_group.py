"""Threadblocks that run one operation together, each on its slice."""


class ThreadBlockGroup:
    def __init__(self, tb_list):
        if len(set(tb_list)) != len(tb_list):
            raise ValueError(f"ThreadBlockGroup: threadblocks repeat in {list(tb_list)}")
        self.tb_list = list(tb_list)

    def get_internal_id(self, tb):
        if tb not in self.tb_list:
            raise ValueError(f"threadblock {tb} is not in the group {self.tb_list}")
        return self.tb_list.index(tb)

    def numtb(self):
        return len(self.tb_list)

    def __len__(self):
        return len(self.tb_list)

    def tbg_overlap(self, other):
        return bool(set(self.tb_list) & set(other.tb_list))

    def tb_overlap(self, tb_id):
        return tb_id in self.tb_list

    def to_dict(self, tb):
        return {"tb_id": self.get_internal_id(tb), "tbg_size": self.numtb()}

    def start_offset(self, tb, size):
        n, k = self.numtb(), self.get_internal_id(tb)
        return k * (size // n) + min(k, size % n)

    def end_offset(self, tb, size):
        n, k = self.numtb(), self.get_internal_id(tb)
        return self.start_offset(tb, size) + size // n + (1 if k < size % n else 0)
